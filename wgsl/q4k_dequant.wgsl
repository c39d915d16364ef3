// Q4_K -> f32 row-major [n, k], bit-exact with llama.cpp / gguf-py: w = (d*sc)*q - dmin*m.
// d*sc*q and dmin*m are exact in f32, so the FMA's single rounding is the reference's one.
// One invocation per qs vec4 (positions 4wi..4wi+3 of all 8 sub-blocks: 32 outputs);
// q4k_common.wgsl is prepended.

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
    let g = i >> 3u;   // block
    let wi = i & 7u;   // word row: positions 4wi .. 4wi + 3 of each sub-block
    let hd = heads[g];
    let dd = q4k_f16x2(hd.x);
    let sm = q4k_scales(hd);
    let ds = array<vec4<f32>, 2>(dd.x * sm.sc03, dd.x * sm.sc47);
    let dm = array<vec4<f32>, 2>(dd.y * sm.m03, dd.y * sm.m47);
    let q = qs[i];
    for (var pp = 0u; pp < 4u; pp++) {
        // Sub-blocks 2pp (low nibbles) and 2pp + 1 (high): floats g*256 + 32j + 4wi, as vec4 indices.
        let word = vec4<u32>(q[pp]);
        let lo = vec4<f32>((word >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
        let hi = vec4<f32>((word >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u));
        let h = pp / 2u;
        let c = (pp % 2u) * 2u;
        out[g * 64u + pp * 16u + wi] = fma(lo, vec4<f32>(ds[h][c]), vec4<f32>(-dm[h][c]));
        out[g * 64u + pp * 16u + 8u + wi] = fma(hi, vec4<f32>(ds[h][c + 1u]), vec4<f32>(-dm[h][c + 1u]));
    }
}
