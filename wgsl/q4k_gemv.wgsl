// Q4_K GEMV (m = 1): y[r] = sum_c w[r, c] * x[c], w dequantised on the fly. Prepended: a team
// file (a team is a subgroup, a slice of a workgroup or a workgroup) and q4k_common.wgsl. Each
// team computes ROWS rows at a time, so every x value it loads serves ROWS rows; UNROLL quad steps
// per iteration with all head and code loads issued before any arithmetic. A lane takes one
// "quad" per step: quad u (0..3) of block b = qs vec4s u and u + 4 of the block (32 bytes, 64
// weights: positions 4u..4u+3 and 4u+16..4u+19 of all eight sub-blocks). Consecutive lanes take consecutive quads, so both the
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

override ROWS: u32 = 2u;    // rows per team, 1..4
override UNROLL: u32 = 2u;  // quad steps per lane per iteration: 1, 2 or 4

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

// x of one quad: sub-block j positions 4u..4u+3 (l) and 4u+16..4u+19 (h) for words a and b.
struct Xq {
    la0: vec4<f32>, lb0: vec4<f32>, ha0: vec4<f32>, hb0: vec4<f32>,
    la1: vec4<f32>, lb1: vec4<f32>, ha1: vec4<f32>, hb1: vec4<f32>,
    la2: vec4<f32>, lb2: vec4<f32>, ha2: vec4<f32>, hb2: vec4<f32>,
    la3: vec4<f32>, lb3: vec4<f32>, ha3: vec4<f32>, hb3: vec4<f32>,
    sx03: vec4<f32>,
    sx47: vec4<f32>,
}

fn x_load(qd: u32) -> Xq {
    // x vec4 of sub-block j, positions 4u..4u+3: 64 blk + 8 j + u; positions 4u+16..: + 4.
    let xb = (qd >> 2u) * 64u + (qd & 3u);
    var r: Xq;
    r.la0 = x[xb];
    r.lb0 = x[xb + 4u];
    r.ha0 = x[xb + 8u];
    r.hb0 = x[xb + 12u];
    r.la1 = x[xb + 16u];
    r.lb1 = x[xb + 20u];
    r.ha1 = x[xb + 24u];
    r.hb1 = x[xb + 28u];
    r.la2 = x[xb + 32u];
    r.lb2 = x[xb + 36u];
    r.ha2 = x[xb + 40u];
    r.hb2 = x[xb + 44u];
    r.la3 = x[xb + 48u];
    r.lb3 = x[xb + 52u];
    r.ha3 = x[xb + 56u];
    r.hb3 = x[xb + 60u];
    r.sx03 = vec4<f32>(hsum(r.la0 + r.lb0), hsum(r.ha0 + r.hb0), hsum(r.la1 + r.lb1), hsum(r.ha1 + r.hb1));
    r.sx47 = vec4<f32>(hsum(r.la2 + r.lb2), hsum(r.ha2 + r.hb2), hsum(r.la3 + r.lb3), hsum(r.ha3 + r.hb3));
    return r;
}

fn row_math(d: RowData, q: Xq) -> f32 {
    let dd = q4k_f16x2(d.hd.x);
    let sm = q4k_scales(d.hd);
    let s01 = vec4<f32>(pair_dot(d.qa.x, d.qb.x, q.la0, q.ha0, q.lb0, q.hb0), pair_dot(d.qa.y, d.qb.y, q.la1, q.ha1, q.lb1, q.hb1));
    let s23 = vec4<f32>(pair_dot(d.qa.z, d.qb.z, q.la2, q.ha2, q.lb2, q.hb2), pair_dot(d.qa.w, d.qb.w, q.la3, q.ha3, q.lb3, q.hb3));
    return dd.x * (dot(sm.sc03, s01) + dot(sm.sc47, s23)) - dd.y * (dot(sm.m03, q.sx03) + dot(sm.m47, q.sx47));
}

// Partial dots of ROWS rows (component r: row r) over quad qd, from its loaded slab.
fn slab_math(sl: Slab, qd: u32) -> vec4<f32> {
    let q = x_load(qd);
    var a = vec4<f32>(0.0);
    a.x = row_math(sl.r0, q);
    if (ROWS > 1u) {
        a.y = row_math(sl.r1, q);
    }
    if (ROWS > 2u) {
        a.z = row_math(sl.r2, q);
    }
    if (ROWS > 3u) {
        a.w = row_math(sl.r3, q);
    }
    return a;
}

// Items per row for the driver (gemv_rows_driver.wgsl, appended): quads of 64 columns.
fn row_items() -> u32 {
    return p.nb * 4u;
}
