// Check kernel of the Matrix GEMM's weight runs (tests only; src/kernels/matmul/matrix.rs): every
// row of the chunk through the run wrapper the GEMM composes (mm_run_fmt.wgsl or mm_run_w4.wgsl),
// written where the dequantiser writes it (k % 4 == 0): out[(y_off + r) * k4 + c4]. The tests
// compare it bit for bit with the CPU dequantiser. One invocation per run (32 columns) of a row.
// Prepended: mm_common.wgsl, the format part and the run wrapper.

@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let runs = (p.k4 + 7u) / 8u;
    if (i >= p.n * runs) {
        return;
    }
    let r = i / runs;
    let run = i - r * runs;
    var v = mm_run(mm_run_load(r * p.row_vec4s, run, true));
    for (var t = 0u; t < 8u; t++) {
        let c4 = 8u * run + t;
        if (c4 < p.k4) {
            out[(p.y_off + r) * p.k4 + c4] = v[t];
        }
    }
}
