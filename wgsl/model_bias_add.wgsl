// bias_add: y[r * n + c] += bias[c] for every row r (p.a = rows * n elements, p.b = n).

struct Params {
    a: u32,
    b: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + li;
    if (i < p.a) {
        y[i] = y[i] + bias[i % p.b];
    }
}
