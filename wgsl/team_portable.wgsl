// Team = one workgroup (Portable variant): reductions through workgroup memory, no subgroups.
// WG must be a power of two <= 256. Kernels built on a team define `fn team_main(t: Team)` and
// must call team_sum in workgroup-uniform control flow.

override WG: u32 = 64u;

struct Team {
    lane: u32,
    lanes: u32,
    id: u32,
    count: u32,
}

var<workgroup> team_scratch: array<f32, 256>;
var<private> team_lane: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    team_lane = li;
    team_main(Team(li, WG, wid.x + wid.y * nwg.x, nwg.x * nwg.y));
}

fn team_sum(v: f32) -> f32 {
    team_scratch[team_lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (team_lane < s) {
            team_scratch[team_lane] += team_scratch[team_lane + s];
        }
        workgroupBarrier();
    }
    let r = team_scratch[0];
    workgroupBarrier();
    return r;
}
