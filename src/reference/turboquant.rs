//! TurboQuant reference (f64): the executable spec of the quantiser, the dequantiser and decode
//! attention. See [`crate::kernels::turboquant`] for the definitions; constants come from
//! [`crate::kernels::turboquant::codebook`].

use crate::kernels::turboquant::codebook::{centroid, code_of, negated, sign_words};
use crate::kernels::turboquant::{HostTqCache, TqConfig};

/// In-place unnormalised Walsh-Hadamard transform (length a power of two).
pub fn fwht(v: &mut [f64]) {
    let n = v.len();
    let mut h = 1;
    while h < n {
        for i in (0..n).step_by(2 * h) {
            for j in i..i + h {
                let (a, b) = (v[j], v[j + h]);
                v[j] = a + b;
                v[j + h] = a - b;
            }
        }
        h *= 2;
    }
}

/// `y = H D x / sqrt(d)` (D from the sign mask).
pub fn rotate(x: &[f64], signs: &[u32]) -> Vec<f64> {
    let mut y: Vec<f64> = x.iter().enumerate().map(|(i, &v)| if negated(signs, i) { -v } else { v }).collect();
    fwht(&mut y);
    let s = 1.0 / (x.len() as f64).sqrt();
    y.iter_mut().for_each(|v| *v *= s);
    y
}

/// The inverse of [`rotate`]: `x = D H y / sqrt(d)`.
pub fn unrotate(y: &[f64], signs: &[u32]) -> Vec<f64> {
    let mut x = y.to_vec();
    fwht(&mut x);
    let s = 1.0 / (y.len() as f64).sqrt();
    x.iter_mut().enumerate().for_each(|(i, v)| *v *= if negated(signs, i) { -s } else { s });
    x
}

/// One quantised vector and the scaled coordinates its codes came from.
#[derive(Clone, Debug)]
pub struct QuantVec {
    pub codes: Vec<u8>,
    pub norm: f64,
    /// `u = y / norm * sqrt(d)` (all 0 for a zero vector).
    pub u: Vec<f64>,
}

/// Quantise one vector: norm = |x|, u = H D x / |x|, code = nearest centroid of each u_i.
pub fn quantize_vec(x: &[f32], signs: &[u32]) -> QuantVec {
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let norm = xd.iter().map(|v| v * v).sum::<f64>().sqrt();
    let y = rotate(&xd, signs);
    let f = if norm > 0.0 { (x.len() as f64).sqrt() / norm } else { 0.0 };
    let u: Vec<f64> = y.iter().map(|v| v * f).collect();
    QuantVec { codes: u.iter().map(|&v| code_of(v)).collect(), norm, u }
}

/// Dequantise one vector: `x = D H (c * norm / sqrt(d)) / sqrt(d)`.
pub fn dequantize_vec(codes: &[u8], norm: f64, signs: &[u32]) -> Vec<f64> {
    let s = norm / (codes.len() as f64).sqrt();
    let y: Vec<f64> = codes.iter().map(|&c| centroid(c) as f64 * s).collect();
    unrotate(&y, signs)
}

/// An empty (all-zero) host cache.
pub fn empty_cache(config: TqConfig) -> HostTqCache {
    let n = config.kv_heads * config.capacity;
    HostTqCache { config, codes: vec![0; n * config.head_dim / 2], norms: vec![0.0; n] }
}

/// Quantise `tokens` tokens of `src` (`[tokens, kv_heads, d]`) into `cache` at positions
/// `pos0..`, as the kernel does (a window cache keeps only the last `capacity` tokens; the
/// caller validates positions). Returns (vector index, quantised vector) of every write.
pub fn quantize_into(cache: &mut HostTqCache, src: &[f32], tokens: usize, pos0: usize) -> Vec<(usize, QuantVec)> {
    let c = cache.config;
    let d = c.head_dim;
    let signs = sign_words(c.sign_seed, d);
    let mut written = Vec::new();
    for t in tokens.saturating_sub(c.capacity)..tokens {
        let slot = (pos0 + t) % c.capacity;
        for h in 0..c.kv_heads {
            let off = (t * c.kv_heads + h) * d;
            let q = quantize_vec(&src[off..off + d], &signs);
            let v = h * c.capacity + slot;
            for (i, pair) in q.codes.chunks(2).enumerate() {
                cache.codes[v * d / 2 + i] = pair[0] | pair[1] << 4;
            }
            cache.norms[v] = q.norm as f32;
            written.push((v, q));
        }
    }
    written
}

/// The dequantised vector at (head, slot) of a host cache.
pub fn dequantize_slot(cache: &HostTqCache, head: usize, slot: usize) -> Vec<f64> {
    let d = cache.config.head_dim;
    let codes: Vec<u8> = (0..d).map(|i| cache.code(head, slot, i)).collect();
    dequantize_vec(&codes, cache.norm(head, slot) as f64, &sign_words(cache.config.sign_seed, d))
}

/// Decode attention of one query token in f64. `q`: `[heads, d]`; `kv(j, kv_head)` returns the
/// (key, value) of the j-th visible position. Returns the output `[heads, d]`, its error scale
/// per element `sum_j p_j rms(v_j)` (rms = |v| / sqrt(d): a computation in a rotated domain
/// spreads rounding over all coordinates, so a coordinate where the values happen to be small
/// gets no smaller error), and the largest score magnitude `|scale| sum_i |q_i k_ji|` (the
/// rounding of a score is proportional to it and moves the output by about that much times the
/// error scale).
pub fn decode_attention(
    q: &[f32],
    heads: usize,
    kv_heads: usize,
    d: usize,
    scale: f64,
    count: usize,
    kv: impl Fn(usize, usize) -> (Vec<f64>, Vec<f64>),
) -> (Vec<f64>, Vec<f64>, f64) {
    let group = heads / kv_heads;
    let mut out = vec![0f64; heads * d];
    let mut mag = vec![0f64; heads * d];
    let mut smag = 0f64;
    for kvh in 0..kv_heads {
        let cache: Vec<(Vec<f64>, Vec<f64>)> = (0..count).map(|j| kv(j, kvh)).collect();
        for h in kvh * group..(kvh + 1) * group {
            let qh = &q[h * d..(h + 1) * d];
            let s: Vec<f64> = cache.iter().map(|(k, _)| scale * k.iter().zip(qh).map(|(a, &b)| a * b as f64).sum::<f64>()).collect();
            for (k, _) in &cache {
                smag = smag.max(scale.abs() * k.iter().zip(qh).map(|(a, &b)| (a * b as f64).abs()).sum::<f64>());
            }
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let l: f64 = e.iter().sum();
            for (j, (_, v)) in cache.iter().enumerate() {
                let pj = e[j] / l;
                let rms = (v.iter().map(|x| x * x).sum::<f64>() / d as f64).sqrt();
                for i in 0..d {
                    out[h * d + i] += pj * v[i];
                    mag[h * d + i] += pj * rms;
                }
            }
        }
    }
    (out, mag, smag)
}

#[cfg(feature = "testkit")]
/// Mean over vectors of `|x - x_hat|^2 / |x|^2` (the unit-normalised round-trip MSE).
pub fn round_trip_mse(vectors: &[Vec<f32>], signs: &[u32]) -> f64 {
    let mut total = 0.0;
    for x in vectors {
        let q = quantize_vec(x, signs);
        let xh = dequantize_vec(&q.codes, q.norm, signs);
        let n2: f64 = x.iter().map(|&v| (v as f64).powi(2)).sum();
        total += x.iter().zip(&xh).map(|(&a, b)| (a as f64 - b).powi(2)).sum::<f64>() / n2;
    }
    total / vectors.len() as f64
}
