//! Apple's limits: a slice of every kernel's test grid, every variant, on a device whose limits are
//! clamped to what wgpu 30's Metal backend reports for Apple GPUs (the table below; its source is
//! wgpu-hal 30's `src/metal/adapter.rs`, written out in docs/METAL.md). How the slice runs and
//! what is checked: tests/common/limits.rs (the MSL's own threadgroup arrays are checked against
//! the same 32 KiB by tests/msl_clang.rs). The adapter's subgroup sizes are the host's (Metal
//! reports 4..64; the Subgroup kernels assume no subgroup size).

#[path = "common/limits.rs"]
mod limits;

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

#[test]
fn every_kernel_plans_inside_apples_limits() {
    let (ctx, limits) = limits::clamped_context("apple-limits", |real| {
        let (limits, table) = clamp(real);
        println!("{:<40} {:>14} {:>14} {:>14}", "limit", "adapter", "Apple (wgpu)", "used");
        for (name, was, apple, now) in &table {
            println!("{name:<40} {was:>14} {apple:>14} {now:>14}");
        }
        limits
    });
    assert_eq!(ctx.caps().limits.max_compute_workgroup_storage_size, limits.max_compute_workgroup_storage_size, "the context reads the device's limits");
    limits::every_kernel_within(&ctx, THREADS, THREADGROUP_MEMORY, "Apple's limits");
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
