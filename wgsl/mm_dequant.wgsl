// Weight-matrix dequantise: out[(y_off + r) * k4 + c4] = fmt_w4(row r, c4) for the chunk's rows
// (k % 4 == 0, checked on the host), one invocation per output vec4, bit-exact with the format's
// CPU dequantiser. Prepended: mm_common.wgsl and the format part.

@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n * p.k4) {
        return;
    }
    let r = i / p.k4;
    let c4 = i - r * p.k4;
    out[p.y_off * p.k4 + i] = fmt_w4(r * p.row_vec4s, c4);
}
