// copy_row: dst[i] = src[p.a * p.b + i] for i < p.b (one row of a [rows, n] tensor).

struct Params {
    a: u32,
    b: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + li;
    if (i < p.b) {
        dst[i] = src[p.a * p.b + i];
    }
}
