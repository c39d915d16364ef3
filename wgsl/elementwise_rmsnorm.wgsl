// RMSNorm per row: y[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i], f32, any row
// length; with ADD the normalised row is added to y instead (y += ..., a post-norm's residual add). One workgroup per row (grid-stride over rows); the sum of squares is reduced with
// wg_sum from elementwise_reduce_portable.wgsl or elementwise_reduce_subgroup.wgsl, which
// also define the entry point and call row_main in workgroup-uniform control flow.

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

fn row_main(row: u32, lane: u32) {
    let base = row * p.n;
    var ss = 0.0;
    for (var i = lane; i < p.n; i += WG) {
        let v = x[base + i];
        ss = fma(v, v, ss);
    }
    let total = wg_sum(ss);
    let inv = inverseSqrt(total / f32(p.n) + p.eps);
    for (var i = lane; i < p.n; i += WG) {
        let v = x[base + i] * inv * w[i];
        if (ADD) {
            y[base + i] += v;
        } else {
            y[base + i] = v;
        }
    }
}
