//! The Native plumbing on a real driver. On Vulkan, `PASSTHROUGH_SHADERS` takes SPIR-V, and the
//! passthrough path (explicit layout, entry point, workgroup size, binding order, params structs,
//! dispatch planning, fallback) is the same Rust code whatever the source language. So in SPIR-V
//! twin mode every Native pipeline is built through `create_shader_module_passthrough` from SPIR-V
//! that naga generates from the kernel's WGSL twin (entry point renamed to the MSL kernel's), and
//! every Native kernel is run over its whole test grid against the CPU reference. Only the MSL text
//! itself is left unexecuted (see tests/msl_*.rs for what is checked about it).
//!
//! Also here: off Metal (and outside twin mode) the probe reports Native unsupported with the
//! reason; a Native pipeline that fails to build falls back, is reported, and never panics.

mod common;

use wgkernels::caps::KernelInfo;
use wgkernels::pipeline::{PipelineDesc, PipelineKey, StorageBinding};
use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, Caps, Context, ContextOptions, Error, Variant, VariantPolicy};

/// A twin-mode context, or `None` (with the reason printed) where the adapter can't do it.
fn twin_context(base: &Context, policy: VariantPolicy) -> Option<Context> {
    let ctx = base.with_options(ContextOptions::default().with_policy(policy).with_native_spirv_twins(true));
    match ctx.caps().variant_support(Variant::Native) {
        Ok(()) => Some(ctx),
        Err(e) => {
            println!("SKIPPED: SPIR-V twin mode unavailable on {} ({:?}): {e}", ctx.caps().adapter_name, ctx.caps().backend);
            None
        }
    }
}

#[test]
fn native_plumbing_runs_spirv_twins_correctly() {
    let base = common::context();
    println!("{}", base.caps().report());
    if base.caps().backend == wgkernels::wgpu::Backend::Metal {
        println!("Metal adapter: the Native kernels run as MSL in the harness; twin mode is for Vulkan");
        return;
    }
    let Some(ctx) = twin_context(&base, VariantPolicy::Require(Variant::Native)) else {
        // lavapipe and NVIDIA's Vulkan driver both offer PASSTHROUGH_SHADERS; CI runs lavapipe.
        assert_ne!(base.caps().backend, wgkernels::wgpu::Backend::Vulkan, "a Vulkan adapter must support twin mode");
        return;
    };
    println!("{}", ctx.caps().report());
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)");
    let mut rng = Rng::new(seed);
    let (mut passed, mut failures, mut kernels_run) = (0, Vec::new(), 0);
    for kernel in kernels::registry() {
        let info = kernel.info();
        if !info.variants.contains(&Variant::Native) {
            continue;
        }
        assert_eq!(ctx.variant_for(info), Ok(Variant::Native), "{} not selected as Native in twin mode", info.name);
        kernels_run += 1;
        for case in kernel.test_cases() {
            let start = std::time::Instant::now();
            match run_case(&ctx, case.as_ref(), &mut rng) {
                Ok(c) if c.passed() => {
                    passed += 1;
                    println!("{:<16} native(spirv twin) {:<36} PASS  {} ({:.1} s)", info.name, case.name(), c.summary(), start.elapsed().as_secs_f64());
                }
                Ok(c) => failures.push(format!("{} {}: {}", info.name, case.name(), c.summary())),
                Err(e) => failures.push(format!("{} {}: {e}", info.name, case.name())),
            }
        }
        assert_eq!(ctx.native_failure(info.name), None, "{}: a Native pipeline failed to build", info.name);
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    println!("twin mode: {passed} cases passed over {kernels_run} Native kernels, {} failed", failures.len());
    assert!(failures.is_empty(), "{} Native (SPIR-V twin) cases failed (seed {seed})", failures.len());
    assert!(passed > 0 && kernels_run > 0);
    // The probe builds every Native pipeline up front and reports each kernel.
    let auto = twin_context(&base, VariantPolicy::Auto).expect("twin mode");
    let start = std::time::Instant::now();
    let report = wgkernels::probe_report(&auto);
    println!("probe (builds every Native pipeline, runs every self-check): {:.1} s", start.elapsed().as_secs_f64());
    println!("{report}");
    assert!(report.contains("native pipelines built") && !report.contains("FAILED"), "{report}");
}

#[test]
fn probe_reports_native_unsupported_with_reason() {
    let base = common::context();
    let report = wgkernels::probe_report(&base);
    println!("{report}");
    if base.caps().backend != wgkernels::wgpu::Backend::Metal {
        let reason = base.caps().variant_support(Variant::Native).expect_err("Native must be unsupported off Metal");
        assert!(reason.contains("Metal"), "{reason}");
        assert!(report.contains(&format!("native tier  unavailable: {reason}")), "{report}");
        for k in kernels::registry().iter().filter(|k| k.info().variants.contains(&Variant::Native)) {
            assert_ne!(base.variant_for(k.info()), Ok(Variant::Native));
            assert!(report.contains(&format!("native: {reason}")), "{}: reason missing from the report", k.info().name);
        }
    }
}

// A kernel whose Native pipeline can never build: its "MSL" twin disagrees with it on the
// workgroup size, which the twin translation refuses (standing in for a Metal compile error).
const BROKEN: KernelInfo = KernelInfo::new("broken_native", &[Variant::Portable, Variant::Subgroup, Variant::Native], None);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CopyKey(Variant);

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CopyParams {
    len: u32,
    _p: [u32; 3],
}

const COPY_WGSL: &str = "struct P { len: u32, a: u32, b: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.len) { dst[g.x] = src[g.x] + 1.0; } }
";
const COPY_BINDINGS: &[StorageBinding] = &[StorageBinding::read("src", "f32"), StorageBinding::write("dst", "f32")];

impl PipelineKey for CopyKey {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let wgsl = PipelineDesc {
            source: wgkernels::pipeline::ShaderSource::Wgsl(vec![COPY_WGSL]),
            entry: "main",
            constants: vec![],
            workgroup_size: [64, 1, 1],
            params_size: 16,
            bindings: COPY_BINDINGS,
        };
        if self.0 != Variant::Native {
            return wgsl;
        }
        let mut d = PipelineDesc::native("kernel void broken(", "broken", wgsl);
        d.workgroup_size = [32, 1, 1];
        d
    }
}

#[test]
fn failing_native_pipeline_falls_back_and_reports() {
    let base = common::context();
    let Some(ctx) = twin_context(&base, VariantPolicy::Auto) else { return };
    let src = ctx.upload(&[1.0f32, 2.0, 3.0]).expect("upload");
    let dst = ctx.alloc::<f32>(3).expect("alloc");
    let params = CopyParams { len: 3, _p: [0; 3] };
    let mut tried = Vec::new();
    let mut b = ctx.batch();
    let r = ctx.with_native_fallback(&BROKEN, |v| {
        tried.push(v);
        b.dispatch(&CopyKey(v), &params, &[src.raw(), dst.raw()], [1, 1, 1])
    });
    assert_eq!(r, Ok(()), "fallback dispatch");
    b.run().expect("run");
    assert_eq!(tried, vec![Variant::Native, Variant::Subgroup]);
    assert_eq!(ctx.read(&dst).expect("read"), vec![2.0, 3.0, 4.0]);
    let reason = ctx.native_failure("broken_native").expect("failure recorded");
    println!("recorded: {reason}");
    // Off Metal the twin translation refuses the mismatch; on Metal the compiler rejects the MSL.
    let metal = base.caps().backend == wgkernels::wgpu::Backend::Metal;
    assert!(metal || reason.contains("workgroup"), "{reason}");
    assert_eq!(ctx.variant_for(&BROKEN), Ok(Variant::Subgroup), "later selections skip Native");
    assert!(ctx.explain(&BROKEN).contains("native pipeline failed, falls back to subgroup"), "{}", ctx.explain(&BROKEN));
    // Requiring Native: the error comes back (typed), no fallback, no panic.
    let strict = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Native)).with_native_spirv_twins(true));
    let mut b = strict.batch();
    let r = strict.with_native_fallback(&BROKEN, |v| b.dispatch(&CopyKey(v), &params, &[src.raw(), dst.raw()], [1, 1, 1]));
    assert!(matches!(r, Err(Error::Pipeline(_))), "{r:?}");
    assert!(matches!(strict.variant_for(&BROKEN), Err(Error::Unsupported { .. })));
    // Outside twin mode on a non-Metal adapter, a Native pipeline is refused with a reason.
    if base.caps().backend != wgkernels::wgpu::Backend::Metal {
        match base.pipeline(&CopyKey(Variant::Native)) {
            Err(Error::Pipeline(e)) => assert!(e.contains("Metal"), "{e}"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a Native pipeline built off Metal outside twin mode"),
        }
    }
}

/// The attn_decode grid above runs Native for the head dims with an MSL entry point (and the
/// Subgroup plan for the rest): pin that the plan really is the Native one there, with teams
/// that fit this adapter's subgroups (the twin runs on them), so the grid is not silently
/// exercising only the fallback.
#[test]
fn attn_decode_twin_mode_uses_the_native_plan() {
    use wgkernels::kernels::attention::{decode_plan, native_decode_entry, AttnShape};
    let base = common::context();
    let Some(ctx) = twin_context(&base, VariantPolicy::Require(Variant::Native)) else { return };
    let caps = ctx.caps();
    let mut native = 0;
    for d in [6, 10, 64, 80, 96, 128, 256] {
        for kv_f16 in [false, true] {
            for (h, kvh) in [(4, 4), (8, 2), (12, 1), (16, 2)] {
                let plan = decode_plan(caps, Variant::Native, &AttnShape::new(h, kvh, d), kv_f16, 4096).expect("plan");
                let entry = native_decode_entry(d, kv_f16);
                assert_eq!(plan.native, entry.is_some(), "d {d} f16 {kv_f16}: {plan:?}");
                if plan.native {
                    assert!(plan.lanes as u32 <= caps.subgroup_min_size, "{plan:?}");
                    native += 1;
                }
            }
        }
    }
    assert!(native > 0);
    println!("{native} Native plans");
    // GQA groups the Native plan balances (GB = ceil(group / gblocks) below the cap, e.g. 10 heads
    // in blocks of 5), against the f64 reference: the kernel derives GB from the params that way.
    use wgkernels::kernels::attention::cases::DecodeCase;
    use wgkernels::kernels::rope::PairLayout;
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)");
    let mut rng = Rng::new(seed);
    for (pos, h, kvh, d, kv_f16) in [(700, 10, 1, 64, false), (300, 20, 2, 96, true), (77, 7, 1, 128, true)] {
        let shape = AttnShape::new(h, kvh, d);
        let plan = decode_plan(caps, Variant::Native, &shape, kv_f16, pos + 1).expect("plan");
        assert!(plan.native, "{plan:?}");
        let case = DecodeCase { pos, shape, layout: PairLayout::HalfSplit, kv_f16, mode: 1, window: None, softcap: None, attend_only: false, q8: false };
        let c = run_case(&ctx, &case, &mut rng).expect("run");
        println!("attn_decode native(spirv twin) h={h}/{kvh} d={d} f16={kv_f16} gb={} gblocks={}: {}", plan.gb, plan.gblocks, c.summary());
        assert!(c.passed(), "{}", c.summary());
    }
    assert_eq!(ctx.native_failure("attn_decode"), None);
}

/// The Native self-check: before Auto first runs a kernel as Native it runs the kernel's
/// self-check cases (built in every build, not only with `testkit`) and compares them with the
/// CPU reference. A twin corrupted on purpose (every float addition a
/// subtraction) must be caught, reported (diagnostics, explain, probe report) and fall back, with
/// correct results; an intact twin passes the check and stays Native.
#[test]
fn native_self_check_catches_a_wrong_kernel_and_falls_back() {
    use wgkernels::native::SelfCheck;
    let base = common::context();
    let Some(_) = twin_context(&base, VariantPolicy::Auto) else { return };
    // The Q8_0 GEMV; its n = 33 case runs the MSL entry point of 2 rows per threadgroup.
    let kernel = kernels::registry().into_iter().find(|k| k.info().name == "mm_gemv_q8_0").expect("mm_gemv_q8_0 registered");
    let info = kernel.info();
    let case = kernel.test_cases().into_iter().find(|c| c.name().contains("n=33")).expect("an n=33 case");
    let seed = Rng::fresh_seed();
    println!("seed {seed}");
    let mut rng = Rng::new(seed);

    // The fault has teeth: under Require(Native) (no self-check, no fallback) the result is wrong.
    let opts = |p| ContextOptions::default().with_policy(p).with_native_spirv_twins(true).with_native_twin_fault("mm_gemv_q8_0_r2");
    let required = base.with_options(opts(VariantPolicy::Require(Variant::Native)));
    let c = run_case(&required, case.as_ref(), &mut rng).expect("run");
    println!("corrupted twin under Require(Native): {}", c.summary());
    assert!(!c.passed(), "the corrupted twin computed a correct result: the fault tests nothing");

    // Auto: the self-check catches it, the kernel falls back, the result is right.
    let auto = base.with_options(opts(VariantPolicy::Auto));
    assert_eq!(auto.variant_for(info), Ok(Variant::Subgroup), "a failed self-check must fall back");
    let c = run_case(&auto, case.as_ref(), &mut rng).expect("run");
    assert!(c.passed(), "fallback result: {}", c.summary());
    let reason = auto.native_failure(info.name).expect("failure recorded");
    println!("recorded: {reason}");
    assert!(reason.contains("self-check failed") && reason.contains("differs from the CPU reference"), "{reason}");
    let diag = auto.native_diagnostics();
    println!("{diag:?}");
    let d = diag.iter().find(|d| d.kernel == info.name).expect("diagnostic");
    assert!(matches!(&d.check, SelfCheck::Failed(_)) && d.failure.is_some(), "{d:?}");
    assert!(auto.explain(info).contains("native pipeline failed, falls back to subgroup"), "{}", auto.explain(info));
    let report = wgkernels::probe_report(&auto);
    assert!(report.contains("mm_gemv_q8_0: native FAILED, falls back to subgroup: self-check failed"), "{report}");
    // Other kernels are unaffected.
    assert!(auto.native_failure("mm_gemv_q6_k").is_none());

    // Without the fault the check passes and Native is kept.
    let clean = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Auto).with_native_spirv_twins(true));
    assert_eq!(clean.variant_for(info), Ok(Variant::Native));
    let d = clean.native_diagnostics().into_iter().find(|d| d.kernel == info.name).expect("diagnostic");
    println!("{d:?}");
    assert!(matches!(&d.check, SelfCheck::Passed(_)) && d.failure.is_none(), "{d:?}");
    let c = run_case(&clean, case.as_ref(), &mut rng).expect("run");
    assert!(c.passed(), "{}", c.summary());
}

/// Every Native entry point (MSL kernel) of every kernel, with its twin corrupted: either the
/// self-check of its kernel fails and the kernel falls back, or the corruption changes nothing
/// (the corrupted twin still passes the kernel's whole test grid under `Require(Native)`, where
/// nothing falls back: true of the quantiser's twins, whose results use no float addition).
#[test]
fn native_self_check_covers_every_entry_point() {
    let base = common::context();
    let Some(_) = twin_context(&base, VariantPolicy::Auto) else { return };
    let mut rng = Rng::new(Rng::fresh_seed());
    let (mut caught, mut harmless) = (Vec::new(), Vec::new());
    for kernel in kernels::registry() {
        let info = kernel.info();
        let mut entries: Vec<&'static str> = kernel.pipelines().into_iter().filter(|(_, d)| d.twin().is_some()).map(|(_, d)| d.entry).collect();
        entries.sort_unstable();
        entries.dedup();
        for entry in entries {
            let opts = |p| ContextOptions::default().with_policy(p).with_native_spirv_twins(true).with_native_twin_fault(entry);
            let ctx = base.with_options(opts(VariantPolicy::Auto));
            let v = ctx.variant_for(info).expect("a variant");
            let outcome = ctx.native_failure(info.name);
            println!("{:<20} {:<24} -> {:<8} {}", info.name, entry, v.name(), outcome.as_deref().unwrap_or("self-check passed"));
            if let Some(reason) = outcome {
                assert_ne!(v, Variant::Native, "{entry}: failed but not fallen back");
                assert!(reason.contains("self-check failed"), "{entry}: {reason}");
                caught.push(entry);
                continue;
            }
            // Not caught: the corruption must be harmless on the whole grid.
            let required = base.with_options(opts(VariantPolicy::Require(Variant::Native)));
            for case in kernel.test_cases() {
                let c = run_case(&required, case.as_ref(), &mut rng).expect("run");
                assert!(c.passed(), "{entry}: the self-check passed a corrupted twin that fails {}: {}", case.name(), c.summary());
            }
            harmless.push(entry);
        }
    }
    println!("caught {}: {caught:?}\nharmless corruption {}: {harmless:?}", caught.len(), harmless.len());
    assert!(caught.len() >= 20, "{caught:?}");
}
