//! Attention in f64 (the spec of wgsl/attn_*.wgsl), on already rotated Q and K.

/// Shapes of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub tokens: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub d: usize,
    pub kv_len: usize,
    pub offset: usize,
    pub causal: bool,
    pub scale: f64,
    /// Sliding window `W`: query `t` sees only keys `j > offset + t - W`.
    pub window: Option<usize>,
    /// Score soft-cap `c`: scores `c * tanh(s / c)` before the softmax.
    pub softcap: Option<f64>,
}

/// `O = softmax(softcap(Q K^T * scale) + causal and window mask) V` per query head, GQA; q
/// `[tokens, heads, d]`, k, v `[kv_len, kv_heads, d]`. Returns O and, per element, the magnitude
/// its f32 error scales with: `sum_j p_j |v_jc| (1 + a_j + max a)`, `a_j = scale * sum_i |q_i k_ji|`
/// (rounding in a score moves every output of its row by at most that much; the soft-cap's slope
/// is at most 1, and its own rounding, a few ulp of `c`, adds `c` to `a_j`).
pub fn attention(x: &Dims, q: &[f64], k: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (d, g) = (x.d, x.heads / x.kv_heads);
    let mut out = vec![0.0; x.tokens * x.heads * d];
    let mut mag = vec![0.0; out.len()];
    for t in 0..x.tokens {
        let end = if x.causal { (x.offset + t + 1).min(x.kv_len) } else { x.kv_len };
        let start = x.window.map_or(0, |w| (x.offset + t + 1).saturating_sub(w)).min(end);
        for h in 0..x.heads {
            let hk = h / g;
            let qr = &q[(t * x.heads + h) * d..][..d];
            let mut s = Vec::with_capacity(end - start);
            let mut a = Vec::with_capacity(end - start);
            for j in start..end {
                let kr = &k[(j * x.kv_heads + hk) * d..][..d];
                let score = x.scale * qr.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>();
                s.push(x.softcap.map_or(score, |c| c * (score / c).tanh()));
                a.push(x.scale * qr.iter().zip(kr).map(|(a, b)| (a * b).abs()).sum::<f64>() + x.softcap.unwrap_or(0.0));
            }
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let amax = a.iter().cloned().fold(0.0, f64::max);
            let p: Vec<f64> = s.iter().map(|&si| (si - m).exp()).collect();
            let l: f64 = p.iter().sum();
            let o = &mut out[(t * x.heads + h) * d..][..d];
            let mg = &mut mag[(t * x.heads + h) * d..][..d];
            for (i, j) in (start..end).enumerate() {
                let vr = &v[(j * x.kv_heads + hk) * d..][..d];
                let pj = p[i] / l;
                for c in 0..d {
                    o[c] += pj * vr[c];
                    mg[c] += pj * vr[c].abs() * (1.0 + a[i] + amax);
                }
            }
        }
    }
    (out, mag)
}
