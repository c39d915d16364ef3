// a = unary(a) in place (see elementwise_ops.wgsl).

@group(0) @binding(1) var<storage, read_write> a: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = elem_index(wid, nwg, li);
    if (i < p.len) {
        a[i] = unary(a[i]);
    }
}
