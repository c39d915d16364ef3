// Split-K decode attention, merge pass: per query head, combine the chunks' partial results
// (o_c not normalised, running max m_c and sum l_c in the log2 domain) by log-sum-exp:
// M = max m_c, L = sum l_c 2^(m_c - M), out = sum o_c 2^(m_c - M) / L.

struct Params {
    heads: u32,
    nchunks: u32,
    d: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part_o: array<f32>;
@group(0) @binding(2) var<storage, read> part_ml: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let h = wid.x + wid.y * nwg.x;
    if (h >= p.heads) {
        return;
    }
    let s0 = h * p.nchunks;
    var m = -3.0e38;
    for (var c = 0u; c < p.nchunks; c++) {
        m = max(m, part_ml[s0 + c].x);
    }
    var l = 0.0;
    for (var c = 0u; c < p.nchunks; c++) {
        let ml = part_ml[s0 + c];
        l += ml.y * exp2(ml.x - m);
    }
    let inv_l = 1.0 / l;
    for (var e = li; e < p.d; e += 64u) {
        var o = 0.0;
        for (var c = 0u; c < p.nchunks; c++) {
            o += part_o[(s0 + c) * p.d + e] * exp2(part_ml[s0 + c].x - m);
        }
        out[h * p.d + e] = o * inv_l;
    }
}
