// Q8_0 format part (contract: src/formats/mod.rs; layout: src/formats/q8_0.rs). Row = k code
// bytes (k / 16 vec4s), then the k / 32 f16 scales; item = 16 weights (one vec4 of codes) of
// block item / 2. w = d * q, exact in f32.

struct FmtRow {
    q: vec4<u32>,
    sw: u32,   // the scale word holding the block's d
    hi: u32,   // 1: d is its high half
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let b = item / 2u;
    let s = wq[base + p.k4 / 4u + b / 8u];
    return FmtRow(wq[base + item], s[(b % 8u) / 2u], b & 1u);
}

struct FmtX {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
}

fn fmt_x(item: u32) -> FmtX {
    return FmtX(mm_x4(4u * item), mm_x4(4u * item + 1u), mm_x4(4u * item + 2u), mm_x4(4u * item + 3u));
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let d = mm_f16x2(w.sw)[w.hi];
    let s = dot(mm_i8x4(w.q.x), x.a) + dot(mm_i8x4(w.q.y), x.b) + (dot(mm_i8x4(w.q.z), x.c) + dot(mm_i8x4(w.q.w), x.d));
    return d * s;
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let s = wq[base + p.k4 / 4u + b / 8u];
    let d = mm_f16x2(s[(b % 8u) / 2u])[b & 1u];
    return d * mm_i8x4(wq[base + c4 / 4u][c4 % 4u]);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block run,
// code vec4s 2 run and 2 run + 1 and the block's scale.
struct FmtRun {
    q0: vec4<u32>,
    q1: vec4<u32>,
    sw: u32,  // the scale word holding the block's d
    hi: u32,  // 1: d is its high half
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    let s = wq[base + p.k4 / 4u + run / 8u];
    return FmtRun(wq[base + 2u * run], wq[base + 2u * run + 1u], s[(run % 8u) / 2u], run & 1u);
}

fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let d = mm_f16x2(r.sw)[r.hi];
    return array<vec4<f32>, 8>(
        d * mm_i8x4(r.q0.x), d * mm_i8x4(r.q0.y), d * mm_i8x4(r.q0.z), d * mm_i8x4(r.q0.w),
        d * mm_i8x4(r.q1.x), d * mm_i8x4(r.q1.y), d * mm_i8x4(r.q1.z), d * mm_i8x4(r.q1.w));
}
