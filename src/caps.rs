//! The capability probe ([`Caps`]) and variant selection ([`Variant`], [`KernelInfo`]).

use std::fmt;

/// How a kernel is implemented. Ordered from most portable to most specialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// Plain WGSL, workgroup-memory reductions, f32. Runs on every adapter, WebGPU included.
    Portable,
    /// WGSL subgroup operations; correct for any subgroup size 4..=128.
    Subgroup,
    /// Hand-written MSL through wgpu's passthrough path (Metal only).
    Native,
    /// WGSL cooperative matrices (`EXPERIMENTAL_COOPERATIVE_MATRIX`): f16 tile products with f32
    /// accumulation on the GPU's matrix units. Used by the prefill attention; it rounds its
    /// matrix inputs to f16 (see the kernel's docs for the error bound).
    Matrix,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Variant::Portable, Variant::Subgroup, Variant::Native, Variant::Matrix];

    /// Parse `portable` / `subgroup` / `native` / `matrix` (case-insensitive).
    pub fn parse(s: &str) -> Option<Variant> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" => Some(Variant::Portable),
            "subgroup" => Some(Variant::Subgroup),
            "native" | "msl" => Some(Variant::Native),
            "matrix" | "coop" => Some(Variant::Matrix),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Portable => "portable",
            Variant::Subgroup => "subgroup",
            Variant::Native => "native",
            Variant::Matrix => "matrix",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which variant a context uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VariantPolicy {
    /// The best variant the kernel has and the adapter supports.
    #[default]
    Auto,
    /// This variant for every kernel that has it and where the adapter supports it; others use `Auto`.
    /// This is what the `WGKERNELS_VARIANT` environment variable sets.
    Prefer(Variant),
    /// Exactly this variant; kernels that lack it, or adapters that can't run it, return
    /// [`crate::Error::Unsupported`]. The test harness uses this to test each variant.
    Require(Variant),
}

/// Device limits that matter to the kernels.
#[derive(Clone, Debug)]
pub struct KeyLimits {
    pub max_storage_buffer_binding_size: u64,
    pub max_uniform_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_size_x: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_immediate_size: u32,
    pub min_uniform_buffer_offset_alignment: u32,
}

/// What the adapter/device can do, read once when the [`crate::Context`] is made.
#[derive(Clone, Debug)]
pub struct Caps {
    pub backend: wgpu::Backend,
    pub adapter_name: String,
    pub vendor: u32,
    pub device_type: wgpu::DeviceType,
    pub driver: String,
    pub driver_info: String,
    /// Subgroup sizes the adapter reports (Metal reports a fixed 4..64; Apple GPUs run 32).
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    /// `SUBGROUP` enabled on the device.
    pub subgroups: bool,
    /// `SUBGROUP_BARRIER` (WGSL `subgroupBarrier`) enabled on the device.
    pub subgroup_barrier: bool,
    pub shader_f16: bool,
    pub passthrough: bool,
    pub timestamps: bool,
    pub timestamps_inside_passes: bool,
    pub immediates: bool,
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` is enabled on the device ([`crate::Context::new`]
    /// requests it, with wgpu's experimental-features opt-in, whenever the adapter offers it).
    pub cooperative_matrix: bool,
    /// The cooperative-matrix configurations the adapter offers (empty when unknown: a context
    /// wrapping an application's device cannot ask the adapter; see [`crate::Context::from_device`]).
    pub cooperative_matrix_configs: Vec<wgpu::CooperativeMatrixProperties>,
    /// Testing aid: Native pipelines on Vulkan are built from SPIR-V of their WGSL twins
    /// (set from `ContextOptions::with_native_spirv_twins`, `testkit` feature; see `native.rs`).
    pub native_twins: bool,
    /// The context's launch-plan overrides (a copy of [`crate::ContextOptions::tuning`]), so that
    /// the plan functions, which take `Caps`, see them. Default everywhere but in a context.
    pub tuning: crate::tuning::Tuning,
    pub limits: KeyLimits,
    /// Set for a context on an application's device ([`crate::Context::from_device`],
    /// [`crate::Context::from_adapter_device`]) that lacks features or limits this crate would
    /// use: what is missing and how to get it. The probe report and
    /// [`crate::Context::explain`] show it.
    pub device_warning: Option<String>,
}

impl Caps {
    /// Build from what a device was created with (`features`, `limits`), its adapter's info and
    /// the adapter's cooperative-matrix configurations (`&[]` when unknown).
    pub fn from_device(info: &wgpu::AdapterInfo, features: wgpu::Features, limits: &wgpu::Limits, coop: &[wgpu::CooperativeMatrixProperties]) -> Caps {
        use wgpu::Features as F;
        Caps {
            backend: info.backend,
            adapter_name: info.name.clone(),
            vendor: info.vendor,
            device_type: info.device_type,
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            subgroup_min_size: info.subgroup_min_size,
            subgroup_max_size: info.subgroup_max_size,
            subgroups: features.contains(F::SUBGROUP),
            subgroup_barrier: features.contains(F::SUBGROUP_BARRIER),
            shader_f16: features.contains(F::SHADER_F16),
            passthrough: features.contains(F::PASSTHROUGH_SHADERS),
            timestamps: features.contains(F::TIMESTAMP_QUERY),
            timestamps_inside_passes: features.contains(F::TIMESTAMP_QUERY_INSIDE_PASSES),
            immediates: features.contains(F::IMMEDIATES),
            cooperative_matrix: features.contains(F::EXPERIMENTAL_COOPERATIVE_MATRIX),
            cooperative_matrix_configs: coop.to_vec(),
            native_twins: false,
            tuning: crate::tuning::Tuning::default(),
            device_warning: None,
            limits: KeyLimits {
                max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
                max_uniform_buffer_binding_size: limits.max_uniform_buffer_binding_size,
                max_buffer_size: limits.max_buffer_size,
                max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
                max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
                max_compute_workgroup_size_x: limits.max_compute_workgroup_size_x,
                max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
                max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
                max_immediate_size: limits.max_immediate_size,
                min_uniform_buffer_offset_alignment: limits.min_uniform_buffer_offset_alignment,
            },
        }
    }

    /// A nominal desktop-class adapter (subgroups 32, f16, 48 KiB workgroup memory, 16x16x16
    /// f16 cooperative matrices) for offline use, e.g. enumerating pipelines in the shader checks.
    pub fn nominal() -> Caps {
        let info = wgpu::AdapterInfo {
            name: "nominal".into(),
            vendor: 0,
            device: 0,
            device_type: wgpu::DeviceType::DiscreteGpu,
            device_pci_bus_id: String::new(),
            driver: String::new(),
            driver_info: String::new(),
            backend: wgpu::Backend::Noop,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
            transient_saves_memory: None,
            limit_bucket: None,
        };
        let limits = wgpu::Limits { max_compute_workgroup_storage_size: 48 << 10, ..wgpu::Limits::default() };
        let f = crate::context::wanted_features() | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let coop = wgpu::CooperativeMatrixProperties {
            m_size: 16,
            n_size: 16,
            k_size: 16,
            ab_type: wgpu::CooperativeScalarType::F16,
            cr_type: wgpu::CooperativeScalarType::F32,
            saturating_accumulation: false,
        };
        Caps::from_device(&info, f, &limits, &[coop])
    }

    /// Whether the adapter can run a variant at all (independent of any kernel).
    pub fn variant_support(&self, v: Variant) -> Result<(), String> {
        match v {
            Variant::Portable => Ok(()),
            Variant::Subgroup => {
                if !self.subgroups {
                    Err("adapter lacks Features::SUBGROUP".into())
                } else if self.subgroup_max_size > 128 || self.subgroup_min_size == 0 && self.subgroup_max_size == 0 {
                    Err(format!("subgroup size range {}..{} outside the 1..128 the kernels are written for", self.subgroup_min_size, self.subgroup_max_size))
                } else {
                    Ok(())
                }
            }
            Variant::Native => self.native_support(),
            Variant::Matrix => {
                if !self.cooperative_matrix {
                    Err("device lacks Features::EXPERIMENTAL_COOPERATIVE_MATRIX (the adapter does not offer it, or an application's device did not request it)".into())
                } else if self.cooperative_matrix_configs.is_empty() {
                    Err("no cooperative-matrix configurations known (a context from an application's device cannot ask the adapter)".into())
                } else if !self.shader_f16 {
                    Err("adapter lacks Features::SHADER_F16 (the matrix inputs are f16)".into())
                } else if !self.subgroups {
                    Err("adapter lacks Features::SUBGROUP (matrix kernels place their tiles by subgroup)".into())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether the adapter offers a square `size`-sized cooperative matrix product with `ab`
    /// inputs and `cr` accumulator/result.
    pub fn has_coop_config(&self, size: u32, ab: wgpu::CooperativeScalarType, cr: wgpu::CooperativeScalarType) -> bool {
        self.cooperative_matrix_configs.iter().any(|c| c.m_size == size && c.n_size == size && c.k_size == size && c.ab_type == ab && c.cr_type == cr)
    }

    /// The offered configurations as `MxNxK ab->cr` for reports.
    fn coop_summary(&self) -> String {
        let t = |t: wgpu::CooperativeScalarType| format!("{t:?}").to_ascii_lowercase();
        let v: Vec<String> = self.cooperative_matrix_configs.iter().map(|c| format!("{}x{}x{} {}->{}", c.m_size, c.n_size, c.k_size, t(c.ab_type), t(c.cr_type))).collect();
        if v.is_empty() {
            "none known".into()
        } else {
            v.join(", ")
        }
    }

    /// See `native.rs`. Metal: needs PASSTHROUGH_SHADERS, simdgroup reductions (wgpu enables
    /// SUBGROUP on Metal only for the Apple7+/Mac2/Metal3 families) and 128-thread threadgroups.
    /// Vulkan: only in SPIR-V twin mode (a testing aid), with PASSTHROUGH_SHADERS and subgroups.
    fn native_support(&self) -> Result<(), String> {
        let tg = crate::native::NATIVE_TG;
        match self.backend {
            wgpu::Backend::Metal => {
                if !self.passthrough {
                    Err("Metal adapter without PASSTHROUGH_SHADERS".into())
                } else if !self.subgroups {
                    Err("Metal GPU family without simdgroup reductions (needs Apple7+, Mac2 or Metal3; wgpu reports no SUBGROUP)".into())
                } else if self.limits.max_compute_invocations_per_workgroup < tg {
                    Err(format!("threadgroups of {tg} threads needed, adapter allows {}", self.limits.max_compute_invocations_per_workgroup))
                } else {
                    Ok(())
                }
            }
            wgpu::Backend::Vulkan if self.native_twins => {
                if !self.passthrough {
                    Err("SPIR-V twin mode: Vulkan adapter without PASSTHROUGH_SHADERS".into())
                } else {
                    self.variant_support(Variant::Subgroup).map_err(|e| format!("SPIR-V twin mode: the twins are Subgroup WGSL: {e}"))
                }
            }
            b => Err(format!("MSL passthrough needs the Metal backend (this is {b:?})")),
        }
    }

    /// Human-readable multi-line report (used by the probe example).
    pub fn report(&self) -> String {
        let l = &self.limits;
        let yn = |b: bool| if b { "yes" } else { "no" };
        let warning = self.device_warning.as_ref().map(|w| format!("\nWARNING      {w}")).unwrap_or_default();
        format!(
            "adapter      {} ({:?}, {:?}, vendor 0x{:04x})\n\
             driver       {} {}\n\
             subgroups    {} (size {}..{})\n\
             shader f16   {}\n\
             passthrough  {}\n\
             timestamps   {} (inside passes: {})\n\
             immediates   {}\n\
             coop matrix  {} ({})\n\
             native tier  {}\n\
             limits       storage binding {} MiB, buffer {} MiB, {} storage buffers/stage,\n\
             \x20            {} invocations/workgroup, {} KiB workgroup memory, {} workgroups/dim{}",
            self.adapter_name,
            self.backend,
            self.device_type,
            self.vendor,
            self.driver,
            self.driver_info,
            yn(self.subgroups),
            self.subgroup_min_size,
            self.subgroup_max_size,
            yn(self.shader_f16),
            yn(self.passthrough),
            yn(self.timestamps),
            yn(self.timestamps_inside_passes),
            yn(self.immediates),
            yn(self.cooperative_matrix),
            self.coop_summary(),
            match self.variant_support(Variant::Native) {
                Ok(()) if self.backend == wgpu::Backend::Metal => "available (MSL passthrough)".to_string(),
                Ok(()) => "available as SPIR-V twins of the MSL kernels (testing aid; MSL not executed)".to_string(),
                Err(e) => format!("unavailable: {e}"),
            },
            l.max_storage_buffer_binding_size >> 20,
            l.max_buffer_size >> 20,
            l.max_storage_buffers_per_shader_stage,
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroup_storage_size >> 10,
            l.max_compute_workgroups_per_dimension,
            warning,
        )
    }
}

/// A kernel's extra requirement check: `Err(reason)` when `caps` cannot run `variant`.
pub type ExtraCheck = fn(&Caps, Variant) -> Result<(), String>;

/// The cases of a kernel's Native self-check ([`KernelInfo`]): run against their CPU
/// references before the kernel's first Native dispatch on a context.
pub(crate) type NativeChecks = fn(&KernelInfo) -> Vec<Box<dyn crate::suite::Case>>;

/// Static description of one kernel: its name, the variants it is implemented in and any
/// extra requirement beyond [`Caps::variant_support`]. Each kernel module declares one per kernel
/// ([`KernelInfo::new`]); a kernel with a Native variant also names its self-check cases.
pub struct KernelInfo {
    pub name: &'static str,
    /// Implemented variants, most preferred last.
    pub variants: &'static [Variant],
    /// Extra per-kernel requirement (e.g. f16). `None` means none.
    pub extra: Option<ExtraCheck>,
    /// The Native self-check's cases: `Some` exactly for this crate's kernels with a Native
    /// variant (a unit test holds every kernel to that).
    pub(crate) native_checks: Option<NativeChecks>,
}

impl KernelInfo {
    /// A kernel without a Native self-check (a Native variant of such a kernel is reported
    /// unchecked and runs unverified).
    pub const fn new(name: &'static str, variants: &'static [Variant], extra: Option<ExtraCheck>) -> KernelInfo {
        KernelInfo { name, variants, extra, native_checks: None }
    }

    /// The same kernel with its Native self-check cases.
    pub(crate) const fn checked(self, cases: NativeChecks) -> KernelInfo {
        KernelInfo { native_checks: Some(cases), ..self }
    }

    /// Can this kernel run as `v` on an adapter with `caps`? `Err` carries the reason.
    pub fn support(&self, caps: &Caps, v: Variant) -> Result<(), String> {
        if !self.variants.contains(&v) {
            return Err(format!("{} has no {v} implementation", self.name));
        }
        caps.variant_support(v)?;
        match self.extra {
            Some(f) => f(caps, v),
            None => Ok(()),
        }
    }

    /// The best supported variant (ignoring any policy).
    pub fn best(&self, caps: &Caps) -> Variant {
        self.variants.iter().rev().copied().find(|&v| self.support(caps, v).is_ok()).unwrap_or(Variant::Portable)
    }

    /// Choose a variant under a policy.
    pub fn select(&self, caps: &Caps, policy: VariantPolicy) -> crate::Result<Variant> {
        match policy {
            VariantPolicy::Auto => Ok(self.best(caps)),
            VariantPolicy::Prefer(v) => Ok(if self.support(caps, v).is_ok() { v } else { self.best(caps) }),
            VariantPolicy::Require(v) => self.support(caps, v).map(|_| v).map_err(|reason| crate::Error::Unsupported { kernel: self.name, variant: v, reason }),
        }
    }

    /// One line per variant: chosen / available / why not. Used by the probe report.
    pub fn explain(&self, caps: &Caps, policy: VariantPolicy) -> String {
        let chosen = self.select(caps, policy);
        let mut s = match &chosen {
            Ok(v) => format!("{:<22} -> {v}", self.name),
            Err(e) => format!("{:<22} -> none ({e})", self.name),
        };
        for v in Variant::ALL {
            if chosen.as_ref().ok() == Some(&v) {
                continue;
            }
            match self.support(caps, v) {
                Ok(()) => s += &format!("; {v}: available"),
                Err(r) => {
                    s += &format!("; {v}: {r}");
                    if caps.device_warning.is_some() && r.contains("Features::") {
                        s += " (the application's device was created without features it could have: see the probe's WARNING)";
                    }
                }
            }
        }
        s
    }
}
