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
//! * **Self-check** (every build). Before a kernel runs as Native for the first time under
//!   `Auto` or `Prefer` (the first [`Context::variant_for`] that would pick Native), the context
//!   runs the kernel's self-check cases (small shapes, one per MSL entry point, named by its
//!   [`KernelInfo`]) and compares each with its f64 CPU reference within the same
//!   error bounds as the test harness. A build failure or a mismatch
//!   records the kernel as failed (it falls back to the best other variant, as above) and is
//!   reported by [`Context::native_diagnostics`], [`Context::explain`] and the probe report.
//!   `Require(Native)` skips the check (that policy never falls back). The cases and references
//!   are compiled into every build (crate-private without the `testkit` feature); a unit test
//!   checks that every kernel of this crate with a Native variant has cases. A kernel defined
//!   outside this crate (through [`Context::with_native_fallback`]) has none and runs unchecked.
//! * **Testing hooks** (`NativeTesting`, `testkit` feature): a host executor that runs Native
//!   dispatches instead of the GPU (tests/msl_exec.rs executes the MSL itself on the CPU through
//!   it), and a deliberate fault in one twin, to prove the self-check catches a wrong Native kernel.

use crate::caps::{KernelInfo, Variant, VariantPolicy};
use crate::context::Context;
use crate::error::{Error, Result};
#[cfg(feature = "testkit")]
use crate::pipeline::Pipeline;
use crate::pipeline::{PipelineDesc, ShaderSource};
use std::sync::atomic::Ordering;
#[cfg(feature = "testkit")]
use std::sync::Arc;

#[cfg(feature = "testkit")]
/// Runs Native dispatches somewhere other than the GPU (a testing hook, see [`NativeTesting`]).
pub trait NativeExecutor: Send + Sync {
    /// Run the Native pipeline `desc` over `workgroups` threadgroups. `params` is the params
    /// uniform (`buffer(0)`); `buffers[i]` holds binding `i + 1`'s whole contents (zeros for a
    /// buffer that cannot be read back) and is updated in place. `Err` says why it could not run.
    fn execute(&self, desc: &PipelineDesc, params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> std::result::Result<(), String>;
}

#[cfg(feature = "testkit")]
/// Testing hooks of the Native tier (`testkit` feature), in
/// [`crate::ContextOptions::native_testing`]. None is set by default and nothing but tests should
/// set them.
#[derive(Clone, Default)]
pub struct NativeTesting {
    /// Execute every Native dispatch with this instead of the GPU: the batch submits what it has
    /// recorded, reads every bound buffer back, calls the executor and writes the read-write
    /// bindings back.
    pub executor: Option<Arc<dyn NativeExecutor>>,
    /// In SPIR-V twin mode, corrupt the twin of the MSL entry point of this name (every
    /// floating-point addition becomes a subtraction) so its results are wrong.
    pub twin_fault: Option<&'static str>,
}

#[cfg(feature = "testkit")]
impl std::fmt::Debug for NativeTesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeTesting").field("executor", &self.executor.is_some()).field("twin_fault", &self.twin_fault).finish()
    }
}

#[cfg(feature = "testkit")]
impl crate::ContextOptions {
    /// Testing hook: see [`NativeTesting::executor`].
    pub fn with_native_executor(mut self, executor: Arc<dyn NativeExecutor>) -> Self {
        self.native_testing.executor = Some(executor);
        self
    }

    /// Testing hook: see [`NativeTesting::twin_fault`].
    pub fn with_native_twin_fault(mut self, entry: &'static str) -> Self {
        self.native_testing.twin_fault = Some(entry);
        self
    }
}

/// The state of one kernel's Native self-check.
#[derive(Clone, Debug, PartialEq)]
pub enum SelfCheck {
    /// Being run (selections made meanwhile, e.g. by the check's own case, get Native).
    Running,
    /// Passed: the cases and their error summaries.
    Passed(String),
    /// Failed: why (the kernel falls back).
    Failed(String),
    /// Not checked: why (a kernel from outside this crate, which has no self-check cases, or a
    /// Native failure recorded where the check did not run, e.g. under `Require(Native)`).
    Unchecked(String),
}

/// One line of [`Context::native_diagnostics`].
#[derive(Clone, Debug, PartialEq)]
pub struct NativeDiagnostic {
    pub kernel: &'static str,
    pub check: SelfCheck,
    /// Why Native is not used for this kernel on this context (build failure or failed check).
    pub failure: Option<String>,
}

#[cfg(feature = "testkit")]
/// SPIR-V with every OpFAdd turned into OpFSub (same operands): a wrong but valid module.
fn corrupt_spirv(words: &mut [u32]) {
    const OP_FADD: u32 = 129;
    const OP_FSUB: u32 = 131;
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        if words[i] & 0xffff == OP_FADD {
            words[i] = (words[i] & 0xffff_0000) | OP_FSUB;
        }
        i += count.max(1);
    }
}

/// Threads per threadgroup the Native kernels need (the GEMVs: one team = one threadgroup).
pub const NATIVE_TG: u32 = 128;

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
                let mut words = crate::shaders::twin_spirv(desc, self.options().bounds_checks).map_err(|e| Error::Pipeline(format!("{label}: twin: {e}")))?;
                if self.options().native_testing.twin_fault == Some(desc.entry) {
                    corrupt_spirv(&mut words);
                }
                d.spirv = Some(words.into());
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

    /// The variant `kernel` runs as, after the Native self-check and any recorded Native failure:
    /// the best other supported variant (or, under `Require(Native)`, [`Error::Unsupported`] with
    /// the reason).
    pub(crate) fn variant_after_failures(&self, kernel: &KernelInfo, chosen: Variant) -> Result<Variant> {
        if chosen == Variant::Native && !matches!(self.options().policy, VariantPolicy::Require(_)) {
            self.self_check(kernel);
        }
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

    /// Run `kernel`'s Native self-check unless it has run (or is running) on this context.
    fn self_check(&self, kernel: &KernelInfo) {
        {
            let Ok(mut checks) = self.pipelines.native_checks.lock() else { return };
            if checks.contains_key(kernel.name) {
                return;
            }
            checks.insert(kernel.name, SelfCheck::Running);
        }
        let outcome = match kernel.native_checks {
            None => SelfCheck::Unchecked("not a kernel of this crate: no self-check cases".into()),
            Some(cases) => self.run_self_check(kernel.name, &cases(kernel)),
        };
        if let SelfCheck::Failed(reason) = &outcome {
            self.record_native_failure(kernel.name, format!("self-check failed: {reason}"));
        }
        if let Ok(mut checks) = self.pipelines.native_checks.lock() {
            checks.insert(kernel.name, outcome);
        }
    }

    /// Run `kernel`'s self-check `cases` against their CPU references. Every case that records a
    /// Native dispatch must pass (a case the adapter runs through another plan proves nothing and is
    /// skipped); at least one must record one.
    fn run_self_check(&self, kernel: &'static str, cases: &[Box<dyn crate::suite::Case>]) -> SelfCheck {
        let mut rng = crate::suite::Rng::new(0x5e1f_c4ec);
        let mut passed = Vec::new();
        for case in cases {
            let before = self.pipelines.native_dispatches.load(Ordering::Relaxed);
            let result = crate::suite::run_case(self, case.as_ref(), &mut rng);
            if let Some(reason) = self.native_failure(kernel) {
                return SelfCheck::Failed(format!("{}: {reason}", case.name()));
            }
            if self.pipelines.native_dispatches.load(Ordering::Relaxed) == before {
                continue;
            }
            match result {
                Ok(c) if c.passed() => passed.push(format!("{}: {}", case.name(), c.summary())),
                Ok(c) => return SelfCheck::Failed(format!("{}: result differs from the CPU reference: {}", case.name(), c.summary())),
                Err(e) => return SelfCheck::Failed(format!("{}: {e}", case.name())),
            }
        }
        if passed.is_empty() {
            return SelfCheck::Failed("no self-check case records a Native dispatch".into());
        }
        SelfCheck::Passed(passed.join("; "))
    }

    /// The Native self-check outcome and any Native failure of every kernel checked or failed on
    /// this context so far, by kernel name.
    pub fn native_diagnostics(&self) -> Vec<NativeDiagnostic> {
        let checks = self.pipelines.native_checks.lock().map(|m| m.clone()).unwrap_or_default();
        let failures = self.pipelines.native_failures.lock().map(|m| m.clone()).unwrap_or_default();
        let mut names: Vec<&'static str> = checks.keys().chain(failures.keys()).copied().collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .map(|kernel| NativeDiagnostic {
                kernel,
                check: checks.get(kernel).cloned().unwrap_or(SelfCheck::Unchecked("self-check not run on this context".into())),
                failure: failures.get(kernel).cloned(),
            })
            .collect()
    }

    #[cfg(feature = "testkit")]
    /// Execute a Native dispatch with the host executor (see [`NativeTesting::executor`]); the
    /// batch has submitted and waited for everything recorded before it.
    pub(crate) fn execute_on_host(&self, exec: &dyn NativeExecutor, pipe: &Pipeline, params: &[u8], buffers: &[&wgpu::Buffer], workgroups: [u32; 3]) -> Result<()> {
        let mut data = Vec::with_capacity(buffers.len());
        for b in buffers {
            data.push(if b.usage().contains(wgpu::BufferUsages::COPY_SRC) { self.read_whole(b)? } else { vec![0u8; b.size() as usize] });
        }
        exec.execute(&pipe.desc, params, &mut data, workgroups).map_err(|e| Error::Device(format!("{} on the host executor: {e}", pipe.label)))?;
        for ((b, d), spec) in buffers.iter().zip(&data).zip(pipe.desc.bindings) {
            if !spec.read_only && b.usage().contains(wgpu::BufferUsages::COPY_DST) {
                self.queue.write_buffer(b, 0, d);
            }
        }
        Ok(())
    }

    #[cfg(feature = "testkit")]
    /// The whole contents of a COPY_SRC buffer.
    fn read_whole(&self, buf: &wgpu::Buffer) -> Result<Vec<u8>> {
        let size = buf.size();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgkernels host exec"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("wgkernels host exec") });
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, size);
        let index = self.queue.submit(Some(enc.finish()));
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).map_err(|e| Error::Readback(e.to_string()))?;
        rx.recv().map_err(|e| Error::Readback(e.to_string()))?.map_err(|e| Error::Readback(e.to_string()))?;
        let v = slice.get_mapped_range().map_err(|e| Error::Readback(e.to_string()))?.to_vec();
        staging.unmap();
        Ok(v)
    }

    /// For every kernel of `kernels` (the test kit's registry) selected as Native here, build
    /// all its Native pipelines now, recording failures (so they fall back and show in the probe
    /// report). Returns one line per kernel tried. (Without this, a Native pipeline that fails to
    /// build is found, recorded and falls back at its first use.)
    #[cfg(feature = "testkit")]
    pub fn probe_native(&self, kernels: &[&dyn crate::suite::Kernel]) -> Vec<String> {
        let mut lines = Vec::new();
        for &k in kernels {
            let info = k.info();
            if info.select(self.caps(), self.options().policy).ok() != Some(Variant::Native) {
                continue;
            }
            if let Some(r) = self.native_failure(info.name) {
                lines.push(format!("{}: native FAILED, falls back to {}: {r}", info.name, self.variant_for(info).map(|v| v.name()).unwrap_or("none")));
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
            if self.native_failure(info.name).is_none() {
                let _ = self.variant_for(info); // runs the self-check
            }
            let check = match self.pipelines.native_checks.lock().ok().and_then(|m| m.get(info.name).cloned()) {
                Some(SelfCheck::Passed(s)) => format!(", self-check passed ({s})"),
                Some(SelfCheck::Unchecked(s)) => format!(", not self-checked ({s})"),
                _ => String::new(),
            };
            lines.push(match self.native_failure(info.name) {
                Some(r) => format!("{}: native FAILED, falls back to {}: {r}", info.name, self.variant_for(info).map(|v| v.name()).unwrap_or("none")),
                None => format!("{}: {built} native pipelines built{check}", info.name),
            });
        }
        lines
    }

    #[cfg(feature = "testkit")]
    /// Dispatches recorded through Native pipelines on this context so far, the self-checks'
    /// included (a testing aid: which work runs Native).
    pub fn native_dispatches(&self) -> u64 {
        self.pipelines.native_dispatches.load(Ordering::Relaxed)
    }

    /// [`KernelInfo::explain`] plus the Native self-check's outcome: a recorded Native failure
    /// (build or self-check), a passed check, or a kernel that runs Native unchecked.
    pub fn explain(&self, kernel: &KernelInfo) -> String {
        let _ = self.variant_for(kernel); // runs the Native self-check if Native is selected
        let mut s = kernel.explain(self.caps(), self.options().policy);
        if let Some(r) = self.native_failure(kernel.name) {
            s += &format!("; native pipeline failed, falls back to {}: {r}", self.variant_for(kernel).map(|v| v.name()).unwrap_or("none"));
        } else {
            match self.pipelines.native_checks.lock().ok().and_then(|m| m.get(kernel.name).cloned()) {
                Some(SelfCheck::Passed(_)) => s += "; native self-check passed against the CPU reference",
                Some(SelfCheck::Unchecked(r)) => s += &format!("; native not self-checked: {r}"),
                _ => {}
            }
        }
        s
    }
}

/// The self-check as `Auto` runs it in every build: [`Context::variant_for`] -> `self_check` ->
/// the kernel's `KernelInfo::native_checks` (none of which is `testkit` code). Getting a Native pipeline off
/// Metal takes the SPIR-V twin mode, a `testkit` aid; cargo always builds this crate's tests with
/// `testkit` (the self dev-dependency), so these run under `cargo test --lib`.
#[cfg(all(test, feature = "testkit"))]
mod tests {
    use super::*;
    use crate::ContextOptions;

    /// A twin-mode context under `policy`, with the twin of MSL entry `fault` corrupted; `None`
    /// (with the reason printed) where the adapter has no twin mode.
    fn twin_context(base: &Context, policy: VariantPolicy, fault: Option<&'static str>) -> Option<Context> {
        let mut options = ContextOptions::default().with_policy(policy).with_native_spirv_twins(true);
        if let Some(entry) = fault {
            options = options.with_native_twin_fault(entry);
        }
        let ctx = base.with_options(options);
        match ctx.caps().variant_support(Variant::Native) {
            Ok(()) => Some(ctx),
            Err(e) => {
                println!("SKIPPED: SPIR-V twin mode unavailable on {} ({:?}): {e}", ctx.caps().adapter_name, ctx.caps().backend);
                assert_ne!(ctx.caps().backend, wgpu::Backend::Vulkan, "a Vulkan adapter must support twin mode");
                None
            }
        }
    }

    #[test]
    fn self_check_catches_a_wrong_twin_and_falls_back() {
        let base = Context::new_blocking(ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        // The Q8_0 GEMV: MSL entry points for 2 rows (the case n = 33) and 4 rows (n = 2049).
        let info = crate::kernels::infos().into_iter().find(|i| i.name == "mm_gemv_q8_0").expect("the Q8_0 GEMV");
        let Some(auto) = twin_context(&base, VariantPolicy::Auto, Some("mm_gemv_q8_0_r2")) else { return };
        // The corrupted twin is caught by the first selection and the kernel falls back.
        assert_eq!(auto.variant_for(info), Ok(Variant::Subgroup), "a failed self-check must fall back");
        let reason = auto.native_failure(info.name).expect("failure recorded");
        assert!(reason.starts_with("self-check failed: n=33 k=256") && reason.contains("differs from the CPU reference"), "{reason}");
        let d = auto.native_diagnostics().into_iter().find(|d| d.kernel == info.name).expect("diagnostic");
        assert!(matches!(&d.check, SelfCheck::Failed(r) if r.contains("differs from the CPU reference")), "{d:?}");
        assert_eq!(d.failure.as_deref(), Some(reason.as_str()));
        assert!(auto.explain(info).contains("native pipeline failed, falls back to subgroup: self-check failed"), "{}", auto.explain(info));
        // The check ran once: later selections keep the fallback and record nothing new.
        assert_eq!(auto.variant_for(info), Ok(Variant::Subgroup));
        assert_eq!(auto.native_diagnostics().len(), 1, "{:?}", auto.native_diagnostics());

        // A fault in the other entry point (4 rows per threadgroup) is caught by its own case.
        let r4 = twin_context(&base, VariantPolicy::Auto, Some("mm_gemv_q8_0_r4")).expect("twin mode");
        assert_eq!(r4.variant_for(info), Ok(Variant::Subgroup));
        assert!(r4.native_failure(info.name).is_some_and(|r| r.starts_with("self-check failed: n=2049 k=256")), "{:?}", r4.native_failure(info.name));

        // Intact twins: every case of the kernel's list ran Native and passed; Native is kept.
        let clean = twin_context(&base, VariantPolicy::Auto, None).expect("twin mode");
        assert_eq!(clean.variant_for(info), Ok(Variant::Native));
        let d = clean.native_diagnostics().into_iter().find(|d| d.kernel == info.name).expect("diagnostic");
        let SelfCheck::Passed(summary) = &d.check else { panic!("{d:?}") };
        assert_eq!(summary.split("; ").count(), info.native_checks.expect("cases")(info).len(), "{summary}");
        assert!(d.failure.is_none() && clean.explain(info).contains("native self-check passed"), "{}", clean.explain(info));

        // Require(Native) skips the check: the wrong twin is used (the policy never falls back).
        let required = twin_context(&base, VariantPolicy::Require(Variant::Native), Some("mm_gemv_q8_0_r2")).expect("twin mode");
        assert_eq!(required.variant_for(info), Ok(Variant::Native));
        assert!(required.native_diagnostics().is_empty());
    }

    /// A kernel from outside this crate has no self-check cases: it is reported as unchecked,
    /// not failed, and keeps Native.
    #[test]
    fn kernel_without_cases_is_reported_unchecked() {
        const OUTSIDE: KernelInfo = KernelInfo::new("outside_kernel", &[Variant::Portable, Variant::Native], None);
        let base = Context::new_blocking(ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        let Some(auto) = twin_context(&base, VariantPolicy::Auto, None) else { return };
        assert_eq!(auto.variant_for(&OUTSIDE), Ok(Variant::Native));
        let d = auto.native_diagnostics().into_iter().find(|d| d.kernel == OUTSIDE.name).expect("diagnostic");
        assert!(matches!(&d.check, SelfCheck::Unchecked(r) if r.contains("not a kernel of this crate")), "{d:?}");
        assert!(auto.explain(&OUTSIDE).contains("native not self-checked"), "{}", auto.explain(&OUTSIDE));
    }
}
