// Prefill attention, Subgroup variant: entry point and the online-softmax step with each row of
// the score tile spread over the lanes of one subgroup (subgroupMax / subgroupAdd), rows dealt
// out to the subgroups in batches. Nothing assumes a subgroup size; partial subgroups work.

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
// rescale factor a_s of each row. Each subgroup takes RB rows at a time (rows sg_id * RB + ..,
// then + sg_n * RB), its lanes split the keys, and the RB reductions of a batch are independent
// so their latencies overlap. All lanes read m_s[r] before the subgroupMax that lane 0's write of
// it waits for.
const RB: u32 = 4u;

fn softmax_tile(li: u32) {
    for (var r0 = sg_id * RB; r0 < BQ; r0 += sg_n * RB) {
        var m_old: array<f32, RB>;
        var mx: array<f32, RB>;
        var sum: array<f32, RB>;
        for (var a = 0u; a < RB; a++) {
            let r = r0 + a;
            m_old[a] = NEG;
            if (r < BQ) {
                m_old[a] = m_s[r];
            }
            mx[a] = m_old[a];
            if (r < BQ) {
                for (var j = sg_lane; j < BK; j += sg_size) {
                    mx[a] = max(mx[a], ps[r * BKP + j]);
                }
            }
        }
        for (var a = 0u; a < RB; a++) {
            mx[a] = subgroupMax(mx[a]);
        }
        for (var a = 0u; a < RB; a++) {
            let r = r0 + a;
            sum[a] = 0.0;
            if (r < BQ) {
                for (var j = sg_lane; j < BK; j += sg_size) {
                    let s = ps[r * BKP + j];
                    var pj = 0.0;
                    if (s > NEG) {
                        pj = exp2(s - mx[a]);
                    }
                    ps[r * BKP + j] = pj;
                    sum[a] += pj;
                }
            }
        }
        for (var a = 0u; a < RB; a++) {
            sum[a] = subgroupAdd(sum[a]);
        }
        if (sg_lane == 0u) {
            for (var a = 0u; a < RB; a++) {
                let r = r0 + a;
                if (r < BQ) {
                    let alpha = exp2(m_old[a] - mx[a]);
                    a_s[r] = alpha;
                    m_s[r] = mx[a];
                    l_s[r] = l_s[r] * alpha + sum[a];
                }
            }
        }
    }
}
