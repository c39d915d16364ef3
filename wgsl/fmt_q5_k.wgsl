// Q5_K format part (contract: src/formats/mod.rs; layout: src/formats/q5_k.rs). Per block 11
// vec4 (176 bytes): the head (f16 d | f16 dmin << 16, then the 12 scale bytes, as Q4_K);
// vec4s 1..8 = the 128 low-nibble bytes with the 4 x 8 matrix of nibble words transposed
// (component pp of vec4 1 + wi = GGUF nibble word 8pp + wi: positions 4wi .. 4wi + 3 of
// sub-blocks 2pp (low nibbles) and 2pp + 1 (high)); vec4s 9, 10 = the qh words as
// (0, 4, 1, 5), (2, 6, 3, 7) (qh word wi: positions 4wi .. 4wi + 3, bit j = sub-block j).
// Item = quad u of a block (64 weights): positions 4u..4u+3 (a) and 4u+16..4u+19 (b) of all
// eight sub-blocks. The dot factors the scales out as Q4_K's does:
// sum (d sc_j q - dmin m_j) x = d sum sc_j s_j - dmin sum m_j sx_j.

// Four 6-bit values in the bytes of `w` (bits 6, 7 of each byte are ignored) as exact floats.
fn fmt_bytes6(w: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0x3fu));
}

struct FmtScales {
    sc03: vec4<f32>,
    sc47: vec4<f32>,
    m03: vec4<f32>,
    m47: vec4<f32>,
}

// j < 4: sc = s[j] & 63, m = s[j+4] & 63;
// j = 4 + i: sc = (s[8+i] & 15) | ((s[i] >> 6) << 4), m = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4).
fn fmt_scales(h: vec4<u32>) -> FmtScales {
    let sc47 = (h.w & 0x0f0f0f0fu) | ((h.y >> 2u) & 0x30303030u);
    let m47 = ((h.w >> 4u) & 0x0f0f0f0fu) | ((h.z >> 2u) & 0x30303030u);
    return FmtScales(fmt_bytes6(h.y), fmt_bytes6(sc47), fmt_bytes6(h.z), fmt_bytes6(m47));
}

struct FmtRow {
    hd: vec4<u32>,
    qa: vec4<u32>,  // nibble words of positions 4u.. (component pp: sub-blocks 2pp, 2pp + 1)
    qb: vec4<u32>,  // positions 4u + 16..
    qh: vec2<u32>,  // qh words u (a) and 4 + u (b)
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let bb = base + 11u * (item / 4u);
    let u = item % 4u;
    let h = wq[bb + 9u + u / 2u];
    return FmtRow(wq[bb], wq[bb + 1u + u], wq[bb + 5u + u], select(h.xy, h.zw, (u & 1u) != 0u));
}

// x of one quad, sub-block j: positions 4u..4u+3 (a) and 4u+16..4u+19 (b).
struct FmtX {
    a0: vec4<f32>, b0: vec4<f32>, a1: vec4<f32>, b1: vec4<f32>,
    a2: vec4<f32>, b2: vec4<f32>, a3: vec4<f32>, b3: vec4<f32>,
    a4: vec4<f32>, b4: vec4<f32>, a5: vec4<f32>, b5: vec4<f32>,
    a6: vec4<f32>, b6: vec4<f32>, a7: vec4<f32>, b7: vec4<f32>,
    sx03: vec4<f32>,
    sx47: vec4<f32>,
}

fn fmt_hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

fn fmt_x(item: u32) -> FmtX {
    // x vec4 of sub-block j, positions 4u..4u+3: 64 blk + 8 j + u; positions 4u+16..: + 4.
    let c = (item / 4u) * 64u + item % 4u;
    var r: FmtX;
    r.a0 = mm_x4(c);
    r.b0 = mm_x4(c + 4u);
    r.a1 = mm_x4(c + 8u);
    r.b1 = mm_x4(c + 12u);
    r.a2 = mm_x4(c + 16u);
    r.b2 = mm_x4(c + 20u);
    r.a3 = mm_x4(c + 24u);
    r.b3 = mm_x4(c + 28u);
    r.a4 = mm_x4(c + 32u);
    r.b4 = mm_x4(c + 36u);
    r.a5 = mm_x4(c + 40u);
    r.b5 = mm_x4(c + 44u);
    r.a6 = mm_x4(c + 48u);
    r.b6 = mm_x4(c + 52u);
    r.a7 = mm_x4(c + 56u);
    r.b7 = mm_x4(c + 60u);
    r.sx03 = vec4<f32>(fmt_hsum(r.a0 + r.b0), fmt_hsum(r.a1 + r.b1), fmt_hsum(r.a2 + r.b2), fmt_hsum(r.a3 + r.b3));
    r.sx47 = vec4<f32>(fmt_hsum(r.a4 + r.b4), fmt_hsum(r.a5 + r.b5), fmt_hsum(r.a6 + r.b6), fmt_hsum(r.a7 + r.b7));
    return r;
}

// The 5-bit codes of four positions of sub-block j: `nw` = the nibble word of its pair,
// `hw` = the qh word of those positions.
fn fmt_q5(nw: u32, hw: u32, j: u32) -> vec4<f32> {
    let c = ((nw >> (4u * (j & 1u))) & 0x0f0f0f0fu) | (((hw >> j) & 0x01010101u) << 4u);
    return mm_u8x4(c);
}

// s_j = sum q x over the quad's positions of sub-block j.
fn fmt_sdot(w: FmtRow, j: u32, a: vec4<f32>, b: vec4<f32>) -> f32 {
    return dot(fmt_q5(w.qa[j / 2u], w.qh.x, j), a) + dot(fmt_q5(w.qb[j / 2u], w.qh.y, j), b);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let dd = mm_f16x2(w.hd.x);
    let sm = fmt_scales(w.hd);
    let s03 = vec4<f32>(fmt_sdot(w, 0u, x.a0, x.b0), fmt_sdot(w, 1u, x.a1, x.b1), fmt_sdot(w, 2u, x.a2, x.b2), fmt_sdot(w, 3u, x.a3, x.b3));
    let s47 = vec4<f32>(fmt_sdot(w, 4u, x.a4, x.b4), fmt_sdot(w, 5u, x.a5, x.b5), fmt_sdot(w, 6u, x.a6, x.b6), fmt_sdot(w, 7u, x.a7, x.b7));
    return dd.x * (dot(sm.sc03, s03) + dot(sm.sc47, s47)) - dd.y * (dot(sm.m03, x.sx03) + dot(sm.m47, x.sx47));
}

// Columns 4c4 .. 4c4 + 3: sub-block j = (c4 % 64) / 8, positions 4wi .. 4wi + 3 (wi = c4 % 8).
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let bb = base + 11u * (c4 / 64u);
    let j = (c4 % 64u) / 8u;
    let wi = c4 % 8u;
    let hd = wq[bb];
    let dd = mm_f16x2(hd.x);
    let sm = fmt_scales(hd);
    let sc = select(sm.sc03[j & 3u], sm.sc47[j & 3u], j >= 4u);
    let m = select(sm.m03[j & 3u], sm.m47[j & 3u], j >= 4u);
    let nw = wq[bb + 1u + wi][j / 2u];
    let u = wi % 4u;
    let hw = wq[bb + 9u + u / 2u][2u * (u & 1u) + wi / 4u];
    return fma(fmt_q5(nw, hw, j), vec4<f32>(dd.x * sc), vec4<f32>(-(dd.y * m)));
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = sub-block
// j = run % 8 of block run / 8: the head, component j / 2 of the eight nibble vec4s (nibble
// j % 2) and both qh vec4s (qh word wi holds bit j of positions 4wi .. 4wi + 3).
struct FmtRun {
    hd: vec4<u32>,
    qa: vec4<u32>,  // nibble words of positions 0 .. 15 (vec4s 1 .. 4)
    qb: vec4<u32>,  // positions 16 .. 31 (vec4s 5 .. 8)
    h9: vec4<u32>,  // qh words 0, 4, 1, 5
    h10: vec4<u32>, // qh words 2, 6, 3, 7
    j: u32,
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let bb = base + 11u * (run / 8u);
    let j = run % 8u;
    let c = j / 2u;
    let qa = vec4<u32>(wq[bb + 1u][c], wq[bb + 2u][c], wq[bb + 3u][c], wq[bb + 4u][c]);
    let qb = vec4<u32>(wq[bb + 5u][c], wq[bb + 6u][c], wq[bb + 7u][c], wq[bb + 8u][c]);
    return FmtRun(wq[bb], qa, qb, wq[bb + 9u], wq[bb + 10u], j);
}

// The run's weights, the arithmetic of fmt_w4 (sub-block j's scale and min decoded once).
fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let dd = mm_f16x2(r.hd.x);
    let sh = 8u * (r.j & 3u);
    let a = (r.hd.y >> sh) & 0xffu;  // s[j % 4]
    let b = (r.hd.z >> sh) & 0xffu;  // s[j % 4 + 4]
    let c = (r.hd.w >> sh) & 0xffu;  // s[j % 4 + 8]
    var sc = a & 63u;
    var m = b & 63u;
    if (r.j >= 4u) {
        sc = (c & 15u) | ((a >> 6u) << 4u);
        m = (c >> 4u) | ((b >> 6u) << 4u);
    }
    let f = vec4<f32>(dd.x * f32(sc));
    let o = vec4<f32>(-(dd.y * f32(m)));
    let ha = vec4<u32>(r.h9.x, r.h9.z, r.h10.x, r.h10.z);  // qh words 0 .. 3
    let hb = vec4<u32>(r.h9.y, r.h9.w, r.h10.y, r.h10.w);  // qh words 4 .. 7
    let j = r.j;
    return array<vec4<f32>, 8>(
        fma(fmt_q5(r.qa.x, ha.x, j), f, o), fma(fmt_q5(r.qa.y, ha.y, j), f, o),
        fma(fmt_q5(r.qa.z, ha.z, j), f, o), fma(fmt_q5(r.qa.w, ha.w, j), f, o),
        fma(fmt_q5(r.qb.x, hb.x, j), f, o), fma(fmt_q5(r.qb.y, hb.y, j), f, o),
        fma(fmt_q5(r.qb.z, hb.z, j), f, o), fma(fmt_q5(r.qb.w, hb.w, j), f, o));
}
