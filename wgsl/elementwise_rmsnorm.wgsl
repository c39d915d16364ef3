// RMSNorm per row: y[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i], f32, any row
// length; with ADD the normalised row is added to y instead (y += ..., a post-norm's residual
// add). One workgroup per row (grid-stride over rows): the row loop of
// elementwise_rmsnorm_row.wgsl over these bindings.

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

override ADD: bool = false;

fn norm_x(row: u32, i: u32) -> f32 {
    return x[row * p.n + i];
}

fn norm_w(row: u32, i: u32) -> f32 {
    return w[i];
}

fn norm_put(row: u32, i: u32, v: f32) {
    let o = row * p.n + i;
    if (ADD) {
        y[o] += v;
    } else {
        y[o] = v;
    }
}
