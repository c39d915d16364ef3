// Q4_0 format part (contract: src/formats/mod.rs; layout: src/formats/q4_0.rs). Row = k / 32
// vec4s of code bytes (block b: vec4 b), then the k / 32 f16 scales (block 2i: low half of
// word i). Item = one block: byte t holds weights t (low nibble) and t + 16 (high nibble).
// w = d * (q - 8), exact in f32.

struct FmtRow {
    q: vec4<u32>,
    sw: u32,  // the scale word holding the block's d
    hi: u32,  // 1: d is its high half
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let s = wq[base + p.k4 / 8u + item / 8u];
    return FmtRow(wq[base + item], s[(item % 8u) / 2u], item & 1u);
}

struct FmtX {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,  // weights 0..15
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,  // weights 16..31
}

fn fmt_x(item: u32) -> FmtX {
    let c = 8u * item;
    return FmtX(mm_x4(c), mm_x4(c + 1u), mm_x4(c + 2u), mm_x4(c + 3u), mm_x4(c + 4u), mm_x4(c + 5u), mm_x4(c + 6u), mm_x4(c + 7u));
}

// The low (shift 0) or high (shift 4) nibbles of the four bytes of `w`, minus 8.
fn fmt_q4(w: u32, shift: u32) -> vec4<f32> {
    let n = (vec4<u32>(w) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(15u);
    return vec4<f32>(n) - vec4<f32>(8.0);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let d = mm_f16x2(w.sw)[w.hi];
    let lo = (dot(fmt_q4(w.q.x, 0u), x.a0) + dot(fmt_q4(w.q.y, 0u), x.a1)) + (dot(fmt_q4(w.q.z, 0u), x.a2) + dot(fmt_q4(w.q.w, 0u), x.a3));
    let hi = (dot(fmt_q4(w.q.x, 4u), x.b0) + dot(fmt_q4(w.q.y, 4u), x.b1)) + (dot(fmt_q4(w.q.z, 4u), x.b2) + dot(fmt_q4(w.q.w, 4u), x.b3));
    return d * (lo + hi);
}

// Columns 4c4 .. 4c4 + 3: block c4 / 8, weights 4j .. 4j + 3 (j = c4 % 8): word j % 4, low
// nibbles for j < 4.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let j = c4 % 8u;
    let s = wq[base + p.k4 / 8u + b / 8u];
    let d = mm_f16x2(s[(b % 8u) / 2u])[b & 1u];
    return d * fmt_q4(wq[base + b][j % 4u], 4u * (j / 4u));
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block
// run = item run.
alias FmtRun = FmtRow;

fn fmt_run_load(base: u32, run: u32) -> FmtRow {
    return fmt_load(base, run);
}

fn fmt_run(r: FmtRow) -> array<vec4<f32>, 8> {
    let d = mm_f16x2(r.sw)[r.hi];
    return array<vec4<f32>, 8>(
        d * fmt_q4(r.q.x, 0u), d * fmt_q4(r.q.y, 0u), d * fmt_q4(r.q.z, 0u), d * fmt_q4(r.q.w, 0u),
        d * fmt_q4(r.q.x, 4u), d * fmt_q4(r.q.y, 4u), d * fmt_q4(r.q.z, 4u), d * fmt_q4(r.q.w, 4u));
}

// Integer dot (the quad-order int8 GEMV, MmQx). Quad u of a 256-column group g = word u of the
// eight blocks j = 8g .. 8g + 7 (code vec4 8g + j): its low nibbles are positions 4u .. 4u + 3,
// its high nibbles positions 4u + 16 .. 4u + 19, the order of the activation words. Codes 0..15
// are valid signed bytes: sum (c - 8) xc = dot(c, xc) - 8 dot(1, xc), exact integers; then
// sum_j d_j dx_j D_j with the scales of scale vec4 g.
struct FmtQRow {
    w03: vec4<u32>,  // word u of blocks 0 .. 3
    w47: vec4<u32>,
    sc: vec4<u32>,   // d of blocks 2i (low half) and 2i + 1 (high half) in word i
}

fn fmt_qload(base: u32, quad: u32) -> FmtQRow {
    let g = quad / 4u;
    let u = quad % 4u;
    let v = base + 8u * g;
    return FmtQRow(vec4<u32>(wq[v][u], wq[v + 1u][u], wq[v + 2u][u], wq[v + 3u][u]),
                   vec4<u32>(wq[v + 4u][u], wq[v + 5u][u], wq[v + 6u][u], wq[v + 7u][u]),
                   wq[base + p.k4 / 8u + g]);
}

// D_j of one block's word w with the activation codes xa (positions 4u ..) and xb (4u + 16 ..).
fn fmt_qblock(w: u32, xa: u32, xb: u32) -> i32 {
    let lo = w & 0x0f0f0f0fu;
    let hi = (w >> 4u) & 0x0f0f0f0fu;
    return dot4I8Packed((lo + 0x78787878u) ^ 0x80808080u, xa) + dot4I8Packed((hi + 0x78787878u) ^ 0x80808080u, xb);
}

fn fmt_qdot(w: FmtQRow, x: MmQx) -> f32 {
    let i03 = vec4<i32>(fmt_qblock(w.w03.x, x.c0.x, x.c0.y), fmt_qblock(w.w03.y, x.c0.z, x.c0.w),
                        fmt_qblock(w.w03.z, x.c1.x, x.c1.y), fmt_qblock(w.w03.w, x.c1.z, x.c1.w));
    let i47 = vec4<i32>(fmt_qblock(w.w47.x, x.c2.x, x.c2.y), fmt_qblock(w.w47.y, x.c2.z, x.c2.w),
                        fmt_qblock(w.w47.z, x.c3.x, x.c3.y), fmt_qblock(w.w47.w, x.c3.z, x.c3.w));
    let d03 = vec4<f32>(mm_f16x2(w.sc.x), mm_f16x2(w.sc.y));
    let d47 = vec4<f32>(mm_f16x2(w.sc.z), mm_f16x2(w.sc.w));
    return dot(d03 * x.d03, vec4<f32>(i03)) + dot(d47 * x.d47, vec4<f32>(i47));
}
