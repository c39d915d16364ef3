// Weight-matrix row gather: out[i * k .. (i + 1) * k] = row idx[i] of the matrix for i < p.m,
// dequantised exactly as mm_dequant.wgsl does (embedding lookups whose token ids live on the
// GPU). Prepended: mm_common.wgsl and the format part. The chunk's dispatch writes only the rows
// that lie in it (rows y_off .. y_off + n); an index past the matrix writes nothing. k % 4 == 0.

@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = gid.x + gid.y * nwg.x * 64u;
    let i = e / p.k4;
    let c4 = e - i * p.k4;
    if (i >= p.m) {
        return;
    }
    let t = idx[i];
    if (t < p.y_off || t - p.y_off >= p.n) {
        return;
    }
    out[e] = fmt_w4((t - p.y_off) * p.row_vec4s, c4);
}
