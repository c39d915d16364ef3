// First pass of the two-pass Matrix GEMM (src/kernels/matmul/wide.rs), activations: x [m, k]
// (k % 4 == 0) rounded to f16 into rows of `kp4` vec4s, `rows` rows; columns past k and rows past
// m are written as zeros. One invocation per output vec4.

enable f16;

struct WidenX {
    m: u32,
    k4: u32,
    rows: u32,
    kp4: u32,
}

@group(0) @binding(0) var<uniform> p: WidenX;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f16>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.kp4) {
        return;
    }
    let r = i / p.kp4;
    let c = i - r * p.kp4;
    var v = vec4<f32>(0.0);
    if (r < p.m && c < p.k4) {
        v = x[r * p.k4 + c];
    }
    out[i] = vec4<f16>(v);
}
