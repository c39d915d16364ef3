// Weight-matrix GEMM for a few activation rows (MR = m <= 16) on int8 activations in quad order
// (the q8 quantiser's Q4_K-order records of m rows, see MmQx in mm_common.wgsl), for formats whose
// part defines fmt_qload / fmt_qdot: a multi-row GEMV. Each weight item (a quad, 64 columns) is
// loaded once and dotted with the MR activation rows' records of that quad, so the weights are
// read once per dispatch, and y[a * ldy + y_off + r] = the int8 GEMV (mm_gemv_qk.wgsl) of row a.
// Prepended: a team file, mm_common.wgsl; appended: the format part and the row driver
// mm_rows.wgsl, whose accumulator hooks this file defines: MR x ROWS f32 accumulators per lane
// (one vec4 per activation row, component r = weight row r), one team_sum per activation row and
// row block. The accumulators are named variables under compile-time guards (MR is an
// override), never a dynamically indexed array; the live rows p.m (<= MR) are a uniform runtime
// value, so one pipeline serves every m of its power-of-two bucket.
// Activation records: vec4 t of quad qd of activation row a at t * p.xs + a * p.items + qd
// (p.items = quads per row, p.xs = quads of the whole quantised buffer).

override MR: u32 = 1u;  // activation-row slots (a power of two, 1..16); p.m <= MR rows are live

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

alias MmRow = FmtQRow;

fn mm_item_load(base: u32, qd: u32) -> FmtQRow {
    return fmt_qload(base, qd);
}

alias MmX = MmQx;

fn mm_item_dot(r: FmtQRow, xs: MmQx) -> f32 {
    return fmt_qdot(r, xs);
}

// The partial dots of the slab's ROWS rows with activation row a over quad qd.
fn mq_dot(sl: MmSlab, a: u32, qd: u32) -> vec4<f32> {
    return mm_slab_dot(sl, mq_x(a, qd));
}

// The accumulators: activation row a in acc[a / 4][a % 4] would need dynamic indexing; named
// vec4s under guards keep them in registers.
struct MmAcc {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32>,
    a8: vec4<f32>, a9: vec4<f32>, a10: vec4<f32>, a11: vec4<f32>,
    a12: vec4<f32>, a13: vec4<f32>, a14: vec4<f32>, a15: vec4<f32>,
}

fn mm_acc_zero() -> MmAcc {
    let z = vec4<f32>(0.0);
    return MmAcc(z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z);
}

fn mm_acc_add(acc: ptr<function, MmAcc>, sl: MmSlab, qd: u32) {
    (*acc).a0 += mq_dot(sl, 0u, qd);
    if (MR > 1u && p.m > 1u) { (*acc).a1 += mq_dot(sl, 1u, qd); }
    if (MR > 2u && p.m > 2u) { (*acc).a2 += mq_dot(sl, 2u, qd); }
    if (MR > 3u && p.m > 3u) { (*acc).a3 += mq_dot(sl, 3u, qd); }
    if (MR > 4u && p.m > 4u) { (*acc).a4 += mq_dot(sl, 4u, qd); }
    if (MR > 5u && p.m > 5u) { (*acc).a5 += mq_dot(sl, 5u, qd); }
    if (MR > 6u && p.m > 6u) { (*acc).a6 += mq_dot(sl, 6u, qd); }
    if (MR > 7u && p.m > 7u) { (*acc).a7 += mq_dot(sl, 7u, qd); }
    if (MR > 8u && p.m > 8u) { (*acc).a8 += mq_dot(sl, 8u, qd); }
    if (MR > 9u && p.m > 9u) { (*acc).a9 += mq_dot(sl, 9u, qd); }
    if (MR > 10u && p.m > 10u) { (*acc).a10 += mq_dot(sl, 10u, qd); }
    if (MR > 11u && p.m > 11u) { (*acc).a11 += mq_dot(sl, 11u, qd); }
    if (MR > 12u && p.m > 12u) { (*acc).a12 += mq_dot(sl, 12u, qd); }
    if (MR > 13u && p.m > 13u) { (*acc).a13 += mq_dot(sl, 13u, qd); }
    if (MR > 14u && p.m > 14u) { (*acc).a14 += mq_dot(sl, 14u, qd); }
    if (MR > 15u && p.m > 15u) { (*acc).a15 += mq_dot(sl, 15u, qd); }
}

// Reduce activation row a's partials over the team and store its ROWS outputs of row block r0.
fn mq_finish(v: vec4<f32>, a: u32, r0: u32, write: bool) {
    let tot = team_sum(v);
    if (write) {
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
}

fn mm_finish(acc: MmAcc, r0: u32, w: bool) {
    mq_finish(acc.a0, 0u, r0, w);
    if (MR > 1u && p.m > 1u) { mq_finish(acc.a1, 1u, r0, w); }
    if (MR > 2u && p.m > 2u) { mq_finish(acc.a2, 2u, r0, w); }
    if (MR > 3u && p.m > 3u) { mq_finish(acc.a3, 3u, r0, w); }
    if (MR > 4u && p.m > 4u) { mq_finish(acc.a4, 4u, r0, w); }
    if (MR > 5u && p.m > 5u) { mq_finish(acc.a5, 5u, r0, w); }
    if (MR > 6u && p.m > 6u) { mq_finish(acc.a6, 6u, r0, w); }
    if (MR > 7u && p.m > 7u) { mq_finish(acc.a7, 7u, r0, w); }
    if (MR > 8u && p.m > 8u) { mq_finish(acc.a8, 8u, r0, w); }
    if (MR > 9u && p.m > 9u) { mq_finish(acc.a9, 9u, r0, w); }
    if (MR > 10u && p.m > 10u) { mq_finish(acc.a10, 10u, r0, w); }
    if (MR > 11u && p.m > 11u) { mq_finish(acc.a11, 11u, r0, w); }
    if (MR > 12u && p.m > 12u) { mq_finish(acc.a12, 12u, r0, w); }
    if (MR > 13u && p.m > 13u) { mq_finish(acc.a13, 13u, r0, w); }
    if (MR > 14u && p.m > 14u) { mq_finish(acc.a14, 14u, r0, w); }
    if (MR > 15u && p.m > 15u) { mq_finish(acc.a15, 15u, r0, w); }
}
