// Q5_0 format part (contract: src/formats/mod.rs; layout: src/formats/q5_0.rs). Row = k / 32
// vec4s of low-nibble bytes (block b: vec4 b), then two head words per block (qh, f16 d in the
// low half). Item = one block: byte t holds the low nibbles of weights t (low) and t + 16
// (high); bit i of qh is bit 4 of weight i. w = d * (q - 16), exact in f32.

struct FmtRow {
    q: vec4<u32>,
    h: vec2<u32>,  // qh, d
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let h = wq[base + p.k4 / 8u + item / 2u];
    return FmtRow(wq[base + item], select(h.xy, h.zw, (item & 1u) != 0u));
}

struct FmtX {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,  // weights 0..15
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,  // weights 16..31
}

fn fmt_x(item: u32) -> FmtX {
    let c = 8u * item;
    return FmtX(mm_x4(c), mm_x4(c + 1u), mm_x4(c + 2u), mm_x4(c + 3u), mm_x4(c + 4u), mm_x4(c + 5u), mm_x4(c + 6u), mm_x4(c + 7u));
}

// Weights 4j .. 4j + 3 of a block (j < 8) as q - 16: nibbles of word j % 4 (high ones for
// j >= 4) and bits 4j .. 4j + 3 of qh.
fn fmt_q5(q: vec4<u32>, qh: u32, j: u32) -> vec4<f32> {
    let n = (vec4<u32>(q[j % 4u]) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(4u * (j / 4u)))) & vec4<u32>(15u);
    let hb = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(4u * j))) & vec4<u32>(1u);
    return vec4<f32>(n | (hb << vec4<u32>(4u))) - vec4<f32>(16.0);
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let d = mm_f16x2(w.h.y).x;
    let qh = w.h.x;
    let lo = (dot(fmt_q5(w.q, qh, 0u), x.a0) + dot(fmt_q5(w.q, qh, 1u), x.a1)) + (dot(fmt_q5(w.q, qh, 2u), x.a2) + dot(fmt_q5(w.q, qh, 3u), x.a3));
    let hi = (dot(fmt_q5(w.q, qh, 4u), x.b0) + dot(fmt_q5(w.q, qh, 5u), x.b1)) + (dot(fmt_q5(w.q, qh, 6u), x.b2) + dot(fmt_q5(w.q, qh, 7u), x.b3));
    return d * (lo + hi);
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let h = wq[base + p.k4 / 8u + b / 2u];
    let hw = select(h.xy, h.zw, (b & 1u) != 0u);
    return mm_f16x2(hw.y).x * fmt_q5(wq[base + b], hw.x, c4 % 8u);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block
// run = item run; the arithmetic of fmt_w4 with the head decoded once.
alias FmtRun = FmtRow;

fn fmt_run_load(base: u32, run: u32) -> FmtRow {
    return fmt_load(base, run);
}

fn fmt_run(r: FmtRow) -> array<vec4<f32>, 8> {
    let d = mm_f16x2(r.h.y).x;
    let qh = r.h.x;
    return array<vec4<f32>, 8>(
        d * fmt_q5(r.q, qh, 0u), d * fmt_q5(r.q, qh, 1u), d * fmt_q5(r.q, qh, 2u), d * fmt_q5(r.q, qh, 3u),
        d * fmt_q5(r.q, qh, 4u), d * fmt_q5(r.q, qh, 5u), d * fmt_q5(r.q, qh, 6u), d * fmt_q5(r.q, qh, 7u));
}
