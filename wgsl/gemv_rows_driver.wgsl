// Row-block driver of the team GEMVs whose items need no per-item special case: q4k_gemv.wgsl,
// int4_gemv_q8.wgsl and q4k_gemv_q8.wgsl (appended after the kernel file; int4_gemv and
// int8_gemv keep their own loops for their partial-word path and zero sums). The kernel file
// provides `Slab`, `row_items()` (items per row: vec4s of codes or Q4_K quads),
// `slab_load(rows, i)` and `slab_math(slab, i)` (the partial dots of the ROWS rows over item i,
// component r = row r), and the overrides ROWS and UNROLL.
// A team computes ROWS rows at a time; its lanes stride over the items, UNROLL per iteration with
// all loads of the iteration issued before any arithmetic; rows past n are clamped to row n - 1
// for loading and never written; one team_sum per row block. Every team runs the same number of
// row blocks (team_sum may hold a barrier); a team past the last block skips the work.

fn team_main(t: Team) {
    let items = row_items();
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let step = t.lanes * UNROLL;
    for (var base = 0u; base < blocks; base += t.count) {
        let rb = base + t.id;
        let live = rb < blocks;
        let rows = min(vec4<u32>(rb * ROWS) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n - 1u));
        var acc = vec4<f32>(0.0);
        var i0 = 0u;
        if (live) {
            for (; i0 + step <= items; i0 += step) {
                let i = i0 + t.lane;
                let sa = slab_load(rows, i);
                var sb: Slab;
                var sc: Slab;
                var sd: Slab;
                if (UNROLL > 1u) {
                    sb = slab_load(rows, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    sc = slab_load(rows, i + 2u * t.lanes);
                    sd = slab_load(rows, i + 3u * t.lanes);
                }
                acc += slab_math(sa, i);
                if (UNROLL > 1u) {
                    acc += slab_math(sb, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    acc += slab_math(sc, i + 2u * t.lanes);
                    acc += slab_math(sd, i + 3u * t.lanes);
                }
            }
            for (var i = i0 + t.lane; i < items; i += t.lanes) {
                acc += slab_math(slab_load(rows, i), i);
            }
        }
        let tot = team_sum(acc);
        if (live && t.lane == 0u) {
            let r0 = rb * ROWS;
            y[r0] = tot.x;
            if (ROWS > 1u && r0 + 1u < p.n) {
                y[r0 + 1u] = tot.y;
            }
            if (ROWS > 2u && r0 + 2u < p.n) {
                y[r0 + 2u] = tot.z;
            }
            if (ROWS > 3u && r0 + 3u < p.n) {
                y[r0 + 3u] = tot.w;
            }
        }
    }
}
