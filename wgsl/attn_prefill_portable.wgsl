// Prefill attention, Portable variant: entry point and the online-softmax step (one invocation
// per row of the score tile).

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    prefill_main(wid.x + wid.y * nwg.x, li, vec3<u32>(0u));
}

// Rows of ps (scores, NEG where masked) -> probabilities exp2(s - m); updates m_s, l_s and the
// rescale factor a_s of each row (sg: unused, see attn_prefill.wgsl).
fn softmax_tile(li: u32, sg: vec3<u32>) {
    for (var r = li; r < BQ; r += WG) {
        let m_old = m_s[r];
        var mx = m_old;
        for (var j = 0u; j < BK; j++) {
            mx = max(mx, ps[r * BKP + j]);
        }
        var sum = 0.0;
        for (var j = 0u; j < BK; j++) {
            let s = ps[r * BKP + j];
            var pj = 0.0;
            if (s > NEG) {
                pj = exp2(s - mx);
            }
            ps[r * BKP + j] = pj;
            sum += pj;
        }
        let alpha = exp2(m_old - mx);
        a_s[r] = alpha;
        m_s[r] = mx;
        l_s[r] = l_s[r] * alpha + sum;
    }
}
