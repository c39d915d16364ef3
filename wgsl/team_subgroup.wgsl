// Team = one workgroup, reduced with subgroup operations (Subgroup variant): each subgroup sums
// with subgroupAdd, then one partial per subgroup goes through workgroup memory. Nothing assumes
// a subgroup size or a mapping of invocations onto subgroups: the writer of each subgroup's
// partial is its first active invocation (a subgroup scan), so any size 1..128 and partially
// filled subgroups work. Kernels built on a team define `fn team_main(t: Team)`; team_reduce
// must be called in workgroup-uniform control flow.

override WG: u32 = 128u;

struct Team {
    lane: u32,   // local invocation index
    lanes: u32,  // invocations in the team (WG)
    id: u32,     // team (workgroup) index over the dispatch
    count: u32,  // teams in the dispatch
}

const TEAM_MAX_SUBGROUPS: u32 = 128u;
var<workgroup> team_scratch: array<f32, 1152>;  // 9 rows x TEAM_MAX_SUBGROUPS
var<private> team_sid: u32;
var<private> team_nsg: u32;
var<private> team_first: bool;
var<private> team_lane: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sid: u32, @builtin(num_subgroups) nsg: u32) {
    team_sid = sid;
    team_nsg = nsg;
    team_first = subgroupExclusiveAdd(1u) == 0u;
    team_lane = li;
    team_main(Team(li, WG, wid.x + wid.y * nwg.x, nwg.x * nwg.y));
}

// Sum acc[r] (r < rows <= 9) over the team; the sums are left in invocation 0's acc.
fn team_reduce(acc: ptr<function, array<f32, 9>>, rows: u32) {
    for (var r = 0u; r < rows; r++) {
        let v = subgroupAdd((*acc)[r]);
        if (team_first) {
            team_scratch[r * TEAM_MAX_SUBGROUPS + team_sid] = v;
        }
    }
    workgroupBarrier();
    if (team_lane == 0u) {
        for (var r = 0u; r < rows; r++) {
            var s = 0.0;
            for (var q = 0u; q < team_nsg; q++) {
                s += team_scratch[r * TEAM_MAX_SUBGROUPS + q];
            }
            (*acc)[r] = s;
        }
    }
    workgroupBarrier();
}
