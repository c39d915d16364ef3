// Team = one subgroup (Subgroup variant). Lane rank and lane count come from subgroup scans, so
// nothing assumes a subgroup size or how invocations map onto subgroups: any size 4..128 works,
// as do partially filled subgroups. Kernels built on a team define `fn team_main(t: Team)`.

override WG: u32 = 128u;

struct Team {
    lane: u32,   // rank of this invocation within its team
    lanes: u32,  // invocations in the team
    id: u32,     // team index over the whole dispatch
    count: u32,  // teams in the dispatch
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_id) sid: u32, @builtin(num_subgroups) nsg: u32) {
    let wg = wid.x + wid.y * nwg.x;
    team_main(Team(subgroupExclusiveAdd(1u), subgroupAdd(1u), wg * nsg + sid, nwg.x * nwg.y * nsg));
}

// Sum of `v` over the team; every lane gets the result.
fn team_sum(v: f32) -> f32 {
    return subgroupAdd(v);
}
