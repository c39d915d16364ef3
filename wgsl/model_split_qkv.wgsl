// split_qkv: columns r0..r0 + w of the [q | k | v] rows of a fused projection, stored as src
// [m, w], go (plus bias[g] when has_bias, g = r0 + c the column in [q | k | v]) to
// q[t, g] (g < qd), k[t, g - qd] (g < qd + kvd) or v[t, g - qd - kvd].

struct Params {
    total: u32,  // m * w
    w: u32,
    r0: u32,
    qd: u32,
    kvd: u32,
    has_bias: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> q: array<f32>;
@group(0) @binding(4) var<storage, read_write> k: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + li;
    if (i >= p.total) {
        return;
    }
    let t = i / p.w;
    let g = p.r0 + i % p.w;
    var val = src[i];
    if (p.has_bias != 0u) {
        val = val + bias[g];
    }
    if (g < p.qd) {
        q[t * p.qd + g] = val;
    } else if (g < p.qd + p.kvd) {
        k[t * p.kvd + g - p.qd] = val;
    } else {
        v[t * p.kvd + g - p.qd - p.kvd] = val;
    }
}
