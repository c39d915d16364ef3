//! The Native tier: hand-written MSL kernels (msl/*.metal) built through wgpu's passthrough path,
//! and what happens around them: where they can run, the fallback when one fails to build, and the
//! SPIR-V stand-in that exercises the same plumbing on Vulkan.
//!
//! * **Where.** [`crate::Caps::variant_support`] allows `Native` on the Metal backend with
//!   `PASSTHROUGH_SHADERS` and simdgroup reductions (wgpu enables `SUBGROUP` on Metal only for the
//!   Apple7+, Mac2 and Metal3 GPU families, exactly the families whose simd_sum / simd_min /
//!   simd_prefix_exclusive_sum our kernels use), plus 128 threads per threadgroup. Elsewhere it says
//!   why not.
//! * **Binding convention.** With no immediates, wgpu's Metal passthrough binds the params uniform
//!   (binding 0) at `[[buffer(0)]]` and storage binding i at `[[buffer(i)]]`; no sizes buffer.
//!   tests/msl_bindings.rs pins every kernel signature to its [`PipelineDesc`].
//! * **Fallback.** If a Native pipeline fails to build (the Metal compiler rejects the MSL, a missing
//!   entry point, ...), the dispatch falls back to the best other variant, the failure is recorded
//!   per kernel, later selections skip Native for that kernel, and the probe report says why. Under
//!   `VariantPolicy::Require(Native)` the error is returned instead. Never a panic.
//! * **Twins on Vulkan.** With `ContextOptions::with_native_spirv_twins` on a Vulkan adapter
//!   with `PASSTHROUGH_SHADERS`, Native pipelines are built through the very same passthrough code
//!   (explicit layout, entry point name, workgroup size, binding order, params struct) from SPIR-V
//!   that naga generates from each kernel's WGSL twin, with the twin's entry point renamed to the
//!   MSL kernel's. Only the MSL text itself is then left unexecuted. A testing aid (tests/passthrough.rs),
//!   available with the `testkit` feature.

use crate::caps::{KernelInfo, Variant, VariantPolicy};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::pipeline::{PipelineDesc, ShaderSource};

/// Threads per threadgroup of the Native GEMV kernels (one team = one threadgroup).
pub const NATIVE_TG: u32 = 128;
/// Rows per threadgroup of the Native GEMV kernels (`ROWS` in msl/int4_gemv.metal, int8_gemv.metal).
pub const NATIVE_ROWS: u32 = 4;

/// Threadgroup size, rows per team and grid for a Native team GEMV over `n` rows: one threadgroup
/// per `NATIVE_ROWS` rows (the kernels grid-stride, so any grid is correct).
pub(crate) fn team_plan(ctx: &Context, n: usize) -> Result<(u32, u32, [u32; 3])> {
    Ok((NATIVE_TG, NATIVE_ROWS, ctx.grid(n.div_ceil(NATIVE_ROWS as usize) as u64)?))
}

impl Context {
    /// The passthrough shader module of a Native pipeline: the MSL on Metal; on Vulkan in twin mode,
    /// SPIR-V from the WGSL twin with its entry point renamed to `desc.entry`.
    pub(crate) fn passthrough_module(&self, label: &str, desc: &PipelineDesc) -> Result<wgpu::ShaderModule> {
        let ShaderSource::Msl { text, .. } = &desc.source else {
            return Err(Error::Pipeline(format!("{label}: not a passthrough pipeline")));
        };
        let [x, y, z] = desc.workgroup_size;
        let entry_points = vec![wgpu::PassthroughShaderEntryPoint { name: desc.entry.into(), workgroup_size: (x, y, z) }];
        let mut d = wgpu::ShaderModuleDescriptorPassthrough { label: Some(label), entry_points: entry_points.into(), ..Default::default() };
        match self.caps().backend {
            wgpu::Backend::Metal if self.caps().passthrough => d.msl = Some((*text).into()),
            #[cfg(feature = "testkit")]
            wgpu::Backend::Vulkan if self.caps().passthrough && self.caps().native_twins => {
                d.spirv = Some(crate::shaders::twin_spirv(desc).map_err(|e| Error::Pipeline(format!("{label}: twin: {e}")))?.into());
            }
            b => return Err(Error::Pipeline(format!("{label}: Native pipelines need Metal with PASSTHROUGH_SHADERS (this is {b:?})"))),
        }
        // SAFETY: passthrough code bypasses wgpu's validation. The MSL kernels are pinned to `desc`
        // (buffer indices, address spaces, element types, params struct) by tests/msl_bindings.rs and
        // compile-checked by tests/msl_clang.rs; every kernel validates shapes and buffer lengths on
        // the host and guards every index; the SPIR-V twins are naga output of validated WGSL.
        Ok(unsafe { self.device.create_shader_module_passthrough(d) })
    }

    /// Why the Native pipeline of `kernel` failed to build on this context, if it did.
    pub fn native_failure(&self, kernel: &str) -> Option<String> {
        self.pipelines.native_failures.lock().ok()?.get(kernel).cloned()
    }

    fn record_native_failure(&self, kernel: &'static str, reason: String) {
        if let Ok(mut m) = self.pipelines.native_failures.lock() {
            m.entry(kernel).or_insert(reason);
        }
    }

    /// The variant `kernel` runs as, after any recorded Native build failure: the best other
    /// supported variant (or, under `Require(Native)`, [`Error::Unsupported`] with the reason).
    pub(crate) fn variant_after_failures(&self, kernel: &KernelInfo, chosen: Variant) -> Result<Variant> {
        let Some(reason) = (chosen == Variant::Native).then(|| self.native_failure(kernel.name)).flatten() else {
            return Ok(chosen);
        };
        if let VariantPolicy::Require(_) = self.options().policy {
            return Err(Error::Unsupported { kernel: kernel.name, variant: Variant::Native, reason: format!("native pipeline failed to build: {reason}") });
        }
        Ok(kernel.variants.iter().rev().copied().find(|&v| v != Variant::Native && kernel.support(self.caps(), v).is_ok()).unwrap_or(Variant::Portable))
    }

    /// Run `record(variant)` for the variant `kernel` is selected as; if that is Native and its
    /// pipeline fails to build, record why and run it again with the fallback variant.
    /// `record` must not have recorded anything when it returns [`Error::Pipeline`] (true of
    /// [`crate::Batch::dispatch`], which builds the pipeline first).
    pub fn with_native_fallback(&self, kernel: &KernelInfo, mut record: impl FnMut(Variant) -> Result<()>) -> Result<()> {
        let v = self.variant_for(kernel)?;
        match record(v) {
            Err(Error::Pipeline(reason)) if v == Variant::Native => {
                self.record_native_failure(kernel.name, reason.clone());
                match self.options().policy {
                    VariantPolicy::Require(_) => Err(Error::Pipeline(reason)),
                    _ => record(self.variant_for(kernel)?),
                }
            }
            r => r,
        }
    }

    /// For every kernel selected as Native here, build all its Native pipelines now, recording
    /// failures (so they fall back and show in the probe report). Returns one line per kernel tried.
    /// (Without this, a Native pipeline that fails to build is found, recorded and falls back at
    /// its first use.)
    #[cfg(feature = "testkit")]
    pub fn probe_native(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for k in crate::kernels::registry() {
            let info = k.info();
            if info.select(self.caps(), self.options().policy).ok() != Some(Variant::Native) || self.native_failure(info.name).is_some() {
                continue;
            }
            let mut built = 0;
            for (label, desc) in k.pipelines().into_iter().filter(|(_, d)| d.twin().is_some()) {
                match self.build_desc(label, desc) {
                    Ok(_) => built += 1,
                    Err(e) => {
                        self.record_native_failure(info.name, e.to_string());
                        break;
                    }
                }
            }
            lines.push(match self.native_failure(info.name) {
                Some(r) => format!("{}: native FAILED, falls back: {r}", info.name),
                None => format!("{}: {built} native pipelines built", info.name),
            });
        }
        lines
    }

    /// [`KernelInfo::explain`] plus any recorded Native build failure.
    pub fn explain(&self, kernel: &KernelInfo) -> String {
        let mut s = kernel.explain(self.caps(), self.options().policy);
        if let Some(r) = self.native_failure(kernel.name) {
            s += &format!("; native pipeline failed, falls back to {}: {r}", self.variant_for(kernel).map(|v| v.name()).unwrap_or("none"));
        }
        s
    }
}
