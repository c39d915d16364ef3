// Decode attention, Subgroup variant: entry point and Q K^T for one tile, one subgroup per key
// (lanes read consecutive vec4<u32>s of the K row, subgroupAdd finishes each dot). Lane rank and
// count come from subgroup scans, so any subgroup size works, partial subgroups included.

var<private> sg_lane: u32;
var<private> sg_lanes: u32;
var<private> sg_id: u32;
var<private> sg_n: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32) {
    sg_lane = subgroupExclusiveAdd(1u);
    sg_lanes = subgroupAdd(1u);
    sg_id = sid;
    sg_n = nsg;
    decode_main(wid.x + wid.y * nwg.x, li);
}

fn tile_scores(t0: u32, n: u32, hk: u32, gbn: u32, li: u32) {
    for (var j = sg_id; j < n; j += sg_n) {
        let row = ((t0 + j) * p.kv_heads + hk) * WORDS;
        var acc: array<f32, 8>;
        for (var g = 0u; g < 8u; g++) {
            acc[g] = 0.0;
        }
        if (VEC4) {
            for (var c = sg_lane; c < WORDS / 4u; c += sg_lanes) {
                add_words(&acc, row, c, gbn);
            }
        } else {
            for (var w = sg_lane; w < WORDS; w += sg_lanes) {
                add_word(&acc, row, w, gbn);
            }
        }
        for (var g = 0u; g < GB; g++) {
            let s = subgroupAdd(acc[g]);
            if (sg_lane == 0u) {
                sc[g * TILE + j] = select(0.0, s, g < gbn);
            }
        }
    }
}
