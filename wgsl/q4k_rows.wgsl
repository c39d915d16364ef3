// Q4_K row loads of the team GEMVs (q4k_gemv.wgsl, q4k_gemv_q8.wgsl; prepended after
// q4k_common.wgsl): a row's block head and its two code vec4s at one quad (quad u of block b =
// qs vec4s u and u + 4), and the slab of ROWS rows (the kernel file declares `heads`, `qs`,
// `p.nb` and ROWS). Loads are unconditional: the driver clamps rows past n to row n - 1.

// One row's block head and its two code vec4s at one quad.
struct RowData {
    hd: vec4<u32>,
    qa: vec4<u32>,
    qb: vec4<u32>,
}

// ROWS rows at one quad (r1..r3 unused when ROWS is smaller).
struct Slab {
    r0: RowData,
    r1: RowData,
    r2: RowData,
    r3: RowData,
}

fn row_load(row: u32, qd: u32) -> RowData {
    let g = row * p.nb + (qd >> 2u);
    return RowData(heads[g], qs[g * 8u + (qd & 3u)], qs[g * 8u + 4u + (qd & 3u)]);
}

fn slab_load(rows: vec4<u32>, qd: u32) -> Slab {
    var sl: Slab;
    sl.r0 = row_load(rows.x, qd);
    if (ROWS > 1u) {
        sl.r1 = row_load(rows.y, qd);
    }
    if (ROWS > 2u) {
        sl.r2 = row_load(rows.z, qd);
    }
    if (ROWS > 3u) {
        sl.r3 = row_load(rows.w, qd);
    }
    return sl;
}
