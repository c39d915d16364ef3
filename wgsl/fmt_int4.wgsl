// INT4 format part (contract: src/formats/mod.rs; layout: src/formats/int4.rs). Row = k / 32
// vec4s of code bytes (block b: vec4 b), then the k / 32 f32 scales (block b: word b). Item =
// one block: byte t holds weights 2t (low nibble) and 2t + 1 (high nibble), two's-complement
// nibbles. w = d * q, one f32 multiplication.

struct FmtRow {
    q: vec4<u32>,
    d: u32,  // the block's scale (f32 bits)
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    return FmtRow(wq[base + item], wq[base + p.k4 / 8u + item / 4u][item % 4u]);
}

struct FmtX {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32>,
}

fn fmt_x(item: u32) -> FmtX {
    let c = 8u * item;
    return FmtX(mm_x4(c), mm_x4(c + 1u), mm_x4(c + 2u), mm_x4(c + 3u), mm_x4(c + 4u), mm_x4(c + 5u), mm_x4(c + 6u), mm_x4(c + 7u));
}

// The eight signed nibbles of `w` in weight order (see mm_u4x8), as -8..7.
fn fmt_s4x8(w: u32) -> array<vec4<f32>, 2> {
    let u = mm_u4x8(w ^ 0x88888888u);
    return array<vec4<f32>, 2>(u[0] - vec4<f32>(8.0), u[1] - vec4<f32>(8.0));
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let q0 = fmt_s4x8(w.q.x);
    let q1 = fmt_s4x8(w.q.y);
    let q2 = fmt_s4x8(w.q.z);
    let q3 = fmt_s4x8(w.q.w);
    let s = (dot(q0[0], x.a0) + dot(q0[1], x.a1)) + (dot(q1[0], x.a2) + dot(q1[1], x.a3))
        + ((dot(q2[0], x.a4) + dot(q2[1], x.a5)) + (dot(q3[0], x.a6) + dot(q3[1], x.a7)));
    return bitcast<f32>(w.d) * s;
}

// Columns 4c4 .. 4c4 + 3: block c4 / 8, weights 4j .. 4j + 3 (j = c4 % 8): word j / 2, its
// low (j even) or high half.
fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let j = c4 % 8u;
    let d = bitcast<f32>(wq[base + p.k4 / 8u + b / 4u][b % 4u]);
    let q = fmt_s4x8(wq[base + b][j / 2u]);
    return d * select(q[0], q[1], (j & 1u) == 1u);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block
// run = item run; the arithmetic of fmt_w4.
alias FmtRun = FmtRow;

fn fmt_run_load(base: u32, run: u32) -> FmtRow {
    return fmt_load(base, run);
}

fn fmt_run(r: FmtRow) -> array<vec4<f32>, 8> {
    let d = bitcast<f32>(r.d);
    let a = fmt_s4x8(r.q.x);
    let b = fmt_s4x8(r.q.y);
    let c = fmt_s4x8(r.q.z);
    let e = fmt_s4x8(r.q.w);
    return array<vec4<f32>, 8>(d * a[0], d * a[1], d * b[0], d * b[1], d * c[0], d * c[1], d * e[0], d * e[1]);
}
