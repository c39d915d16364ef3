// Two groups of rows of one length n normalised by one dispatch, each with its own weight and
// output (the per-head q and k norms of an attention block): rows 0..rows_q are
// yq[r, i] = xq[r, i] / sqrt(mean_i(xq[r, i]^2) + eps) * wq[i], rows rows_q..rows the same over
// xk, wk, yk (row r - rows_q of those). f32, any n, the arithmetic of elementwise_rmsnorm.wgsl.
// One workgroup per row (grid-stride over rows); the sum of squares is reduced with wg_sum from
// elementwise_reduce_portable.wgsl or elementwise_reduce_subgroup.wgsl, which also define the
// entry point and call row_main in workgroup-uniform control flow (which group a row belongs to
// is uniform too).

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    rows_q: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xq: array<f32>;
@group(0) @binding(2) var<storage, read> wq: array<f32>;
@group(0) @binding(3) var<storage, read_write> yq: array<f32>;
@group(0) @binding(4) var<storage, read> xk: array<f32>;
@group(0) @binding(5) var<storage, read> wk: array<f32>;
@group(0) @binding(6) var<storage, read_write> yk: array<f32>;

fn load_x(q: bool, i: u32) -> f32 {
    if (q) {
        return xq[i];
    }
    return xk[i];
}

fn load_w(q: bool, i: u32) -> f32 {
    if (q) {
        return wq[i];
    }
    return wk[i];
}

fn row_main(row: u32, lane: u32) {
    let q = row < p.rows_q;
    let base = select(row - p.rows_q, row, q) * p.n;
    var ss = 0.0;
    for (var i = lane; i < p.n; i += WG) {
        let v = load_x(q, base + i);
        ss = fma(v, v, ss);
    }
    let total = wg_sum(ss);
    let inv = inverseSqrt(total / f32(p.n) + p.eps);
    for (var i = lane; i < p.n; i += WG) {
        let v = load_x(q, base + i) * inv * load_w(q, i);
        if (q) {
            yq[base + i] = v;
        } else {
            yk[base + i] = v;
        }
    }
}
