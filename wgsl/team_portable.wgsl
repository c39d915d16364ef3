// Team = one workgroup, reduced through workgroup memory (Portable variant: no subgroups).
// WG must be a power of two <= 256. Kernels built on a team define `fn team_main(t: Team)`;
// team_reduce must be called in workgroup-uniform control flow.

override WG: u32 = 128u;

struct Team {
    lane: u32,
    lanes: u32,
    id: u32,
    count: u32,
}

var<workgroup> team_scratch: array<f32, 2304>;  // 9 rows x 256 invocations
var<private> team_lane: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    team_lane = li;
    team_main(Team(li, WG, wid.x + wid.y * nwg.x, nwg.x * nwg.y));
}

// Sum acc[r] (r < rows <= 9) over the team; the sums are left in invocation 0's acc.
fn team_reduce(acc: ptr<function, array<f32, 9>>, rows: u32) {
    for (var r = 0u; r < rows; r++) {
        team_scratch[r * WG + team_lane] = (*acc)[r];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (team_lane < s) {
            for (var r = 0u; r < rows; r++) {
                team_scratch[r * WG + team_lane] += team_scratch[r * WG + team_lane + s];
            }
        }
        workgroupBarrier();
    }
    if (team_lane == 0u) {
        for (var r = 0u; r < rows; r++) {
            (*acc)[r] = team_scratch[r * WG];
        }
    }
    workgroupBarrier();
}
