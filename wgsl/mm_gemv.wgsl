// Weight-matrix GEMV (m = 1), f32 activations: y[y_off + r] = sum_c w[r, c] * x[c] for the
// chunk's rows r < n. Prepended/appended: a team file, mm_common.wgsl, the format part, and the
// item hooks mm_items.wgsl, the accumulator hooks mm_gemv_acc.wgsl and the row driver
// mm_rows.wgsl.

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// x of columns 4c4 .. 4c4 + 3; zero at columns >= k (rows are padded to whole items, and the
// values of x past k, in the last vec4 when k % 4 != 0, may be anything).
fn mm_x4(c4: u32) -> vec4<f32> {
    let live = vec4<u32>(4u * c4) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.k);
    return select(vec4<f32>(0.0), x[min(c4, p.k4 - 1u)], live);
}
