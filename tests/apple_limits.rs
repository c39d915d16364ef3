//! Apple's limits: a slice of every kernel's test grid, every variant, on a device whose limits are
//! clamped to what wgpu 30's Metal backend reports for Apple GPUs (the table below; its source is
//! wgpu-hal 30's `src/metal/adapter.rs`, written out in docs/METAL.md). Every kernel must either
//! pick a plan inside them and pass its own check, or report UNSUPPORTED with a reason; any other
//! error (a limit error, a pipeline wgpu refuses) fails. Every pipeline the run built is then
//! checked statically: its workgroup size and its workgroup memory (`shaders::workgroup_bytes`: naga's layout of the WGSL's
//! `var<workgroup>`s after overrides, each rounded up to 16 bytes as Metal allocates them; a Native
//! pipeline's through its WGSL twin; the MSL's own threadgroup arrays are checked against the same
//! 32 KiB by tests/msl_clang.rs) within Apple's. (The device enforces the binding counts, sizes,
//! alignments and workgroup counts; wgpu 30 does not check workgroup memory against its limit, so
//! this test does.)
//!
//! The Native variant runs through the SPIR-V twin mode (its plan, its twin's code). The
//! adapter's subgroup sizes are the host's (Metal reports 4..64; the Subgroup kernels assume no
//! subgroup size). The slice: per kernel and variant, the largest test case that moves
//! at most `SLICE_BYTES` (the large shapes are where the workgroup counts and binding sizes bind;
//! the harness runs the whole grid), or, for a kernel whose pipelines are slow to build on a CPU
//! adapter (the int8 GEMM: one pipeline per m), the first case of its reduced set.
//! `WGKERNELS_KERNEL=substr` runs only the matching kernels.

use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, Context, ContextOptions, Error, Variant, VariantPolicy};

/// Largest case (bytes moved) of the slice.
const SLICE_BYTES: u64 = 4 << 20;

/// Threadgroup memory (`maxTotalThreadgroupMemoryAllocation` on every Apple GPU wgpu 30 knows).
const THREADGROUP_MEMORY: u32 = wgkernels::shaders::APPLE_THREADGROUP_MEMORY;
/// Threads per threadgroup.
const THREADS: u32 = 1024;

/// One clamp: (name, Apple's value as wgpu 30 reports it, where it comes from).
struct Clamp {
    name: &'static str,
    apple: u64,
    /// Apple's value is a ceiling (`max_*`) or a floor (`min_*` alignments).
    ceiling: bool,
    get: fn(&mut wgpu::Limits) -> Field<'_>,
}

enum Field<'a> {
    U32(&'a mut u32),
    U64(&'a mut u64),
}

/// wgpu-hal 30, src/metal/adapter.rs (`PhysicalDeviceCapabilities::new`, `capabilities`).
const APPLE: &[Clamp] = &[
    // maxTotalThreadgroupMemoryAllocation: 32 KiB (16 KiB only on GPUs older than iOS family 4 /
    // macOS family 1).
    Clamp { name: "max_compute_workgroup_storage_size", apple: THREADGROUP_MEMORY as u64, ceiling: true, get: |l| Field::U32(&mut l.max_compute_workgroup_storage_size) },
    // maxThreadsPerThreadgroup: 1024 (512 on the older families), in every dimension.
    Clamp { name: "max_compute_invocations_per_workgroup", apple: THREADS as u64, ceiling: true, get: |l| Field::U32(&mut l.max_compute_invocations_per_workgroup) },
    Clamp { name: "max_compute_workgroup_size_x", apple: THREADS as u64, ceiling: true, get: |l| Field::U32(&mut l.max_compute_workgroup_size_x) },
    Clamp { name: "max_compute_workgroup_size_y", apple: THREADS as u64, ceiling: true, get: |l| Field::U32(&mut l.max_compute_workgroup_size_y) },
    Clamp { name: "max_compute_workgroup_size_z", apple: THREADS as u64, ceiling: true, get: |l| Field::U32(&mut l.max_compute_workgroup_size_z) },
    // "No documented limit, matches Vulkan's minimum limit": 0xFFFF.
    Clamp { name: "max_compute_workgroups_per_dimension", apple: 0xffff, ceiling: true, get: |l| Field::U32(&mut l.max_compute_workgroups_per_dimension) },
    // MAX_BUFFERS (31) less 2 reserved (immediates, buffer sizes), shared by storage and uniform.
    Clamp { name: "max_storage_buffers_per_shader_stage", apple: 29, ceiling: true, get: |l| Field::U32(&mut l.max_storage_buffers_per_shader_stage) },
    Clamp { name: "max_uniform_buffers_per_shader_stage", apple: 29, ceiling: true, get: |l| Field::U32(&mut l.max_uniform_buffers_per_shader_stage) },
    // maxBufferLength at run time (device-dependent, GiBs on Apple silicon); its fallbacks are
    // 1 GiB (macOS < 10.14) and 256 MiB (iOS < 12): the smallest wgpu can report.
    Clamp { name: "max_buffer_size", apple: 256 << 20, ceiling: true, get: |l| Field::U64(&mut l.max_buffer_size) },
    Clamp { name: "max_storage_buffer_binding_size", apple: 256 << 20, ceiling: true, get: |l| Field::U64(&mut l.max_storage_buffer_binding_size) },
    Clamp { name: "max_uniform_buffer_binding_size", apple: 256 << 20, ceiling: true, get: |l| Field::U64(&mut l.max_uniform_buffer_binding_size) },
    Clamp { name: "max_immediate_size", apple: 0x1000, ceiling: true, get: |l| Field::U32(&mut l.max_immediate_size) },
    // Constant buffer offset alignment: 256 on macOS (32 or 4 on iOS/tvOS).
    Clamp { name: "min_uniform_buffer_offset_alignment", apple: 256, ceiling: false, get: |l| Field::U32(&mut l.min_uniform_buffer_offset_alignment) },
    // "No documented limit. Use 32, which is the lowest allowed value."
    Clamp { name: "min_storage_buffer_offset_alignment", apple: 32, ceiling: false, get: |l| Field::U32(&mut l.min_storage_buffer_offset_alignment) },
];

/// The adapter's limits clamped to Apple's, and the table (name, adapter, Apple, used).
fn clamp(real: &wgpu::Limits) -> (wgpu::Limits, Vec<(&'static str, u64, u64, u64)>) {
    let mut l = real.clone();
    let mut table = Vec::new();
    for c in APPLE {
        let pick = |v: u64| if c.ceiling { v.min(c.apple) } else { v.max(c.apple) };
        let (was, now) = match (c.get)(&mut l) {
            Field::U32(v) => {
                let was = *v as u64;
                *v = pick(was) as u32;
                (was, *v as u64)
            }
            Field::U64(v) => {
                let was = *v;
                *v = pick(was);
                (was, *v)
            }
        };
        table.push((c.name, was, c.apple, now));
    }
    (l, table)
}

/// A context on the best adapter with its limits clamped to Apple's (every optional feature the
/// library wants that the adapter has).
fn apple_context() -> (Context, wgpu::Limits) {
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
    let (limits, table) = clamp(&adapter.limits());
    println!("{:<40} {:>14} {:>14} {:>14}", "limit", "adapter", "Apple (wgpu)", "used");
    for (name, was, apple, now) in &table {
        println!("{name:<40} {was:>14} {apple:>14} {now:>14}");
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("apple-limits"),
        required_features: adapter.features() & wgkernels::context::wanted_features(),
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .unwrap_or_else(|e| panic!("device with Apple's limits: {e}"));
    let ctx = Context::from_device(device, queue, ContextOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    (ctx, limits)
}

#[test]
fn every_kernel_plans_inside_apples_limits() {
    let (base, limits) = apple_context();
    let caps = base.caps();
    println!("\n{}", caps.report());
    assert_eq!(caps.limits.max_compute_workgroup_storage_size, limits.max_compute_workgroup_storage_size, "the context reads the device's limits");
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
                if x * y * z > THREADS {
                    failures.push(format!("{label}: workgroup {x}x{y}x{z} > {THREADS} threads"));
                }
                match wgkernels::shaders::workgroup_bytes(&desc) {
                    Ok(b) if b > THREADGROUP_MEMORY as u64 => failures.push(format!("{label}: {b} bytes of workgroup memory > {THREADGROUP_MEMORY}")),
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{label}: workgroup memory not measured: {e}")),
                }
            }
        }
    }
    println!(
        "\n{passed} passed, {unsupported} unsupported, {} failed; {pipelines} pipelines within {THREADGROUP_MEMORY} bytes of workgroup memory and {THREADS} threads",
        failures.len()
    );
    for f in &failures {
        println!("FAILED: {f}");
    }
    assert!(failures.is_empty(), "{} failures under Apple's limits (seed {seed})", failures.len());
    assert!(passed > 0, "nothing ran");
}

/// The clamp itself: ceilings lower, floors raise, and a limit already inside Apple's stays.
#[test]
fn the_clamp_takes_the_stricter_of_each_limit() {
    let mut real =
        wgpu::Limits { max_compute_workgroup_storage_size: 64 << 10, max_storage_buffers_per_shader_stage: 8, min_uniform_buffer_offset_alignment: 64, ..wgpu::Limits::default() };
    real.max_compute_workgroups_per_dimension = 1 << 20;
    let (l, table) = clamp(&real);
    assert_eq!(l.max_compute_workgroup_storage_size, 32 << 10);
    assert_eq!(l.max_storage_buffers_per_shader_stage, 8);
    assert_eq!(l.min_uniform_buffer_offset_alignment, 256);
    assert_eq!(l.max_compute_workgroups_per_dimension, 0xffff);
    assert_eq!(table.len(), APPLE.len());
}
