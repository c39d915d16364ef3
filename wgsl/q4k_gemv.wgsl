// Q4_K GEMV (m = 1): y[r] = sum_c w[r, c] * x[c], w dequantised on the fly. Prepended: a team
// file (team = one workgroup) and q4k_common.wgsl. Each team computes ROWS rows, so every x
// value it loads serves ROWS rows. A lane takes one "quad" per step: quad u (0..3) of block b
// = qs vec4s u and u + 4 of the block (32 bytes, 64 weights: positions 4u..4u+3 and
// 4u+16..4u+19 of all eight sub-blocks). Consecutive lanes take consecutive quads, so both the
// weight loads and the x loads (4 lanes read 64 contiguous bytes of each sub-block's x) are
// coalesced 16-byte loads; each weight byte is read once.
//
// Per row, with s_j = sum_i q_i x_i and sx_j = sum_i x_i over the lane's positions of sub-block j:
//   sum_i (d*sc_j*q_i - dmin*m_j) x_i = d * sum_j sc_j s_j - dmin * sum_j m_j sx_j,
// so the x sums are shared by the ROWS rows and each nibble needs one FMA.
// Rows past n are clamped to row n - 1 for loading (no out-of-bounds reads, loads stay
// unconditional) and never written. K is a multiple of 256 (checked on the host).

struct Params {
    n: u32,
    k: u32,
    nb: u32,   // blocks per row = k / 256
    _p: u32,
}

override ROWS: u32 = 4u;  // rows per team, 1..9

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Partial dots of one nibble word (4 positions of a low and a high sub-block) with the x of
// those positions (l: low sub-block, h: high), as (lo, hi, lo, hi).
fn word_dot(w: u32, l: vec4<f32>, h: vec4<f32>) -> vec4<f32> {
    let s = q4k_nibs(w) * vec4<f32>(l.x, h.x, l.y, h.y);
    return fma(q4k_nibs(w >> 16u), vec4<f32>(l.z, h.z, l.w, h.w), s);
}

// Sub-block dots (low, high) of pair pp from words a (positions 4u..) and b (positions 4u+16..).
fn pair_dot(a: u32, b: u32, la: vec4<f32>, ha: vec4<f32>, lb: vec4<f32>, hb: vec4<f32>) -> vec2<f32> {
    let s = word_dot(a, la, ha) + word_dot(b, lb, hb);
    return s.xy + s.zw;
}

fn hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

fn team_main(t: Team) {
    let quads = p.nb * 4u;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var qd = t.lane; qd < quads; qd += t.lanes) {
            let blk = qd >> 2u;
            // x vec4 of sub-block j, positions 4u..4u+3: 64 blk + 8 j + u; positions 4u+16..: + 4.
            let xb = blk * 64u + (qd & 3u);
            let la0 = x[xb];
            let lb0 = x[xb + 4u];
            let ha0 = x[xb + 8u];
            let hb0 = x[xb + 12u];
            let la1 = x[xb + 16u];
            let lb1 = x[xb + 20u];
            let ha1 = x[xb + 24u];
            let hb1 = x[xb + 28u];
            let la2 = x[xb + 32u];
            let lb2 = x[xb + 36u];
            let ha2 = x[xb + 40u];
            let hb2 = x[xb + 44u];
            let la3 = x[xb + 48u];
            let lb3 = x[xb + 52u];
            let ha3 = x[xb + 56u];
            let hb3 = x[xb + 60u];
            let sx03 = vec4<f32>(hsum(la0 + lb0), hsum(ha0 + hb0), hsum(la1 + lb1), hsum(ha1 + hb1));
            let sx47 = vec4<f32>(hsum(la2 + lb2), hsum(ha2 + hb2), hsum(la3 + lb3), hsum(ha3 + hb3));
            for (var r = 0u; r < ROWS; r++) {
                let row = min(row0 + r, p.n - 1u);
                let g = row * p.nb + blk;
                let hd = heads[g];
                let qa = qs[g * 8u + (qd & 3u)];       // word u of pairs 0..3
                let qb = qs[g * 8u + 4u + (qd & 3u)];  // word u + 4 of pairs 0..3
                let dd = q4k_f16x2(hd.x);
                let sm = q4k_scales(hd);
                let s01 = vec4<f32>(pair_dot(qa.x, qb.x, la0, ha0, lb0, hb0), pair_dot(qa.y, qb.y, la1, ha1, lb1, hb1));
                let s23 = vec4<f32>(pair_dot(qa.z, qb.z, la2, ha2, lb2, hb2), pair_dot(qa.w, qb.w, la3, ha3, lb3, hb3));
                acc[r] += dd.x * (dot(sm.sc03, s01) + dot(sm.sc47, s23)) - dd.y * (dot(sm.m03, sx03) + dot(sm.m47, sx47));
            }
        }
        team_reduce(&acc, ROWS);
        if (t.lane == 0u) {
            for (var r = 0u; r < ROWS; r++) {
                if (row0 + r < p.n) {
                    y[row0 + r] = acc[r];
                }
            }
        }
    }
}
