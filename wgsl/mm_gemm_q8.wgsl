// Weight-matrix GEMM for a few activation rows (MR = m <= 16) on int8 activations in quad order
// (the q8 quantiser's Q4_K-order records of m rows, see MmQx in mm_common.wgsl), for formats whose
// part defines fmt_qload / fmt_qdot: a multi-row GEMV. Each weight item (a quad, 64 columns) is
// loaded once and dotted with the MR activation rows' records of that quad, so the weights are
// read once per dispatch, and y[a * ldy + y_off + r] = the int8 GEMV (mm_gemv_qk.wgsl) of row a.
// Prepended: a team file, mm_common.wgsl; appended: the format part.
//
// A team computes ROWS weight rows at a time for all MR activation rows (MR x ROWS f32
// accumulators per lane: one vec4 per activation row, component r = weight row r); its lanes
// stride over the row's quads, UNROLL per iteration with the weight loads of the iteration issued
// before any arithmetic; rows past n are clamped to row n - 1 for loading and never written; one
// team_sum per activation row and row block, in workgroup-uniform control flow (every team of a
// workgroup runs the same number of row blocks). The accumulators are named variables under
// compile-time guards (MR is an override), never a dynamically indexed array.
// Activation records: vec4 t of quad qd of activation row a at t * p.xs + a * p.items + qd
// (p.items = quads per row, p.xs = quads of the whole quantised buffer).

override MR: u32 = 1u;      // activation rows, 1..16
override ROWS: u32 = 2u;    // weight rows per team, 1..4
override UNROLL: u32 = 1u;  // quads per lane per iteration: 1, 2 or 4

@group(0) @binding(2) var<storage, read> xk: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// The format parts' f32 paths name it; this kernel never calls them.
fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

fn mq_x(a: u32, qd: u32) -> MmQx {
    let q = p.xs;
    let i = a * p.items + qd;
    return MmQx(xk[i], xk[q + i], xk[2u * q + i], xk[3u * q + i],
                bitcast<vec4<f32>>(xk[4u * q + i]), bitcast<vec4<f32>>(xk[5u * q + i]),
                bitcast<vec4<f32>>(xk[6u * q + i]), bitcast<vec4<f32>>(xk[7u * q + i]));
}

struct MqSlab {
    r0: FmtQRow,
    r1: FmtQRow,
    r2: FmtQRow,
    r3: FmtQRow,
}

fn mq_load(rows: vec4<u32>, qd: u32) -> MqSlab {
    var sl: MqSlab;
    sl.r0 = fmt_qload(rows.x * p.row_vec4s, qd);
    if (ROWS > 1u) {
        sl.r1 = fmt_qload(rows.y * p.row_vec4s, qd);
    }
    if (ROWS > 2u) {
        sl.r2 = fmt_qload(rows.z * p.row_vec4s, qd);
    }
    if (ROWS > 3u) {
        sl.r3 = fmt_qload(rows.w * p.row_vec4s, qd);
    }
    return sl;
}

// The partial dots of the slab's ROWS rows with activation row a over quad qd.
fn mq_dot(sl: MqSlab, a: u32, qd: u32) -> vec4<f32> {
    let xs = mq_x(a, qd);
    var d = vec4<f32>(0.0);
    d.x = fmt_qdot(sl.r0, xs);
    if (ROWS > 1u) {
        d.y = fmt_qdot(sl.r1, xs);
    }
    if (ROWS > 2u) {
        d.z = fmt_qdot(sl.r2, xs);
    }
    if (ROWS > 3u) {
        d.w = fmt_qdot(sl.r3, xs);
    }
    return d;
}

// The accumulators: activation row a in acc[a / 4][a % 4] would need dynamic indexing; named
// vec4s under guards keep them in registers.
struct MqAcc {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32>,
    a8: vec4<f32>, a9: vec4<f32>, a10: vec4<f32>, a11: vec4<f32>,
    a12: vec4<f32>, a13: vec4<f32>, a14: vec4<f32>, a15: vec4<f32>,
}

fn mq_zero() -> MqAcc {
    let z = vec4<f32>(0.0);
    return MqAcc(z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z);
}

fn mq_math(acc: ptr<function, MqAcc>, sl: MqSlab, qd: u32) {
    (*acc).a0 += mq_dot(sl, 0u, qd);
    if (MR > 1u) { (*acc).a1 += mq_dot(sl, 1u, qd); }
    if (MR > 2u) { (*acc).a2 += mq_dot(sl, 2u, qd); }
    if (MR > 3u) { (*acc).a3 += mq_dot(sl, 3u, qd); }
    if (MR > 4u) { (*acc).a4 += mq_dot(sl, 4u, qd); }
    if (MR > 5u) { (*acc).a5 += mq_dot(sl, 5u, qd); }
    if (MR > 6u) { (*acc).a6 += mq_dot(sl, 6u, qd); }
    if (MR > 7u) { (*acc).a7 += mq_dot(sl, 7u, qd); }
    if (MR > 8u) { (*acc).a8 += mq_dot(sl, 8u, qd); }
    if (MR > 9u) { (*acc).a9 += mq_dot(sl, 9u, qd); }
    if (MR > 10u) { (*acc).a10 += mq_dot(sl, 10u, qd); }
    if (MR > 11u) { (*acc).a11 += mq_dot(sl, 11u, qd); }
    if (MR > 12u) { (*acc).a12 += mq_dot(sl, 12u, qd); }
    if (MR > 13u) { (*acc).a13 += mq_dot(sl, 13u, qd); }
    if (MR > 14u) { (*acc).a14 += mq_dot(sl, 14u, qd); }
    if (MR > 15u) { (*acc).a15 += mq_dot(sl, 15u, qd); }
}

// Reduce activation row a's partials over the team and store its ROWS outputs of row block r0.
fn mq_finish(v: vec4<f32>, a: u32, r0: u32, write: bool) {
    let tot = team_sum(v);
    if (!write) {
        return;
    }
    let o = a * p.ldy + p.y_off + r0;
    y[o] = tot.x;
    if (ROWS > 1u && r0 + 1u < p.n) {
        y[o + 1u] = tot.y;
    }
    if (ROWS > 2u && r0 + 2u < p.n) {
        y[o + 2u] = tot.z;
    }
    if (ROWS > 3u && r0 + 3u < p.n) {
        y[o + 3u] = tot.w;
    }
}

fn team_main(t: Team) {
    let items = p.items;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let step = t.lanes * UNROLL;
    for (var base = 0u; base < blocks; base += t.count) {
        let rb = base + t.id;
        let live = rb < blocks;
        let rows = min(vec4<u32>(rb * ROWS) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n - 1u));
        var acc: MqAcc;
        acc = mq_zero(); // explicitly, every row block
        var i0 = 0u;
        if (live) {
            for (; i0 + step <= items; i0 += step) {
                let i = i0 + t.lane;
                let sa = mq_load(rows, i);
                var sb: MqSlab;
                var sc: MqSlab;
                var sd: MqSlab;
                if (UNROLL > 1u) {
                    sb = mq_load(rows, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    sc = mq_load(rows, i + 2u * t.lanes);
                    sd = mq_load(rows, i + 3u * t.lanes);
                }
                mq_math(&acc, sa, i);
                if (UNROLL > 1u) {
                    mq_math(&acc, sb, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    mq_math(&acc, sc, i + 2u * t.lanes);
                    mq_math(&acc, sd, i + 3u * t.lanes);
                }
            }
            for (var i = i0 + t.lane; i < items; i += t.lanes) {
                mq_math(&acc, mq_load(rows, i), i);
            }
        }
        let w = live && t.lane == 0u;
        let r0 = rb * ROWS;
        mq_finish(acc.a0, 0u, r0, w);
        if (MR > 1u) { mq_finish(acc.a1, 1u, r0, w); }
        if (MR > 2u) { mq_finish(acc.a2, 2u, r0, w); }
        if (MR > 3u) { mq_finish(acc.a3, 3u, r0, w); }
        if (MR > 4u) { mq_finish(acc.a4, 4u, r0, w); }
        if (MR > 5u) { mq_finish(acc.a5, 5u, r0, w); }
        if (MR > 6u) { mq_finish(acc.a6, 6u, r0, w); }
        if (MR > 7u) { mq_finish(acc.a7, 7u, r0, w); }
        if (MR > 8u) { mq_finish(acc.a8, 8u, r0, w); }
        if (MR > 9u) { mq_finish(acc.a9, 9u, r0, w); }
        if (MR > 10u) { mq_finish(acc.a10, 10u, r0, w); }
        if (MR > 11u) { mq_finish(acc.a11, 11u, r0, w); }
        if (MR > 12u) { mq_finish(acc.a12, 12u, r0, w); }
        if (MR > 13u) { mq_finish(acc.a13, 13u, r0, w); }
        if (MR > 14u) { mq_finish(acc.a14, 14u, r0, w); }
        if (MR > 15u) { mq_finish(acc.a15, 15u, r0, w); }
    }
}
