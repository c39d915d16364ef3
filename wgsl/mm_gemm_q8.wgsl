// Weight-matrix GEMM for a few activation rows (MR = m <= 16) on int8 activations in quad order
// (the q8 quantiser's Q4_K-order records of m rows, see MmQx in mm_common.wgsl), for formats whose
// part defines fmt_qload / fmt_qdot: a multi-row GEMV. Each weight item (a quad, 64 columns) is
// loaded once and dotted with the MR activation rows' records of that quad, so the weights are
// read once per dispatch, and y[a * ldy + y_off + r] = the int8 GEMV (mm_gemv_qk.wgsl) of row a.
// Prepended: a team file, mm_common.wgsl; appended: the format part and the row driver
// mm_rows.wgsl, whose accumulator hooks this file defines: MR x ROWS f32 accumulators per lane
// (one vec4 per activation row, component r = weight row r), one team_sum per activation row and
// row block. The accumulators are named variables (see MmAcc below), never a dynamically
// indexed array; the live rows p.m (<= MR) are a uniform runtime value, so one pipeline serves
// every m of its power-of-two bucket.
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

// The accumulators: one vec4 per activation row (component r = weight row r), named variables
// reached through a switch on the row (dynamically indexing an array would leave them in
// memory). The loops over the rows are bounded by MR, a constant once the pipeline is built,
// so a compiler unrolls them and each switch folds away; the dot and the reduction are written
// once, not once per row (a compiler that inlines before removing dead code would otherwise
// compile sixteen copies of the format's dot whatever MR is).
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

fn mq_acc(acc: ptr<function, MmAcc>, a: u32, d: vec4<f32>) {
    switch a {
        case 0u: { (*acc).a0 += d; }
        case 1u: { (*acc).a1 += d; }
        case 2u: { (*acc).a2 += d; }
        case 3u: { (*acc).a3 += d; }
        case 4u: { (*acc).a4 += d; }
        case 5u: { (*acc).a5 += d; }
        case 6u: { (*acc).a6 += d; }
        case 7u: { (*acc).a7 += d; }
        case 8u: { (*acc).a8 += d; }
        case 9u: { (*acc).a9 += d; }
        case 10u: { (*acc).a10 += d; }
        case 11u: { (*acc).a11 += d; }
        case 12u: { (*acc).a12 += d; }
        case 13u: { (*acc).a13 += d; }
        case 14u: { (*acc).a14 += d; }
        default: { (*acc).a15 += d; }
    }
}

fn mq_row(acc: MmAcc, a: u32) -> vec4<f32> {
    switch a {
        case 0u: { return acc.a0; }
        case 1u: { return acc.a1; }
        case 2u: { return acc.a2; }
        case 3u: { return acc.a3; }
        case 4u: { return acc.a4; }
        case 5u: { return acc.a5; }
        case 6u: { return acc.a6; }
        case 7u: { return acc.a7; }
        case 8u: { return acc.a8; }
        case 9u: { return acc.a9; }
        case 10u: { return acc.a10; }
        case 11u: { return acc.a11; }
        case 12u: { return acc.a12; }
        case 13u: { return acc.a13; }
        case 14u: { return acc.a14; }
        default: { return acc.a15; }
    }
}

// The live rows p.m (<= MR): a uniform value, so every lane takes the same branches.
fn mm_acc_add(acc: ptr<function, MmAcc>, sl: MmSlab, qd: u32) {
    for (var a = 0u; a < MR; a++) {
        if (a < p.m) {
            mq_acc(acc, a, mq_dot(sl, a, qd));
        }
    }
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
    for (var a = 0u; a < MR; a++) {
        if (a < p.m) {
            mq_finish(mq_row(acc, a), a, r0, w);
        }
    }
}
