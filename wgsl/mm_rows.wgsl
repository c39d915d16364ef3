// The row-block driver of the family's team kernels (appended after the kernel file): the GEMVs
// (accumulator hooks: mm_gemv_acc.wgsl) and the int8 multi-row GEMM (mm_gemm_q8.wgsl). The
// kernel supplies the hooks
//   MmRow, fn mm_item_load(base: u32, item: u32) -> MmRow (one row's weights at an item, loads
//     only; the driver's MmSlab holds those of the ROWS rows), MmX and
//     fn mm_item_dot(row: MmRow, x: MmX) -> f32 (one row's partial dot with activations x),
//   struct MmAcc, fn mm_acc_zero() -> MmAcc, fn mm_acc_add(acc: ptr<function, MmAcc>, sl: MmSlab,
//     item: u32) (the arithmetic of one item),
//   fn mm_finish(acc: MmAcc, r0: u32, write: bool) (reduce over the team with team_sum, in
//     workgroup-uniform control flow, then store rows r0 .. r0 + ROWS - 1 where `write`).
// A team computes ROWS rows at a time; its lanes stride over the row's p.items items, UNROLL
// per iteration with all loads of the iteration issued before any arithmetic; rows past n are
// clamped to row n - 1 for loading and never written.
// Uniformity (WGSL's analysis, as browsers enforce it): the loop over row blocks is bounded by
// p.n and steps by `teams`, the dispatch's team count, both workgroup-uniform, so every team of
// a workgroup runs the same number of blocks and reaches every team_sum; a team past the last
// block (`rb >= blocks`) computes nothing and writes nothing. Only the item loops, which hold no
// barrier, depend on the lane.

override ROWS: u32 = 2u;    // rows per team, 1..4
override UNROLL: u32 = 2u;  // items per lane per iteration: 1, 2 or 4

struct MmSlab {
    r0: MmRow,
    r1: MmRow,
    r2: MmRow,
    r3: MmRow,
}

fn mm_slab_load(rows: vec4<u32>, i: u32) -> MmSlab {
    var sl: MmSlab;
    sl.r0 = mm_item_load(rows.x * p.row_vec4s, i);
    if (ROWS > 1u) {
        sl.r1 = mm_item_load(rows.y * p.row_vec4s, i);
    }
    if (ROWS > 2u) {
        sl.r2 = mm_item_load(rows.z * p.row_vec4s, i);
    }
    if (ROWS > 3u) {
        sl.r3 = mm_item_load(rows.w * p.row_vec4s, i);
    }
    return sl;
}

// The partial dots of the slab's ROWS rows with the activations xs (component r = row r).
fn mm_slab_dot(sl: MmSlab, xs: MmX) -> vec4<f32> {
    var d = vec4<f32>(0.0);
    d.x = mm_item_dot(sl.r0, xs);
    if (ROWS > 1u) {
        d.y = mm_item_dot(sl.r1, xs);
    }
    if (ROWS > 2u) {
        d.z = mm_item_dot(sl.r2, xs);
    }
    if (ROWS > 3u) {
        d.w = mm_item_dot(sl.r3, xs);
    }
    return d;
}

fn team_main(t: Team, teams: u32) {
    let items = p.items;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let step = t.lanes * UNROLL;
    for (var base = 0u; base < blocks; base += teams) {
        let rb = base + t.id;
        let live = rb < blocks;
        let rows = min(vec4<u32>(rb * ROWS) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n - 1u));
        var acc = mm_acc_zero();
        var i0 = 0u;
        if (live) {
            for (; i0 + step <= items; i0 += step) {
                let i = i0 + t.lane;
                let sa = mm_slab_load(rows, i);
                var sb: MmSlab;
                var sc: MmSlab;
                var sd: MmSlab;
                if (UNROLL > 1u) {
                    sb = mm_slab_load(rows, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    sc = mm_slab_load(rows, i + 2u * t.lanes);
                    sd = mm_slab_load(rows, i + 3u * t.lanes);
                }
                mm_acc_add(&acc, sa, i);
                if (UNROLL > 1u) {
                    mm_acc_add(&acc, sb, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    mm_acc_add(&acc, sc, i + 2u * t.lanes);
                    mm_acc_add(&acc, sd, i + 3u * t.lanes);
                }
            }
            for (var i = i0 + t.lane; i < items; i += t.lanes) {
                mm_acc_add(&acc, mm_slab_load(rows, i), i);
            }
        }
        mm_finish(acc, rb * ROWS, live && t.lane == 0u);
    }
}
