// Weight-matrix GEMV (m = 1) on int8 activations (q8_quantize.wgsl's x4 records: per 8-column
// word vec4(i8x4 of cols 0,2,4,6, i8x4 of cols 1,3,5,7, bits(d), bits(d * sum q))): the format's
// own dot runs on the dequantised activations d * q. Prepended/appended as mm_gemv.wgsl.

@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// d * q of columns 4c4 .. 4c4 + 3; zero past the last vec4.
fn mm_x4(c4: u32) -> vec4<f32> {
    let r = xq[min(c4 / 2u, (p.k4 - 1u) / 2u)];
    let sh = (c4 & 1u) * 16u;
    let e = mm_i8x4(r.x >> sh);  // cols 8w + 4h + 0, 2 in .x, .y
    let o = mm_i8x4(r.y >> sh);  // cols 8w + 4h + 1, 3
    let v = vec4<f32>(e.x, o.x, e.y, o.y) * bitcast<f32>(r.z);
    return select(vec4<f32>(0.0), v, c4 < p.k4);
}
