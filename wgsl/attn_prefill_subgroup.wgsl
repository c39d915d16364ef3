// Prefill attention, Subgroup variant: entry point and the online-softmax step with each row of
// the score tile spread over a few lanes of a subgroup (max and sum by subgroupShuffleXor), rows
// dealt out to all subgroups. Nothing assumes a subgroup size (groups of min(4, size) lanes per row;
// the workgroup size is a multiple of every power-of-two subgroup size up to 128, so no subgroup
// is partial).

var<private> sg_lane: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) size: u32) {
    sg_lane = lane;
    prefill_main(wid.x + wid.y * nwg.x, li, vec3<u32>(size, sid, nsg));
}

// Rows of ps (scores, NEG where masked) -> probabilities exp2(s - m); updates m_s, l_s and the
// rescale factor a_s of each row. A row is shared by a group of g = min(4, subgroup size)
// consecutive lanes (each takes every g-th key) and reduced with subgroupShuffleXor over the
// group, so each subgroup handles subgroup size / g rows at a time and every subgroup works.
// All lanes of a group read m_s[r] before the shuffles that its first lane's write waits for.
// The shuffles' control flow depends only on sg = (size, subgroup id, subgroups), the same across
// the subgroup; the lane only selects data.
fn softmax_tile(li: u32, sg: vec3<u32>) {
    let g = min(4u, sg.x);
    let slots = sg.x / g;
    let slot = sg_lane / g;
    let q = sg_lane - slot * g;
    for (var r0 = sg.y * slots; r0 < BQ; r0 += sg.z * slots) {
        let r = r0 + slot;
        let ok = r < BQ;
        var m_old = NEG;
        if (ok) {
            m_old = m_s[r];
        }
        var mx = m_old;
        if (ok) {
            for (var j = q; j < BK; j += g) {
                mx = max(mx, ps[r * BKP + j]);
            }
        }
        if (g > 1u) {
            mx = max(mx, subgroupShuffleXor(mx, 1u));
        }
        if (g > 2u) {
            mx = max(mx, subgroupShuffleXor(mx, 2u));
        }
        var sum = 0.0;
        if (ok) {
            for (var j = q; j < BK; j += g) {
                let s = ps[r * BKP + j];
                var pj = 0.0;
                if (s > NEG) {
                    pj = exp2(s - mx);
                }
                ps[r * BKP + j] = pj;
                sum += pj;
            }
        }
        if (g > 1u) {
            sum += subgroupShuffleXor(sum, 1u);
        }
        if (g > 2u) {
            sum += subgroupShuffleXor(sum, 2u);
        }
        if (ok && q == 0u) {
            let alpha = exp2(m_old - mx);
            a_s[r] = alpha;
            m_s[r] = mx;
            l_s[r] = l_s[r] * alpha + sum;
        }
    }
}
