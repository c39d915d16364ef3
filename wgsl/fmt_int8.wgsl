// INT8 format part (contract: src/formats/mod.rs; layout: src/formats/int8.rs). Row = k code
// bytes (k / 16 vec4s), then the k / 32 f32 scales (block b: word b); item = 16 weights (one
// vec4 of codes) of block item / 2. w = d * q, one f32 multiplication.

struct FmtRow {
    q: vec4<u32>,
    d: u32,  // the block's scale (f32 bits)
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    let b = item / 2u;
    return FmtRow(wq[base + item], wq[base + p.k4 / 4u + b / 4u][b % 4u]);
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
    let s = (dot(mm_i8x4(w.q.x), x.a) + dot(mm_i8x4(w.q.y), x.b)) + (dot(mm_i8x4(w.q.z), x.c) + dot(mm_i8x4(w.q.w), x.d));
    return bitcast<f32>(w.d) * s;
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let b = c4 / 8u;
    let d = bitcast<f32>(wq[base + p.k4 / 4u + b / 4u][b % 4u]);
    return d * mm_i8x4(wq[base + c4 / 4u][c4 % 4u]);
}

// Run (the Matrix GEMM's weight staging; contract: src/formats/mod.rs): 32 columns = block run
// = items 2 run and 2 run + 1; the arithmetic of fmt_w4.
struct FmtRun {
    q0: vec4<u32>,
    q1: vec4<u32>,
    d: u32,  // the block's scale (f32 bits)
}

fn fmt_run_load(base: u32, run: u32) -> FmtRun {
    return FmtRun(wq[base + 2u * run], wq[base + 2u * run + 1u], wq[base + p.k4 / 4u + run / 4u][run % 4u]);
}

fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8> {
    let d = bitcast<f32>(r.d);
    return array<vec4<f32>, 8>(
        d * mm_i8x4(r.q0.x), d * mm_i8x4(r.q0.y), d * mm_i8x4(r.q0.z), d * mm_i8x4(r.q0.w),
        d * mm_i8x4(r.q1.x), d * mm_i8x4(r.q1.y), d * mm_i8x4(r.q1.z), d * mm_i8x4(r.q1.w));
}
