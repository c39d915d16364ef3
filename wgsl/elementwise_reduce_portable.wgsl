// Workgroup sum through workgroup memory (Portable). WG is a power of two <= 256. Defines the
// entry point of a row kernel: one workgroup per row, rows grid-strided, `row_main(row, lane)`.

override WG: u32 = 256u;

var<workgroup> ew_scratch: array<f32, 256>;
var<private> ew_lane: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    ew_lane = li;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += nwg.x * nwg.y) {
        row_main(row, li);
    }
}

// The sum of v over the workgroup, returned to every invocation (workgroup-uniform call).
fn wg_sum(v: f32) -> f32 {
    ew_scratch[ew_lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (ew_lane < s) {
            ew_scratch[ew_lane] += ew_scratch[ew_lane + s];
        }
        workgroupBarrier();
    }
    let total = ew_scratch[0];
    workgroupBarrier();
    return total;
}
