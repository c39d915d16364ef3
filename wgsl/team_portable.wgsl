// Team (Portable variant: no subgroups): a team is TEAM_LANES consecutive invocations of the
// workgroup (TEAM_LANES a power of two dividing WG, WG <= 256), reduced by a tree in workgroup
// memory. Kernels built on a team define `fn team_main(t: Team, teams: u32)` (`teams`: the teams
// of the dispatch, a workgroup-uniform value kept out of `t` so that WGSL's uniformity analysis
// sees it as uniform; a loop bounded by it may call team_sum) and must give every team of a
// workgroup the same number of team_sum calls, in workgroup-uniform control flow.

override WG: u32 = 128u;
override TEAM_LANES: u32 = 32u;

struct Team {
    lane: u32,   // index of the invocation in its team
    lanes: u32,  // invocations in the team (TEAM_LANES)
    id: u32,     // team index over the dispatch
}

var<workgroup> team_scratch: array<vec4<f32>, 256>;
var<private> team_li: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    team_li = li;
    let per = WG / TEAM_LANES;
    team_main(Team(li % TEAM_LANES, TEAM_LANES, (wid.x + wid.y * nwg.x) * per + li / TEAM_LANES), nwg.x * nwg.y * per);
}

// Sum v over the team; the sum is valid in lane 0.
fn team_sum(v: vec4<f32>) -> vec4<f32> {
    team_scratch[team_li] = v;
    workgroupBarrier();
    for (var s = TEAM_LANES / 2u; s > 0u; s = s >> 1u) {
        if (team_li % TEAM_LANES < s) {
            team_scratch[team_li] += team_scratch[team_li + s];
        }
        workgroupBarrier();
    }
    let r = team_scratch[team_li];
    workgroupBarrier();
    return r;
}
