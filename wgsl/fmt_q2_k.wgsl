// Q2_K format part (contract: src/formats/mod.rs; layout: src/formats/q2_k.rs). Per block 5
// vec4: the 16 scale bytes (low nibble: scale, high nibble: min of a 16-weight sub-block), then
// 4 of qs (vec4 v = qs words 2v, 8 + 2v, 2v + 1, 9 + 2v); after the row's blocks, one word per
// block (f16 d | f16 dmin << 16). Item = u of a block (32 weights): positions 4u .. 4u + 3 of
// the eight 32-weight quarters (half h, quarter s: weights 128h + 32s + 4u ..), whose 2-bit
// codes sit at shift 2s of qs word 8h + u; sub-block 8h + 2s + u / 4.
// w = (d * sc) * q - dmin * m: both products exact, one rounding (as on the CPU).

struct FmtRow {
    qs: vec2<u32>,  // qs words u, 8 + u
    sc: vec4<u32>,  // the block's scale bytes
    dm: u32,        // d | dmin << 16
    o: u32,         // u / 4
}

fn fmt_nb() -> u32 {
    return p.k4 / 64u;
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let blk = item / 8u;
    let u = item % 8u;
    let bb = base + 5u * blk;
    let q = wq[bb + 1u + u / 2u];
    let dm = wq[base + 5u * fmt_nb() + blk / 4u][blk % 4u];
    return FmtRow(select(q.xy, q.zw, (u & 1u) != 0u), wq[bb], dm, u / 4u);
}

struct FmtX {
    x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,  // half 0, quarters 0..3
    x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>,  // half 1
    sx0: vec4<f32>,                                               // their sums
    sx1: vec4<f32>,
}

fn fmt_hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

fn fmt_x(item: u32) -> FmtX {
    let c = 64u * (item / 8u) + item % 8u;
    var r = FmtX(mm_x4(c), mm_x4(c + 8u), mm_x4(c + 16u), mm_x4(c + 24u), mm_x4(c + 32u), mm_x4(c + 40u), mm_x4(c + 48u), mm_x4(c + 56u), vec4<f32>(0.0), vec4<f32>(0.0));
    r.sx0 = vec4<f32>(fmt_hsum(r.x0), fmt_hsum(r.x1), fmt_hsum(r.x2), fmt_hsum(r.x3));
    r.sx1 = vec4<f32>(fmt_hsum(r.x4), fmt_hsum(r.x5), fmt_hsum(r.x6), fmt_hsum(r.x7));
    return r;
}

// The 2-bit codes of quarter s from its qs word.
fn fmt_q2(w: u32, s: u32) -> vec4<f32> {
    return mm_u8x4((w >> (2u * s)) & 0x03030303u);
}

// Scales (low nibbles) and mins (high nibbles) of the four quarters of half h: bytes
// 8h + {0, 2, 4, 6} + o, i.e. bytes o and 2 + o of words 2h and 2h + 1.
fn fmt_pick(a: vec4<f32>, b: vec4<f32>, o: u32) -> vec4<f32> {
    return vec4<f32>(a[o], a[2u + o], b[o], b[2u + o]);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let dm = mm_f16x2(w.dm);
    let lo = vec4<u32>(w.sc) & vec4<u32>(0x0f0f0f0fu);
    let hi = (vec4<u32>(w.sc) >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
    let sc0 = fmt_pick(mm_u8x4(lo.x), mm_u8x4(lo.y), w.o);
    let sc1 = fmt_pick(mm_u8x4(lo.z), mm_u8x4(lo.w), w.o);
    let m0 = fmt_pick(mm_u8x4(hi.x), mm_u8x4(hi.y), w.o);
    let m1 = fmt_pick(mm_u8x4(hi.z), mm_u8x4(hi.w), w.o);
    let d0 = vec4<f32>(dot(fmt_q2(w.qs.x, 0u), x.x0), dot(fmt_q2(w.qs.x, 1u), x.x1), dot(fmt_q2(w.qs.x, 2u), x.x2), dot(fmt_q2(w.qs.x, 3u), x.x3));
    let d1 = vec4<f32>(dot(fmt_q2(w.qs.y, 0u), x.x4), dot(fmt_q2(w.qs.y, 1u), x.x5), dot(fmt_q2(w.qs.y, 2u), x.x6), dot(fmt_q2(w.qs.y, 3u), x.x7));
    return dm.x * (dot(sc0, d0) + dot(sc1, d1)) - dm.y * (dot(m0, x.sx0) + dot(m1, x.sx1));
}

// Columns 4c4 .. 4c4 + 3: block c4 / 64, position i = 4 (c4 % 64) = 128h + 32s + 4u.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let blk = c4 / 64u;
    let i = 4u * (c4 % 64u);
    let h = i / 128u;
    let s = (i % 128u) / 32u;
    let u = (i % 32u) / 4u;
    let bb = base + 5u * blk;
    let q = wq[bb + 1u + u / 2u][2u * (u & 1u) + h];
    let sb = i / 16u;
    let sm = (wq[bb][sb / 4u] >> (8u * (sb % 4u))) & 0xffu;
    let dm = mm_f16x2(wq[base + 5u * fmt_nb() + blk / 4u][blk % 4u]);
    return fma(fmt_q2(q, s), vec4<f32>(dm.x * f32(sm & 15u)), vec4<f32>(-(dm.y * f32(sm >> 4u))));
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = quarter
// (h, s) = ((run % 8) / 4, run % 4) of block run / 8, positions 4u .. 4u + 3 for u = 0 .. 7:
// qs word 8h + u (component 2 (u % 2) + h of vec4 1 + u / 2), scale bytes 8h + 2s (u < 4) and
// 8h + 2s + 1 (u >= 4), both in word 2h + s / 2.
struct FmtRun {
    q0: vec4<u32>,  // qs words of u = 0 .. 3
    q1: vec4<u32>,  // u = 4 .. 7
    sw: u32,        // the scale word
    dm: u32,        // d | dmin << 16
    s: u32,
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let blk = run / 8u;
    let h = (run % 8u) / 4u;
    let s = run % 4u;
    let bb = base + 5u * blk;
    let a = wq[bb + 1u];
    let b = wq[bb + 2u];
    let c = wq[bb + 3u];
    let e = wq[bb + 4u];
    let q0 = select(vec4<u32>(a.x, a.z, b.x, b.z), vec4<u32>(a.y, a.w, b.y, b.w), h == 1u);
    let q1 = select(vec4<u32>(c.x, c.z, e.x, e.z), vec4<u32>(c.y, c.w, e.y, e.w), h == 1u);
    let dm = wq[base + 5u * fmt_nb() + blk / 4u][blk % 4u];
    return FmtRun(q0, q1, wq[bb][2u * h + s / 2u], dm, s);
}

// The run's weights, the arithmetic of fmt_w4 (d, dmin and the two scale bytes decoded once).
fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let dm = mm_f16x2(r.dm);
    let sh = 16u * (r.s & 1u);
    let a = (r.sw >> sh) & 0xffu;         // u < 4
    let b = (r.sw >> (sh + 8u)) & 0xffu;  // u >= 4
    let fa = vec4<f32>(dm.x * f32(a & 15u));
    let oa = vec4<f32>(-(dm.y * f32(a >> 4u)));
    let fb = vec4<f32>(dm.x * f32(b & 15u));
    let ob = vec4<f32>(-(dm.y * f32(b >> 4u)));
    let s = r.s;
    return array<vec4<f32>, 8>(
        fma(fmt_q2(r.q0.x, s), fa, oa), fma(fmt_q2(r.q0.y, s), fa, oa),
        fma(fmt_q2(r.q0.z, s), fa, oa), fma(fmt_q2(r.q0.w, s), fa, oa),
        fma(fmt_q2(r.q1.x, s), fb, ob), fma(fmt_q2(r.q1.y, s), fb, ob),
        fma(fmt_q2(r.q1.z, s), fb, ob), fma(fmt_q2(r.q1.w, s), fb, ob));
}
