// Prefill attention, Subgroup variant: entry point and the online-softmax step with each row of
// the score tile spread over the lanes of one subgroup (subgroupMax / subgroupAdd), rows dealt
// out to the subgroups in turn. Nothing assumes a subgroup size; partial subgroups work.

var<private> sg_lane: u32;
var<private> sg_size: u32;
var<private> sg_id: u32;
var<private> sg_n: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32) {
    sg_lane = subgroupExclusiveAdd(1u);
    sg_size = subgroupAdd(1u);
    sg_id = sid;
    sg_n = nsg;
    prefill_main(wid.x + wid.y * nwg.x, li);
}

// Rows of ps (scores, NEG where masked) -> probabilities exp2(s - m); updates m_s, l_s and the
// rescale factor a_s of each row. All lanes of a subgroup read m_s[r] before the subgroupMax
// that lane 0's write of it waits for.
fn softmax_tile(li: u32) {
    for (var r = sg_id; r < BQ; r += sg_n) {
        let m_old = m_s[r];
        var mx = m_old;
        for (var j = sg_lane; j < BK; j += sg_size) {
            mx = max(mx, ps[r * BKP + j]);
        }
        mx = subgroupMax(mx);
        var sum = 0.0;
        for (var j = sg_lane; j < BK; j += sg_size) {
            let s = ps[r * BKP + j];
            var pj = 0.0;
            if (s > NEG) {
                pj = exp2(s - mx);
            }
            ps[r * BKP + j] = pj;
            sum += pj;
        }
        sum = subgroupAdd(sum);
        if (sg_lane == 0u) {
            let alpha = exp2(m_old - mx);
            a_s[r] = alpha;
            m_s[r] = mx;
            l_s[r] = l_s[r] * alpha + sum;
        }
    }
}
