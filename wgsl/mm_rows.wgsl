// Row-block driver of the weight-matrix GEMVs (appended after mm_gemv*.wgsl and the format part;
// the kernel file supplies MmRow and mm_item_load(base, item), a row's weights at an item,
// mm_item_x(item), the activations of an item, and mm_item_dot(row, x), one row's partial dot
// over it).
// A team computes ROWS rows at a time; its lanes stride over the row's items, UNROLL per
// iteration with all loads of the iteration issued before any arithmetic, the activations of an
// item loaded once for the ROWS rows; rows past n are clamped to row n - 1 for loading and never
// written; one team_sum per row block. Every team runs the same number of row blocks (team_sum
// may hold a barrier); a team past the last block skips the work.

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

fn mm_slab_math(sl: MmSlab, i: u32) -> vec4<f32> {
    let xs = mm_item_x(i);
    var a = vec4<f32>(0.0);
    a.x = mm_item_dot(sl.r0, xs);
    if (ROWS > 1u) {
        a.y = mm_item_dot(sl.r1, xs);
    }
    if (ROWS > 2u) {
        a.z = mm_item_dot(sl.r2, xs);
    }
    if (ROWS > 3u) {
        a.w = mm_item_dot(sl.r3, xs);
    }
    return a;
}

fn team_main(t: Team) {
    let items = p.items;
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
                acc += mm_slab_math(sa, i);
                if (UNROLL > 1u) {
                    acc += mm_slab_math(sb, i + t.lanes);
                }
                if (UNROLL > 2u) {
                    acc += mm_slab_math(sc, i + 2u * t.lanes);
                    acc += mm_slab_math(sd, i + 3u * t.lanes);
                }
            }
            for (var i = i0 + t.lane; i < items; i += t.lanes) {
                acc += mm_slab_math(mm_slab_load(rows, i), i);
            }
        }
        let tot = team_sum(acc);
        if (live && t.lane == 0u) {
            mm_store(rb * ROWS, tot);
        }
    }
}

// The epilogue: EPI 0 stores y[y_off + r] = dot; EPI 1 accumulates y[y_off + r] += dot (a
// residual add); EPI 2 reads rows in (gate, up) pairs (row 2i = gate i, row 2i + 1 = up i; ROWS
// even, y_off even) and stores y[(y_off + 2i) / 2] = silu(gate) * up with silu(g) = g / (1 + exp(-g)).
override EPI: u32 = 0u;

fn mm_put(o: u32, v: f32) {
    if (EPI == 1u) {
        y[o] += v;
    } else {
        y[o] = v;
    }
}

fn mm_swiglu(g: f32, u: f32) -> f32 {
    return g / (1.0 + exp(-g)) * u;
}

fn mm_store(r0: u32, tot: vec4<f32>) {
    let o = p.y_off + r0;
    if (EPI == 2u) {
        y[o / 2u] = mm_swiglu(tot.x, tot.y);
        if (ROWS > 3u && r0 + 2u < p.n) {
            y[o / 2u + 1u] = mm_swiglu(tot.z, tot.w);
        }
        return;
    }
    mm_put(o, tot.x);
    if (ROWS > 1u && r0 + 1u < p.n) {
        mm_put(o + 1u, tot.y);
    }
    if (ROWS > 2u && r0 + 2u < p.n) {
        mm_put(o + 2u, tot.z);
    }
    if (ROWS > 3u && r0 + 3u < p.n) {
        mm_put(o + 3u, tot.w);
    }
}
