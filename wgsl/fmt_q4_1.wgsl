// Q4_1 format part (contract: src/formats/mod.rs; layout: src/formats/q4_1.rs). Row = k / 32
// vec4s of code bytes (block b: vec4 b), then one head word per block (f16 d | f16 m << 16).
// Item = one block: byte t holds weights t (low nibble) and t + 16 (high nibble).
// w = d * q + m: d * q is exact, the addition rounds once (as on the CPU).

struct FmtRow {
    q: vec4<u32>,
    h: u32,  // d | m << 16
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    return FmtRow(wq[base + item], wq[base + p.k4 / 8u + item / 4u][item % 4u]);
}

struct FmtX {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,  // weights 0..15
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,  // weights 16..31
    sx: f32,                                                      // sum of the 32 x
}

fn fmt_x(item: u32) -> FmtX {
    let c = 8u * item;
    var r = FmtX(mm_x4(c), mm_x4(c + 1u), mm_x4(c + 2u), mm_x4(c + 3u), mm_x4(c + 4u), mm_x4(c + 5u), mm_x4(c + 6u), mm_x4(c + 7u), 0.0);
    let s = ((r.a0 + r.a1) + (r.a2 + r.a3)) + ((r.b0 + r.b1) + (r.b2 + r.b3));
    r.sx = (s.x + s.y) + (s.z + s.w);
    return r;
}

// The low (shift 0) or high (shift 4) nibbles of the four bytes of `w`.
fn fmt_q4(w: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(w) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(15u));
}

// sum (d q + m) x = d sum q x + m sum x.
fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let dm = mm_f16x2(w.h);
    let lo = (dot(fmt_q4(w.q.x, 0u), x.a0) + dot(fmt_q4(w.q.y, 0u), x.a1)) + (dot(fmt_q4(w.q.z, 0u), x.a2) + dot(fmt_q4(w.q.w, 0u), x.a3));
    let hi = (dot(fmt_q4(w.q.x, 4u), x.b0) + dot(fmt_q4(w.q.y, 4u), x.b1)) + (dot(fmt_q4(w.q.z, 4u), x.b2) + dot(fmt_q4(w.q.w, 4u), x.b3));
    return dm.x * (lo + hi) + dm.y * x.sx;
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let j = c4 % 8u;
    let dm = mm_f16x2(wq[base + p.k4 / 8u + b / 4u][b % 4u]);
    return fma(fmt_q4(wq[base + b][j % 4u], 4u * (j / 4u)), vec4<f32>(dm.x), vec4<f32>(dm.y));
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block
// run = item run; the arithmetic of fmt_w4 with the head decoded once.
alias FmtRun = FmtRow;

fn fmt_run_load(base: u32, run: u32) -> FmtRow {
    return fmt_load(base, run);
}

fn fmt_run(r: FmtRow) -> array<vec4<f32>, 8> {
    let dm = mm_f16x2(r.h);
    let d = vec4<f32>(dm.x);
    let m = vec4<f32>(dm.y);
    return array<vec4<f32>, 8>(
        fma(fmt_q4(r.q.x, 0u), d, m), fma(fmt_q4(r.q.y, 0u), d, m), fma(fmt_q4(r.q.z, 0u), d, m), fma(fmt_q4(r.q.w, 0u), d, m),
        fma(fmt_q4(r.q.x, 4u), d, m), fma(fmt_q4(r.q.y, 4u), d, m), fma(fmt_q4(r.q.z, 4u), d, m), fma(fmt_q4(r.q.w, 4u), d, m));
}
