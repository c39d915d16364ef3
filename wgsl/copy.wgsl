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
