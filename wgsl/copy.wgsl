// Copy kernel: the in-process bandwidth reference for the benchmarks (read + write).
struct Params {
    len: u32,  // vec4 elements
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let stride = nwg.x * nwg.y * 256u;
    for (var i = (wid.x + wid.y * nwg.x) * 256u + li; i < p.len; i += stride) {
        dst[i] = src[i];
    }
}

// Busy kernel (timing::measure): arithmetic only, no memory traffic, so the GPU is kept at its
// working clocks right up to a timed dispatch without touching the caches the timed kernel uses.
// `len` is the iteration count; the store never happens for finite inputs but keeps the loop alive.
@compute @workgroup_size(256)
fn busy(@builtin(global_invocation_id) gid: vec3<u32>) {
    var x = f32(gid.x & 255u) * 1.0e-3;
    for (var i = 0u; i < p.len; i++) {
        x = fma(x, 0.999, 1.0e-3);
    }
    if (x < -1.0) {
        dst[0] = vec4<f32>(x);
    }
}
