// Weight-matrix row gather: out[0 .. k] = row idx[0] of the matrix, dequantised exactly as
// mm_dequant.wgsl does (an embedding lookup whose token id lives on the GPU). Prepended:
// mm_common.wgsl and the format part. The chunk's dispatch writes only when the row lies in it
// (rows y_off .. y_off + n); an index past the matrix writes nothing. k % 4 == 0.

@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let c4 = gid.x + gid.y * nwg.x * 64u;
    let t = idx[0];
    if (t < p.y_off || t - p.y_off >= p.n || c4 >= p.k4) {
        return;
    }
    out[c4] = fmt_w4((t - p.y_off) * p.row_vec4s, c4);
}
