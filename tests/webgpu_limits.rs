//! WebGPU's default limits: a slice of every kernel's test grid, every variant, on a device whose
//! limits are the stricter of the adapter's and `wgpu::Limits::default()` (WebGPU's defaults: what
//! every browser grants without asking, e.g. 16 KiB of workgroup memory, 256 invocations per
//! workgroup, 8 storage buffers per stage, 128 MiB per storage binding). An application that
//! creates its device with wgpu's default descriptor, or a browser that offers no more, gets these.
//! How the slice runs and what is checked: tests/common/limits.rs.

#[path = "common/limits.rs"]
mod limits;

#[test]
fn every_kernel_plans_inside_webgpu_default_limits() {
    let (ctx, limits) = limits::clamped_context("webgpu-default-limits", |real| wgpu::Limits::default().or_worse_values_from(real));
    assert_eq!(ctx.caps().limits.max_storage_buffers_per_shader_stage, limits.max_storage_buffers_per_shader_stage, "the context reads the device's limits");
    limits::every_kernel_within(&ctx, limits.max_compute_invocations_per_workgroup, limits.max_compute_workgroup_storage_size, "WebGPU's default limits");
}
