// Q4_K -> f32 row-major [n, k], bit-exact with llama.cpp / gguf-py: w = (d*sc)*q - dmin*m.
// d*sc*q and dmin*m are exact in f32, so the FMA's single rounding is the reference's one.
// One invocation per 16-byte chunk of nibbles (32 outputs); q4k_common.wgsl is prepended.

struct Params {
    chunks: u32,  // blocks * 8
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + li;
    if (i >= p.chunks) {
        return;
    }
    let g = i >> 3u;       // block
    let v = i & 7u;        // chunk within the block = 4 * half + pair
    let pp = v & 3u;       // pair: sub-blocks 2pp (low nibbles), 2pp + 1 (high nibbles)
    let hd = heads[g];
    let dd = q4k_f16x2(hd.x);
    let sm = q4k_scale_min(hd, pp);
    let ds = dd.x * sm.xy;
    let dm = dd.y * sm.zw;
    let q = qs[i];
    // Output float g*256 + 64pp + 16hh + 4w (+32 for the high sub-block), as vec4 indices.
    let ob = g * 64u + pp * 16u + (v >> 2u) * 4u;
    for (var w = 0u; w < 4u; w++) {
        let word = vec4<u32>(q[w]);
        let lo = vec4<f32>((word >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
        let hi = vec4<f32>((word >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u));
        out[ob + w] = fma(lo, vec4<f32>(ds.x), vec4<f32>(-dm.x));
        out[ob + 8u + w] = fma(hi, vec4<f32>(ds.y), vec4<f32>(-dm.y));
    }
}
