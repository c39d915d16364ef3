// Workgroup sum with subgroup operations (Subgroup variant): subgroupAdd per subgroup, one
// partial per subgroup through workgroup memory, summed by every invocation. No assumption about
// the subgroup size or the mapping of invocations onto subgroups: each subgroup's partial is
// written by its first active invocation (an exclusive scan of 1). Same entry point contract as
// elementwise_reduce_portable.wgsl.

override WG: u32 = 256u;

const EW_MAX_SUBGROUPS: u32 = 256u;
var<workgroup> ew_scratch: array<f32, 256>;
var<private> ew_sid: u32;
var<private> ew_nsg: u32;
var<private> ew_first: bool;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sid: u32, @builtin(num_subgroups) nsg: u32) {
    ew_sid = sid;
    ew_nsg = nsg;
    ew_first = subgroupExclusiveAdd(1u) == 0u;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += nwg.x * nwg.y) {
        row_main(row, li);
    }
}

// The sum of v over the workgroup, returned to every invocation (workgroup-uniform call).
fn wg_sum(v: f32) -> f32 {
    let s = subgroupAdd(v);
    if (ew_first) {
        ew_scratch[ew_sid] = s;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var q = 0u; q < ew_nsg; q++) {
        total += ew_scratch[q];
    }
    workgroupBarrier();
    return total;
}
