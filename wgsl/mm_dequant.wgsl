// Weight-matrix dequantise into the row-major f32 [n, k] output, bit-exact with the format's CPU
// dequantiser, for the chunk's rows (output rows y_off ..). Prepended: mm_common.wgsl and the
// format part. k % 4 == 0: one invocation per output vec4, out[(y_off + r) * k4 + c4] =
// fmt_w4(row r, c4). Otherwise (float formats, any k) rows do not start on a vec4: invocation i
// takes output vec4 y_off * k / 4 + i and writes those of its four values that belong to the
// chunk, one by one (the vec4s a chunk shares with its neighbours are written by both chunks'
// dispatches, each its own values).

@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (p.k % 4u == 0u) {
        if (i >= p.n * p.k4) {
            return;
        }
        let r = i / p.k4;
        let c4 = i - r * p.k4;
        out[p.y_off * p.k4 + i] = fmt_w4(r * p.row_vec4s, c4);
        return;
    }
    let e0 = p.y_off * p.k;
    let e1 = e0 + p.n * p.k;
    let g = e0 / 4u + i;
    if (4u * g >= e1) {
        return;
    }
    for (var c = 0u; c < 4u; c++) {
        let e = 4u * g + c;
        if (e >= e0 && e < e1) {
            let r = e / p.k - p.y_off;
            let col = e % p.k;
            out[g][c] = fmt_w4(r * p.row_vec4s, col / 4u)[col % 4u];
        }
    }
}
