// Two groups of rows of one length n normalised by one dispatch, each with its own weight and
// output (the per-head q and k norms of an attention block): rows 0..rows_q are
// yq[r, i] = xq[r, i] / sqrt(mean_i(xq[r, i]^2) + eps) * wq[i], rows rows_q..rows the same over
// xk, wk, yk (row r - rows_q of those). f32, any n. One workgroup per row (grid-stride over
// rows): the row loop of elementwise_rmsnorm_row.wgsl over these bindings (which group a row
// belongs to is workgroup-uniform).

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

fn norm_x(row: u32, i: u32) -> f32 {
    if (row < p.rows_q) {
        return xq[row * p.n + i];
    }
    return xk[(row - p.rows_q) * p.n + i];
}

fn norm_w(row: u32, i: u32) -> f32 {
    if (row < p.rows_q) {
        return wq[i];
    }
    return wk[i];
}

fn norm_put(row: u32, i: u32, v: f32) {
    if (row < p.rows_q) {
        yq[row * p.n + i] = v;
    } else {
        yk[(row - p.rows_q) * p.n + i] = v;
    }
}
