// Decode attention, Portable variant: entry point and the workgroup reductions (a tree in
// workgroup memory).

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    decode_main(wid.x + wid.y * nwg.x, li);
}

// Max (op 0) or sum (op 1) of red[g * WG + 0..WG] for every g < GB; result in red[g * WG].
// Each invocation has written its own red[g * WG + li].
fn reduce(li: u32, op: u32) {
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            for (var g = 0u; g < GB; g++) {
                let a = red[g * WG + li];
                let b = red[g * WG + li + s];
                red[g * WG + li] = select(a + b, max(a, b), op == 0u);
            }
        }
    }
    workgroupBarrier();
}
