// Split-K GEMM, second pass (int4_gemm.wgsl, q4k_gemm.wgsl): y[i] = sum over the splits s of
// part[s * len + i], the partial products the GEMM wrote for its key ranges; i < len = m * n.

struct Params {
    len: u32,
    splits: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + li;
    if (i >= p.len) {
        return;
    }
    var s = 0.0;
    for (var j = 0u; j < p.splits; j++) {
        s += part[j * p.len + i];
    }
    y[i] = s;
}
