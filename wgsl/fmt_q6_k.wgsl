// Q6_K format part (contract: src/formats/mod.rs; layout: src/formats/q6_k.rs). Per block 13
// vec4: 8 of ql (vec4 u = GGUF ql words u, 8 + u, 16 + u, 24 + u), 4 of qh (vec4 v = qh words
// 2v, 8 + 2v, 2v + 1, 9 + 2v), 1 of the 16 int8 scales; after the row's blocks, its f16 d
// (block 2i: low half of word i). Item = u of a block (32 weights): positions 4u .. 4u + 3 of
// the eight 32-weight quarters (half h, quarter s: weights 128h + 32s + 4u ..). Quarter (h, s)
// has low nibbles in ql word 16h + 8(s % 2) + u (high nibbles for s >= 2), 2-bit highs at
// shift 2s of qh word 8h + u, scale byte 8h + 2s + u / 4. w = (d * sc) * (q - 32), exact.

struct FmtRow {
    ql: vec4<u32>,  // ql words u, 8 + u, 16 + u, 24 + u
    qh: vec2<u32>,  // qh words u, 8 + u
    sc: vec4<u32>,  // the block's scales
    dw: u32,        // the word holding d
    sel: u32,       // bit 0: d is its high half; bit 1: u >= 4
}

fn fmt_nb() -> u32 {
    return p.k4 / 64u;
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let blk = item / 8u;
    let u = item % 8u;
    let bb = base + 13u * blk;
    let h = wq[bb + 8u + u / 2u];
    let dw = wq[base + 13u * fmt_nb() + blk / 8u][(blk % 8u) / 2u];
    return FmtRow(wq[bb + u], select(h.xy, h.zw, (u & 1u) != 0u), wq[bb + 12u], dw, (blk & 1u) | ((u / 4u) << 1u));
}

struct FmtX {
    x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,  // half 0, quarters 0..3
    x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>,  // half 1
}

fn fmt_x(item: u32) -> FmtX {
    let c = 64u * (item / 8u) + item % 8u;
    return FmtX(mm_x4(c), mm_x4(c + 8u), mm_x4(c + 16u), mm_x4(c + 24u), mm_x4(c + 32u), mm_x4(c + 40u), mm_x4(c + 48u), mm_x4(c + 56u));
}

// q - 32 of the four positions of quarter s: `l` = its ql word, `h` = its qh word.
fn fmt_q6(l: u32, h: u32, s: u32) -> vec4<f32> {
    let c = ((l >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((h >> (2u * s)) & 0x03030303u) << 4u);
    return mm_u8x4(c) - vec4<f32>(32.0);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let d = mm_f16x2(w.dw)[w.sel & 1u];
    let o = w.sel >> 1u;
    // Scales of quarters 0..3 of half h: bytes 8h + {0, 2, 4, 6} + o.
    let s0 = mm_i8x4(w.sc.x);
    let s1 = mm_i8x4(w.sc.y);
    let s2 = mm_i8x4(w.sc.z);
    let s3 = mm_i8x4(w.sc.w);
    let sc0 = vec4<f32>(s0[o], s0[2u + o], s1[o], s1[2u + o]);
    let sc1 = vec4<f32>(s2[o], s2[2u + o], s3[o], s3[2u + o]);
    let d0 = vec4<f32>(dot(fmt_q6(w.ql.x, w.qh.x, 0u), x.x0), dot(fmt_q6(w.ql.y, w.qh.x, 1u), x.x1), dot(fmt_q6(w.ql.x, w.qh.x, 2u), x.x2), dot(fmt_q6(w.ql.y, w.qh.x, 3u), x.x3));
    let d1 = vec4<f32>(dot(fmt_q6(w.ql.z, w.qh.y, 0u), x.x4), dot(fmt_q6(w.ql.w, w.qh.y, 1u), x.x5), dot(fmt_q6(w.ql.z, w.qh.y, 2u), x.x6), dot(fmt_q6(w.ql.w, w.qh.y, 3u), x.x7));
    return d * (dot(sc0, d0) + dot(sc1, d1));
}

// Columns 4c4 .. 4c4 + 3: block c4 / 64, position i = 4 (c4 % 64) = 128h + 32s + 4u.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let blk = c4 / 64u;
    let i = 4u * (c4 % 64u);
    let h = i / 128u;
    let s = (i % 128u) / 32u;
    let u = (i % 32u) / 4u;
    let bb = base + 13u * blk;
    let l = wq[bb + u][2u * h + (s & 1u)];
    let hw = wq[bb + 8u + u / 2u][2u * (u & 1u) + h];
    let sb = i / 16u;
    let sc = mm_i8x4(wq[bb + 12u][sb / 4u])[sb % 4u];
    let d = mm_f16x2(wq[base + 13u * fmt_nb() + blk / 8u][(blk % 8u) / 2u])[blk & 1u];
    return vec4<f32>(d * sc) * fmt_q6(l, hw, s);
}

// Integer dot (the quad-order int8 GEMV, MmQx). Quad u of a block = this format's items u
// (positions 4u .. 4u + 3 of each 32-weight sub-block j = quarter (j / 4, j % 4), scale 2j)
// and u + 4 (positions 4u + 16 .., scale 2j + 1). Per word of four codes c (0..63, so valid
// signed bytes) and activation codes xc: sum (c - 32) xc = dot(c, xc) - 32 dot(1, xc), exact
// integers; then d * sum_j dx_j (sc_2j D_j,0 + sc_2j+1 D_j,1).
struct FmtQRow {
    a: FmtRow,  // item u: positions 4u ..
    b: FmtRow,  // item u + 4: positions 4u + 16 ..
}

fn fmt_qload(base: u32, quad: u32) -> FmtQRow {
    let item = 8u * (quad / 4u) + quad % 4u;
    return FmtQRow(fmt_load(base, item), fmt_load(base, item + 4u));
}

// The four 6-bit codes of sub-block j in row item r.
fn fmt_qw(r: FmtRow, j: u32) -> u32 {
    let h = j / 4u;
    let s = j % 4u;
    return ((r.ql[2u * h + (s & 1u)] >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((r.qh[h] >> (2u * s)) & 0x03030303u) << 4u);
}

// (D_j,0, D_j,1) of sub-block j with the activation codes xa (positions 4u ..) and xb (4u + 16 ..).
fn fmt_qsub(w: FmtQRow, j: u32, xa: u32, xb: u32) -> vec2<f32> {
    let da = dot4I8Packed((fmt_qw(w.a, j) + 0x60606060u) ^ 0x80808080u, xa);
    let db = dot4I8Packed((fmt_qw(w.b, j) + 0x60606060u) ^ 0x80808080u, xb);
    return vec2<f32>(f32(da), f32(db));
}

fn fmt_qdot(w: FmtQRow, x: MmQx) -> f32 {
    let d = mm_f16x2(w.a.dw)[w.a.sel & 1u];
    // Scales 2j, 2j + 1 of sub-blocks j = 0, 1 in word 0, 2, 3 in word 1, ...
    let s01 = mm_i8x4(w.a.sc.x);
    let s23 = mm_i8x4(w.a.sc.y);
    let s45 = mm_i8x4(w.a.sc.z);
    let s67 = mm_i8x4(w.a.sc.w);
    let t01 = s01 * vec4<f32>(fmt_qsub(w, 0u, x.c0.x, x.c0.y), fmt_qsub(w, 1u, x.c0.z, x.c0.w));
    let t23 = s23 * vec4<f32>(fmt_qsub(w, 2u, x.c1.x, x.c1.y), fmt_qsub(w, 3u, x.c1.z, x.c1.w));
    let t45 = s45 * vec4<f32>(fmt_qsub(w, 4u, x.c2.x, x.c2.y), fmt_qsub(w, 5u, x.c2.z, x.c2.w));
    let t67 = s67 * vec4<f32>(fmt_qsub(w, 6u, x.c3.x, x.c3.y), fmt_qsub(w, 7u, x.c3.z, x.c3.w));
    let a = dot(vec4<f32>(t01.x + t01.y, t01.z + t01.w, t23.x + t23.y, t23.z + t23.w), x.d03);
    let b = dot(vec4<f32>(t45.x + t45.y, t45.z + t45.w, t67.x + t67.y, t67.z + t67.w), x.d47);
    return d * (a + b);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = quarter
// (h, s) = ((run % 8) / 4, run % 4) of block run / 8, positions 4u .. 4u + 3 for u = 0 .. 7: ql
// word u of component 2h + s % 2, qh component 2 (u % 2) + h of vec4 8 + u / 2, scale bytes
// 8h + 2s (u < 4) and 8h + 2s + 1 (u >= 4), both in word 2h + s / 2.
struct FmtRun {
    l0: vec4<u32>,  // ql words of u = 0 .. 3
    l1: vec4<u32>,  // u = 4 .. 7
    h0: vec4<u32>,  // qh words of u = 0 .. 3
    h1: vec4<u32>,  // u = 4 .. 7
    sw: u32,        // the scale word
    dw: u32,        // the word holding d
    sel: u32,       // bits 0, 1: s; bit 2: d is its high half
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let blk = run / 8u;
    let h = (run % 8u) / 4u;
    let s = run % 4u;
    let bb = base + 13u * blk;
    let c = 2u * h + (s & 1u);
    let l0 = vec4<u32>(wq[bb][c], wq[bb + 1u][c], wq[bb + 2u][c], wq[bb + 3u][c]);
    let l1 = vec4<u32>(wq[bb + 4u][c], wq[bb + 5u][c], wq[bb + 6u][c], wq[bb + 7u][c]);
    let a = wq[bb + 8u];
    let b = wq[bb + 9u];
    let e = wq[bb + 10u];
    let f = wq[bb + 11u];
    // Component h (even u) and 2 + h (odd u) of each qh vec4.
    let h0 = select(vec4<u32>(a.x, a.z, b.x, b.z), vec4<u32>(a.y, a.w, b.y, b.w), h == 1u);
    let h1 = select(vec4<u32>(e.x, e.z, f.x, f.z), vec4<u32>(e.y, e.w, f.y, f.w), h == 1u);
    let sw = wq[bb + 12u][2u * h + s / 2u];
    let dw = wq[base + 13u * fmt_nb() + blk / 8u][(blk % 8u) / 2u];
    return FmtRun(l0, l1, h0, h1, sw, dw, s | ((blk & 1u) << 2u));
}

// The run's weights, the arithmetic of fmt_w4 ((d * sc) * (q - 32); d and the scales decoded once).
fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let d = mm_f16x2(r.dw)[r.sel >> 2u];
    let s = r.sel & 3u;
    let sc = mm_i8x4(r.sw);
    let lo = vec4<f32>(d * sc[2u * (s & 1u)]);
    let hi = vec4<f32>(d * sc[2u * (s & 1u) + 1u]);
    return array<vec4<f32>, 8>(
        lo * fmt_q6(r.l0.x, r.h0.x, s), lo * fmt_q6(r.l0.y, r.h0.y, s),
        lo * fmt_q6(r.l0.z, r.h0.z, s), lo * fmt_q6(r.l0.w, r.h0.w, s),
        hi * fmt_q6(r.l1.x, r.h1.x, s), hi * fmt_q6(r.l1.y, r.h1.y, s),
        hi * fmt_q6(r.l1.z, r.h1.z, s), hi * fmt_q6(r.l1.w, r.h1.w, s));
}
