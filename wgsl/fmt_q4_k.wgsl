// Q4_K format part (contract: src/formats/mod.rs; layout: src/formats/q4k.rs). Per block 9 vec4:
// the head (d | dmin << 16, 12 scale bytes), then the nibble words transposed (component pp of
// vec4 1 + wi = positions 4wi .. 4wi + 3 of sub-blocks 2pp (low) and 2pp + 1 (high)). Item =
// quad u of a block (64 weights): the head and vec4s 1 + u and 5 + u, i.e. positions 4u..4u+3
// and 4u+16..4u+19 of all eight sub-blocks; consecutive lanes load consecutive vec4s of weights
// and of x. The dot factors the block scales out: with s_j = sum q x and sx_j = sum x over the
// item's positions of sub-block j, sum (d sc_j q - dmin m_j) x = d sum sc_j s_j - dmin sum m_j sx_j,
// so the x sums are shared by the rows and each nibble costs one FMA.

// Four 6-bit values in the bytes of `w` (bits 6, 7 of each byte are ignored) as exact floats.
fn fmt_bytes6(w: u32) -> vec4<f32> {
    let v = (vec4<u32>(w) >> vec4<u32>(0u, 0u, 0u, 8u)) & vec4<u32>(0x3fu, 0x3f00u, 0x3f0000u, 0x3f0000u);
    let magic = vec4<u32>(0x4b000000u, 0x47000000u, 0x43000000u, 0x43000000u);
    return bitcast<vec4<f32>>(v | magic) - vec4<f32>(8388608.0, 32768.0, 128.0, 128.0);
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

// The four nibbles in bits 0..15 of `w` as exact floats: (byte0 lo, byte0 hi, byte1 lo, byte1 hi).
fn fmt_nibs(w: u32) -> vec4<f32> {
    let mask = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
    let magic = vec4<u32>(0x4b000000u, 0x49000000u, 0x47000000u, 0x45000000u);
    return bitcast<vec4<f32>>((vec4<u32>(w) & mask) | magic) - vec4<f32>(8388608.0, 524288.0, 32768.0, 2048.0);
}

struct FmtRow {
    hd: vec4<u32>,
    qa: vec4<u32>,
    qb: vec4<u32>,
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let bb = base + 9u * (item >> 2u);
    let u = item & 3u;
    return FmtRow(wq[bb], wq[bb + 1u + u], wq[bb + 5u + u]);
}

// x of one quad: sub-block j positions 4u..4u+3 (l) and 4u+16..4u+19 (h) for words a and b.
struct FmtX {
    la0: vec4<f32>, lb0: vec4<f32>, ha0: vec4<f32>, hb0: vec4<f32>,
    la1: vec4<f32>, lb1: vec4<f32>, ha1: vec4<f32>, hb1: vec4<f32>,
    la2: vec4<f32>, lb2: vec4<f32>, ha2: vec4<f32>, hb2: vec4<f32>,
    la3: vec4<f32>, lb3: vec4<f32>, ha3: vec4<f32>, hb3: vec4<f32>,
    sx03: vec4<f32>,
    sx47: vec4<f32>,
}

fn fmt_hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

fn fmt_x(item: u32) -> FmtX {
    // x vec4 of sub-block j, positions 4u..4u+3: 64 blk + 8 j + u; positions 4u+16..: + 4.
    let xb = (item >> 2u) * 64u + (item & 3u);
    var r: FmtX;
    r.la0 = mm_x4(xb);
    r.lb0 = mm_x4(xb + 4u);
    r.ha0 = mm_x4(xb + 8u);
    r.hb0 = mm_x4(xb + 12u);
    r.la1 = mm_x4(xb + 16u);
    r.lb1 = mm_x4(xb + 20u);
    r.ha1 = mm_x4(xb + 24u);
    r.hb1 = mm_x4(xb + 28u);
    r.la2 = mm_x4(xb + 32u);
    r.lb2 = mm_x4(xb + 36u);
    r.ha2 = mm_x4(xb + 40u);
    r.hb2 = mm_x4(xb + 44u);
    r.la3 = mm_x4(xb + 48u);
    r.lb3 = mm_x4(xb + 52u);
    r.ha3 = mm_x4(xb + 56u);
    r.hb3 = mm_x4(xb + 60u);
    r.sx03 = vec4<f32>(fmt_hsum(r.la0 + r.lb0), fmt_hsum(r.ha0 + r.hb0), fmt_hsum(r.la1 + r.lb1), fmt_hsum(r.ha1 + r.hb1));
    r.sx47 = vec4<f32>(fmt_hsum(r.la2 + r.lb2), fmt_hsum(r.ha2 + r.hb2), fmt_hsum(r.la3 + r.lb3), fmt_hsum(r.ha3 + r.hb3));
    return r;
}

// Partial dots of one nibble word (4 positions of a low and a high sub-block) with their x.
fn fmt_word_dot(w: u32, l: vec4<f32>, h: vec4<f32>) -> vec4<f32> {
    let s = fmt_nibs(w) * vec4<f32>(l.x, h.x, l.y, h.y);
    return fma(fmt_nibs(w >> 16u), vec4<f32>(l.z, h.z, l.w, h.w), s);
}

// Sub-block dots (low, high) of pair pp from words a (positions 4u..) and b (positions 4u+16..).
fn fmt_pair_dot(a: u32, b: u32, la: vec4<f32>, ha: vec4<f32>, lb: vec4<f32>, hb: vec4<f32>) -> vec2<f32> {
    let s = fmt_word_dot(a, la, ha) + fmt_word_dot(b, lb, hb);
    return s.xy + s.zw;
}

fn fmt_dot(d: FmtRow, q: FmtX) -> f32 {
    let dd = mm_f16x2(d.hd.x);
    let sm = fmt_scales(d.hd);
    let s01 = vec4<f32>(fmt_pair_dot(d.qa.x, d.qb.x, q.la0, q.ha0, q.lb0, q.hb0), fmt_pair_dot(d.qa.y, d.qb.y, q.la1, q.ha1, q.lb1, q.hb1));
    let s23 = vec4<f32>(fmt_pair_dot(d.qa.z, d.qb.z, q.la2, q.ha2, q.lb2, q.hb2), fmt_pair_dot(d.qa.w, d.qb.w, q.la3, q.ha3, q.lb3, q.hb3));
    return dd.x * (dot(sm.sc03, s01) + dot(sm.sc47, s23)) - dd.y * (dot(sm.m03, q.sx03) + dot(sm.m47, q.sx47));
}

// Columns 4c4 .. 4c4 + 3: sub-block j = (c4 % 64) / 8, positions 4wi .. 4wi + 3 with wi = c4 % 8.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let bb = base + 9u * (c4 / 64u);
    let j = (c4 % 64u) / 8u;
    let wi = c4 % 8u;
    let hd = wq[bb];
    let dd = mm_f16x2(hd.x);
    let sm = fmt_scales(hd);
    let sc = select(sm.sc03[j & 3u], sm.sc47[j & 3u], j >= 4u);
    let m = select(sm.m03[j & 3u], sm.m47[j & 3u], j >= 4u);
    let word = wq[bb + 1u + wi][j / 2u] >> ((j & 1u) * 4u);
    let q = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
    return fma(q, vec4<f32>(dd.x * sc), vec4<f32>(-(dd.y * m)));
}

// Integer dot (the quad-order int8 GEMV, MmQx): per sub-block j with activation scale dx_j,
// sum_i (d sc_j q_i - dmin m_j) dx_j xq_i = d sc_j dx_j D_j - dmin m_j (dx_j S_j), where
// D_j = sum_i q_i xq_i is exact (dot4I8Packed of the nibbles under 0x0f0f0f0f with the codes)
// and dx_j S_j comes with the activations.
fn fmt_qpair(a: u32, b: u32, c: vec4<u32>) -> vec2<i32> {
    let nib = 0x0f0f0f0fu;
    let lo = dot4I8Packed(a & nib, c.x) + dot4I8Packed(b & nib, c.y);
    let hi = dot4I8Packed((a >> 4u) & nib, c.z) + dot4I8Packed((b >> 4u) & nib, c.w);
    return vec2<i32>(lo, hi);
}

// A quad is an item of this format.
alias FmtQRow = FmtRow;

fn fmt_qload(base: u32, quad: u32) -> FmtRow {
    return fmt_load(base, quad);
}

fn fmt_qdot(w: FmtRow, x: MmQx) -> f32 {
    let dd = mm_f16x2(w.hd.x);
    let sm = fmt_scales(w.hd);
    let d03 = vec4<i32>(fmt_qpair(w.qa.x, w.qb.x, x.c0), fmt_qpair(w.qa.y, w.qb.y, x.c1));
    let d47 = vec4<i32>(fmt_qpair(w.qa.z, w.qb.z, x.c2), fmt_qpair(w.qa.w, w.qb.w, x.c3));
    let s = dot(sm.sc03, vec4<f32>(d03) * x.d03) + dot(sm.sc47, vec4<f32>(d47) * x.d47);
    let m = dot(sm.m03, x.s03) + dot(sm.m47, x.s47);
    return dd.x * s - dd.y * m;
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = sub-block
// j = run % 8 of block run / 8, i.e. the head and component j / 2 of the eight nibble vec4s
// (nibble j % 2 of each byte; vec4 1 + wi holds positions 4wi .. 4wi + 3).
struct FmtRun {
    hd: vec4<u32>,
    qa: vec4<u32>,  // positions 0 .. 15 (vec4s 1 .. 4)
    qb: vec4<u32>,  // positions 16 .. 31 (vec4s 5 .. 8)
    j: u32,
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let bb = base + 9u * (run / 8u);
    let j = run % 8u;
    let c = j / 2u;
    let qa = vec4<u32>(wq[bb + 1u][c], wq[bb + 2u][c], wq[bb + 3u][c], wq[bb + 4u][c]);
    let qb = vec4<u32>(wq[bb + 5u][c], wq[bb + 6u][c], wq[bb + 7u][c], wq[bb + 8u][c]);
    return FmtRun(wq[bb], qa, qb, j);
}

// The low nibbles of the four bytes of `w` (byte 0 first) as exact floats.
fn fmt_lo4(w: u32) -> vec4<f32> {
    let v = vec4<u32>(w, w, w, w >> 8u) & vec4<u32>(0xfu, 0xf00u, 0xf0000u, 0xf0000u);
    let magic = vec4<u32>(0x4b000000u, 0x47000000u, 0x43000000u, 0x43000000u);
    return bitcast<vec4<f32>>(v | magic) - vec4<f32>(8388608.0, 32768.0, 128.0, 128.0);
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
    let n = 4u * (r.j & 1u);
    return array<vec4<f32>, 8>(
        fma(fmt_lo4(r.qa.x >> n), f, o), fma(fmt_lo4(r.qa.y >> n), f, o),
        fma(fmt_lo4(r.qa.z >> n), f, o), fma(fmt_lo4(r.qa.w >> n), f, o),
        fma(fmt_lo4(r.qb.x >> n), f, o), fma(fmt_lo4(r.qb.y >> n), f, o),
        fma(fmt_lo4(r.qb.z >> n), f, o), fma(fmt_lo4(r.qb.w >> n), f, o));
}
