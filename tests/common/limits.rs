// Shared by tests/apple_limits.rs and tests/webgpu_limits.rs: a context whose device limits are
// clamped to a target's, and the kernel slice run under them. Every kernel must either pick a
// plan inside the limits and pass its own check, or report UNSUPPORTED with a reason; any other
// error (a limit error, a pipeline wgpu refuses) fails. Every pipeline the run built is then
// checked statically: its workgroup size and its workgroup memory (`shaders::workgroup_bytes`:
// naga's layout of the WGSL's `var<workgroup>`s after overrides, each rounded up to 16 bytes; a
// Native pipeline's through its WGSL twin) within the target's. (The device enforces the binding
// counts, sizes, alignments and workgroup counts; wgpu 30 does not check workgroup memory against
// its limit, so these tests do.)
//
// The Native variant runs through the SPIR-V twin mode (its plan, its twin's code). The slice:
// per kernel and variant, the largest test case that moves at most `SLICE_BYTES` (the large
// shapes are where the workgroup counts and binding sizes bind; the harness runs the whole grid),
// or, for a kernel whose pipelines are slow to build on a CPU adapter (the int8 GEMM: one pipeline
// per m), the first case of its reduced set. `WGKERNELS_KERNEL=substr` runs only the matching
// kernels. Not every test uses all of it.
#![allow(dead_code)]

use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, Context, ContextOptions, Error, Variant, VariantPolicy};

/// Largest case (bytes moved) of the slice.
const SLICE_BYTES: u64 = 4 << 20;

/// The best adapter (every optional feature the library wants that it has) on a device created
/// with `clamp(adapter's limits)`; returns the context and the limits it was created with.
pub fn clamped_context(label: &str, clamp: impl FnOnce(&wgpu::Limits) -> wgpu::Limits) -> (Context, wgpu::Limits) {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        desc.backends = wgpu::Backends::PRIMARY;
    }
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(async {
        match wgpu::util::initialize_adapter_from_env(&instance, None).await {
            Ok(a) => Ok(a),
            Err(_) => instance.request_adapter(&wgpu::RequestAdapterOptions::default()).await,
        }
    })
    .unwrap_or_else(|e| panic!("no GPU adapter ({e}); on a machine without a GPU install lavapipe: apt-get install -y mesa-vulkan-drivers"));
    let limits = clamp(&adapter.limits());
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: adapter.features() & wgkernels::context::wanted_features(),
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .unwrap_or_else(|e| panic!("device with {label} limits: {e}"));
    let ctx = Context::from_device(device, queue, ContextOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    (ctx, limits)
}

/// Run every kernel's slice, every variant it has, on `base`; check every pipeline built against
/// `threads` invocations and `workgroup_memory` bytes. Panics listing the failures.
pub fn every_kernel_within(base: &Context, threads: u32, workgroup_memory: u32, what: &str) {
    println!("\n{}", base.caps().report());
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)\n");
    let mut rng = Rng::new(seed);
    let filter = std::env::var("WGKERNELS_KERNEL").ok().filter(|f| !f.is_empty());
    let (mut passed, mut unsupported, mut pipelines) = (0, 0, 0);
    let mut failures = Vec::new();
    for kernel in kernels::registry() {
        let info = kernel.info();
        if filter.as_deref().is_some_and(|f| !info.name.contains(f)) {
            continue;
        }
        // The slice: the largest case within SLICE_BYTES (else the first); for a kernel whose
        // pipelines are slow to build on a CPU adapter (it runs a reduced set with bounds checks
        // on), the first case of that set.
        let mut cases = kernel.test_cases();
        let reduced = kernel.bounds_checked_cases();
        if reduced.len() < cases.len() {
            cases = reduced.into_iter().take(1).collect();
        }
        let Some(case) = cases.iter().filter(|c| c.bytes() <= SLICE_BYTES).max_by_key(|c| c.bytes()).or(cases.first()) else {
            failures.push(format!("{}: no test cases", info.name));
            continue;
        };
        // Variants the kernel has (one it lacks is not a limit question).
        for v in Variant::ALL.into_iter().filter(|v| info.variants.contains(v)) {
            let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_native_spirv_twins(v == Variant::Native));
            if let Err(reason) = info.support(ctx.caps(), v) {
                println!("{:<22} {:<9} UNSUPPORTED: {reason}", info.name, v.name());
                unsupported += 1;
                continue;
            }
            let t = std::time::Instant::now();
            let line = match run_case(&ctx, case.as_ref(), &mut rng) {
                Err(Error::Unsupported { reason, .. }) => {
                    unsupported += 1;
                    format!("UNSUPPORTED: {reason}")
                }
                Ok(c) if c.passed() => {
                    passed += 1;
                    format!("PASS  {}", c.summary())
                }
                Ok(c) => {
                    failures.push(format!("{} {} {}: {}", info.name, v.name(), case.name(), c.summary()));
                    format!("FAIL  {}", c.summary())
                }
                Err(e) => {
                    failures.push(format!("{} {} {}: {e}", info.name, v.name(), case.name()));
                    format!("ERROR {e}")
                }
            };
            println!("{:<22} {:<9} {:<44} {line} ({:.2} s)", info.name, v.name(), case.name(), t.elapsed().as_secs_f64());
            for (label, desc) in ctx.built_pipelines() {
                pipelines += 1;
                let [x, y, z] = desc.workgroup_size;
                if x * y * z > threads {
                    failures.push(format!("{label}: workgroup {x}x{y}x{z} > {threads} threads"));
                }
                match wgkernels::shaders::workgroup_bytes(&desc) {
                    Ok(b) if b > workgroup_memory as u64 => failures.push(format!("{label}: {b} bytes of workgroup memory > {workgroup_memory}")),
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{label}: workgroup memory not measured: {e}")),
                }
            }
        }
    }
    println!(
        "\n{passed} passed, {unsupported} unsupported, {} failed; {pipelines} pipelines within {workgroup_memory} bytes of workgroup memory and {threads} threads",
        failures.len()
    );
    for f in &failures {
        println!("FAILED: {f}");
    }
    assert!(failures.is_empty(), "{} failures under {what} (seed {seed})", failures.len());
    assert!(passed > 0, "nothing ran");
}
