// Q3_K format part (contract: src/formats/mod.rs; layout: src/formats/q3_k.rs). Per block 7
// vec4 (112 bytes): vec4 0 = the 12 packed scale bytes and f16 d (low half of .w); vec4s 1..4 =
// qs (vec4 v = qs words 2v, 8 + 2v, 2v + 1, 9 + 2v); vec4s 5, 6 = the 8 hmask words. Item = u of
// a block (32 weights): positions 4u .. 4u + 3 of the eight 32-weight quarters (half h,
// quarter s: weights 128h + 32s + 4u ..), whose low 2 bits sit at shift 2s of qs word 8h + u
// and high bit at bit 4h + s of hmask word u; code = low - 4 when the high bit is clear, else
// low. Sub-block 8h + 2s + u / 4. w = (d * scale) * code, exact in f32.

struct FmtRow {
    hd: vec4<u32>,  // scale words 0..2, d
    qs: vec2<u32>,  // qs words u, 8 + u
    hm: u32,        // hmask word u
    o: u32,         // u / 4
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let bb = base + 7u * (item / 8u);
    let u = item % 8u;
    let q = wq[bb + 1u + u / 2u];
    return FmtRow(wq[bb], select(q.xy, q.zw, (u & 1u) != 0u), wq[bb + 5u + u / 4u][u % 4u], u / 4u);
}

struct FmtX {
    x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,  // half 0, quarters 0..3
    x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>,  // half 1
}

fn fmt_x(item: u32) -> FmtX {
    let c = 64u * (item / 8u) + item % 8u;
    return FmtX(mm_x4(c), mm_x4(c + 8u), mm_x4(c + 16u), mm_x4(c + 24u), mm_x4(c + 32u), mm_x4(c + 40u), mm_x4(c + 48u), mm_x4(c + 56u));
}

// Codes of quarter (h, s) from its qs word and the hmask word.
fn fmt_q3(q: u32, hm: u32, h: u32, s: u32) -> vec4<f32> {
    let low = (q >> (2u * s)) & 0x03030303u;
    let high = (hm >> (4u * h + s)) & 0x01010101u;
    return mm_u8x4(low | (high << 2u)) - vec4<f32>(4.0);
}

// The 6-bit scales of sub-blocks 4g .. 4g + 3, minus 32: low nibbles from byte (4g) % 8 ..
// (high nibbles for g >= 2), 2 high bits at shift 2g of bytes 8 .. 11.
fn fmt_scales4(hd: vec4<u32>, g: u32) -> vec4<f32> {
    let lo = (hd[g % 2u] >> (4u * (g / 2u))) & 0x0f0f0f0fu;
    let hi = (hd.z >> (2u * g)) & 0x03030303u;
    return mm_u8x4(lo | (hi << 4u)) - vec4<f32>(32.0);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let d = mm_f16x2(w.hd.w).x;
    let o = w.o;
    let g0 = fmt_scales4(w.hd, 0u);
    let g1 = fmt_scales4(w.hd, 1u);
    let g2 = fmt_scales4(w.hd, 2u);
    let g3 = fmt_scales4(w.hd, 3u);
    let sc0 = vec4<f32>(g0[o], g0[2u + o], g1[o], g1[2u + o]);
    let sc1 = vec4<f32>(g2[o], g2[2u + o], g3[o], g3[2u + o]);
    let d0 = vec4<f32>(dot(fmt_q3(w.qs.x, w.hm, 0u, 0u), x.x0), dot(fmt_q3(w.qs.x, w.hm, 0u, 1u), x.x1), dot(fmt_q3(w.qs.x, w.hm, 0u, 2u), x.x2), dot(fmt_q3(w.qs.x, w.hm, 0u, 3u), x.x3));
    let d1 = vec4<f32>(dot(fmt_q3(w.qs.y, w.hm, 1u, 0u), x.x4), dot(fmt_q3(w.qs.y, w.hm, 1u, 1u), x.x5), dot(fmt_q3(w.qs.y, w.hm, 1u, 2u), x.x6), dot(fmt_q3(w.qs.y, w.hm, 1u, 3u), x.x7));
    return d * (dot(sc0, d0) + dot(sc1, d1));
}

// Columns 4c4 .. 4c4 + 3: block c4 / 64, position i = 4 (c4 % 64) = 128h + 32s + 4u.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let bb = base + 7u * (c4 / 64u);
    let i = 4u * (c4 % 64u);
    let h = i / 128u;
    let s = (i % 128u) / 32u;
    let u = (i % 32u) / 4u;
    let hd = wq[bb];
    let q = wq[bb + 1u + u / 2u][2u * (u & 1u) + h];
    let hm = wq[bb + 5u + u / 4u][u % 4u];
    let sb = i / 16u;
    let sc = fmt_scales4(hd, sb / 4u)[sb % 4u];
    return vec4<f32>(mm_f16x2(hd.w).x * sc) * fmt_q3(q, hm, h, s);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = quarter
// (h, s) = ((run % 8) / 4, run % 4) of block run / 8, positions 4u .. 4u + 3 for u = 0 .. 7:
// qs word 8h + u (component 2 (u % 2) + h of vec4 1 + u / 2), hmask word u (vec4s 5, 6),
// sub-blocks 8h + 2s (u < 4) and 8h + 2s + 1 (u >= 4), both in scale group 2h + s / 2.
struct FmtRun {
    hd: vec4<u32>,  // scale words 0..2, d
    q0: vec4<u32>,  // qs words of u = 0 .. 3
    q1: vec4<u32>,  // u = 4 .. 7
    m0: vec4<u32>,  // hmask words 0 .. 3
    m1: vec4<u32>,  // hmask words 4 .. 7
    hs: u32,        // h << 2 | s
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let h = (run % 8u) / 4u;
    let bb = base + 7u * (run / 8u);
    let a = wq[bb + 1u];
    let b = wq[bb + 2u];
    let c = wq[bb + 3u];
    let e = wq[bb + 4u];
    let q0 = select(vec4<u32>(a.x, a.z, b.x, b.z), vec4<u32>(a.y, a.w, b.y, b.w), h == 1u);
    let q1 = select(vec4<u32>(c.x, c.z, e.x, e.z), vec4<u32>(c.y, c.w, e.y, e.w), h == 1u);
    return FmtRun(wq[bb], q0, q1, wq[bb + 5u], wq[bb + 6u], run % 8u);
}

// The run's weights, the arithmetic of fmt_w4 (d and the two scales decoded once).
fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let h = r.hs >> 2u;
    let s = r.hs & 3u;
    let g = fmt_scales4(r.hd, 2u * h + s / 2u);
    let d = mm_f16x2(r.hd.w).x;
    let fa = vec4<f32>(d * g[2u * (s & 1u)]);
    let fb = vec4<f32>(d * g[2u * (s & 1u) + 1u]);
    return array<vec4<f32>, 8>(
        fa * fmt_q3(r.q0.x, r.m0.x, h, s), fa * fmt_q3(r.q0.y, r.m0.y, h, s),
        fa * fmt_q3(r.q0.z, r.m0.z, h, s), fa * fmt_q3(r.q0.w, r.m0.w, h, s),
        fb * fmt_q3(r.q1.x, r.m1.x, h, s), fb * fmt_q3(r.q1.y, r.m1.y, h, s),
        fb * fmt_q3(r.q1.z, r.m1.z, h, s), fb * fmt_q3(r.q1.w, r.m1.w, h, s));
}
