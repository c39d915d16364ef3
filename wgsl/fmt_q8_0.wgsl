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

// Integer dot (the quad-order int8 GEMV, MmQx). Quad u of a 256-column group g covers positions
// 4u .. 4u + 3 and 4u + 16 .. 4u + 19 of its eight blocks j: component u of code vec4s
// 16g + 2j and 16g + 2j + 1 (four codes each, byte order = column order, as the activation
// words); the eight blocks' scales are the halves of scale vec4 g. Per block, the two words'
// products are exact integers: sum_j d_j dx_j D_j.
struct FmtQRow {
    a03: vec4<u32>,  // blocks 0 .. 3, positions 4u ..
    b03: vec4<u32>,  // blocks 0 .. 3, positions 4u + 16 ..
    a47: vec4<u32>,
    b47: vec4<u32>,
    sc: vec4<u32>,   // d of blocks 2i (low half) and 2i + 1 (high half) in word i
}

fn fmt_qload(base: u32, quad: u32) -> FmtQRow {
    let g = quad / 4u;
    let u = quad % 4u;
    let v = base + 16u * g;
    return FmtQRow(
        vec4<u32>(wq[v][u], wq[v + 2u][u], wq[v + 4u][u], wq[v + 6u][u]),
        vec4<u32>(wq[v + 1u][u], wq[v + 3u][u], wq[v + 5u][u], wq[v + 7u][u]),
        vec4<u32>(wq[v + 8u][u], wq[v + 10u][u], wq[v + 12u][u], wq[v + 14u][u]),
        vec4<u32>(wq[v + 9u][u], wq[v + 11u][u], wq[v + 13u][u], wq[v + 15u][u]),
        wq[base + p.k4 / 4u + g]);
}

fn fmt_qdot(w: FmtQRow, x: MmQx) -> f32 {
    let i03 = vec4<i32>(dot4I8Packed(w.a03.x, x.c0.x) + dot4I8Packed(w.b03.x, x.c0.y),
                        dot4I8Packed(w.a03.y, x.c0.z) + dot4I8Packed(w.b03.y, x.c0.w),
                        dot4I8Packed(w.a03.z, x.c1.x) + dot4I8Packed(w.b03.z, x.c1.y),
                        dot4I8Packed(w.a03.w, x.c1.z) + dot4I8Packed(w.b03.w, x.c1.w));
    let i47 = vec4<i32>(dot4I8Packed(w.a47.x, x.c2.x) + dot4I8Packed(w.b47.x, x.c2.y),
                        dot4I8Packed(w.a47.y, x.c2.z) + dot4I8Packed(w.b47.y, x.c2.w),
                        dot4I8Packed(w.a47.z, x.c3.x) + dot4I8Packed(w.b47.z, x.c3.y),
                        dot4I8Packed(w.a47.w, x.c3.z) + dot4I8Packed(w.b47.w, x.c3.w));
    let d03 = vec4<f32>(mm_f16x2(w.sc.x), mm_f16x2(w.sc.y));
    let d47 = vec4<f32>(mm_f16x2(w.sc.z), mm_f16x2(w.sc.w));
    return dot(d03 * x.d03, vec4<f32>(i03)) + dot(d47 * x.d47, vec4<f32>(i47));
}
