// Decode attention, Subgroup variant: entry point and the workgroup reductions, done with
// subgroupMax / subgroupAdd inside each subgroup and one pass over the per-subgroup results
// (3 barriers instead of log2(WG) + 1). Nothing assumes a subgroup size; partial subgroups work.

var<private> sg_lane: u32;
var<private> sg_id: u32;
var<private> sg_n: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32) {
    sg_lane = subgroupExclusiveAdd(1u);
    sg_id = sid;
    sg_n = nsg;
    decode_main(wid.x + wid.y * nwg.x, li);
}

// Max (op 0) or sum (op 1) of red[g * WG + 0..WG] for every g < GB; result in red[g * WG].
// Each invocation has written its own red[g * WG + li].
fn reduce(li: u32, op: u32) {
    var part: array<f32, 8>;
    for (var g = 0u; g < GB; g++) {
        let v = red[g * WG + li];
        if (op == 0u) {
            part[g] = subgroupMax(v);
        } else {
            part[g] = subgroupAdd(v);
        }
    }
    workgroupBarrier();
    if (sg_lane == 0u) {
        for (var g = 0u; g < GB; g++) {
            red[g * WG + sg_id] = part[g];
        }
    }
    workgroupBarrier();
    if (li == 0u) {
        for (var g = 0u; g < GB; g++) {
            var r = red[g * WG];
            for (var k = 1u; k < sg_n; k++) {
                let b = red[g * WG + k];
                r = select(r + b, max(r, b), op == 0u);
            }
            red[g * WG] = r;
        }
    }
    workgroupBarrier();
}
