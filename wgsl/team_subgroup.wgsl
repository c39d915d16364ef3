// Team (Subgroup variant): with TEAM_SG = 1 a team is one subgroup: no workgroup barrier, and
// team_sum is one subgroupAdd. With TEAM_SG = 0 a team is the whole workgroup: subgroupAdd, then one
// partial per subgroup through workgroup memory. Nothing assumes a subgroup size or a mapping of
// invocations onto subgroups: a lane's index in its subgroup and the subgroup's width are counted
// with subgroup scans (so partially filled subgroups work), and the writer of each subgroup's partial
// is its first active invocation; any size 1..128 works. Kernels built on a team define
// `fn team_main(t: Team, teams: u32)` (`teams`: the teams of the dispatch, from the
// workgroup-uniform builtins num_workgroups and num_subgroups only, so that WGSL's uniformity
// analysis sees a loop bounded by it as uniform) and must give every team of a workgroup the same
// number of team_sum calls, in workgroup-uniform control flow.

override WG: u32 = 128u;
override TEAM_SG: u32 = 1u;  // 1: team = subgroup, 0: team = workgroup

struct Team {
    lane: u32,   // index of the invocation in its team
    lanes: u32,  // invocations in the team
    id: u32,     // team index over the dispatch
}

var<workgroup> team_scratch: array<vec4<f32>, 128>;  // one partial per subgroup (TEAM_SG = 0)
var<private> team_sid: u32;
var<private> team_nsg: u32;
var<private> team_first: bool;
var<private> team_li: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sid: u32, @builtin(num_subgroups) nsg: u32) {
    let lane = subgroupExclusiveAdd(1u);
    team_sid = sid;
    team_nsg = nsg;
    team_first = lane == 0u;
    team_li = li;
    let wgi = wid.x + wid.y * nwg.x;
    let wgs = nwg.x * nwg.y;
    if (TEAM_SG != 0u) {
        team_main(Team(lane, subgroupAdd(1u), wgi * nsg + sid), wgs * nsg);
    } else {
        team_main(Team(li, WG, wgi), wgs);
    }
}

// Sum v over the team; the sum is valid in lane 0 (TEAM_SG = 1: in every lane).
fn team_sum(v: vec4<f32>) -> vec4<f32> {
    let s = subgroupAdd(v);
    if (TEAM_SG != 0u) {
        return s;
    }
    if (team_first) {
        team_scratch[team_sid] = s;
    }
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    if (team_li == 0u) {
        for (var q = 0u; q < team_nsg; q++) {
            t += team_scratch[q];
        }
    }
    workgroupBarrier();
    return t;
}
