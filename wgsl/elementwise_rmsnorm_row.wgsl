// The RMSNorm of one row, shared by elementwise_rmsnorm.wgsl and elementwise_rmsnorm_qk.wgsl:
// v_i = x_i / sqrt(mean_i(x_i^2) + eps) * w_i over the p.n values of row `row`, read through the
// kernel's norm_x(row, i) and norm_w(row, i) and written through its norm_put(row, i, v). The sum
// of squares is reduced with wg_sum (elementwise_reduce_portable.wgsl or
// elementwise_reduce_subgroup.wgsl, whose entry point calls row_main in workgroup-uniform
// control flow).

fn row_main(row: u32, lane: u32) {
    var ss = 0.0;
    for (var i = lane; i < p.n; i += WG) {
        let v = norm_x(row, i);
        ss = fma(v, v, ss);
    }
    let total = wg_sum(ss);
    let inv = inverseSqrt(total / f32(p.n) + p.eps);
    for (var i = lane; i < p.n; i += WG) {
        norm_put(row, i, norm_x(row, i) * inv * norm_w(row, i));
    }
}
