//! Int8 activations ("q8", the llama.cpp q8_1 idea) and the GEMVs that use them: the executable
//! spec of `q8_quantize`, `int4_gemv_q8` and `q4k_gemv_q8` (src/kernels/q8/).
//!
//! Quantise: x (k a multiple of 32) in blocks of 32; per block `d = absmax * fl(1/127)` (one
//! correctly rounded f32 multiply) and `q = clamp(round(x / d), -127, 127)` with ties away from
//! zero, computed exactly (the decision `2|x| >= (2m + 1) d` is exact in f64). A block of zeros
//! has `d = 0` and codes 0.
//!
//! GEMVs (what the GPU computes, up to f32 rounding of the final combination): per 8-column word
//! (INT4) or 32-column sub-block (Q4_K) an exact integer dot of weight codes with `q`, scaled by
//! `d` and the weight scales; offsets and mins through `fl32(d * sum q)` of the same columns.

use crate::formats::q4k::{get_scale_min, BlockQ4K, QK_K};
use crate::kernels::int4::HostInt4;

/// Columns per activation block.
pub use crate::kernels::q8::QB;
/// fl(1/127).
pub const INV127: f32 = 1.0 / 127.0;

/// Quantised activations on the host: `q[c]` and one scale per block of 32.
#[derive(Clone, Debug, PartialEq)]
pub struct HostQ8 {
    pub q: Vec<i8>,
    pub d: Vec<f32>,
}

impl HostQ8 {
    pub fn k(&self) -> usize {
        self.q.len()
    }
    /// The dequantised activation `d_b * q_c` (exact in f64).
    pub fn value(&self, c: usize) -> f64 {
        self.d[c / QB] as f64 * self.q[c] as f64
    }
    /// `fl32(d_b * sum of q over cols)`, the f32 offset/min operand the kernels use.
    pub fn d_sum(&self, b: usize, cols: impl Iterator<Item = usize>) -> f32 {
        let s: i32 = cols.map(|c| self.q[c] as i32).sum();
        self.d[b] * s as f32
    }
}

/// round-half-away(|x| / d), capped at 127, exactly (d > 0, both finite).
pub fn round_mag127(ax: f32, d: f32) -> i32 {
    let (ax, d) = (ax.abs() as f64, d as f64);
    // floor of the f64 quotient may be off by one next to an integer, where the half-integer
    // threshold test below still decides correctly.
    let m = (ax / d).floor().max(0.0);
    let m = m + if 2.0 * ax >= (2.0 * m + 1.0) * d { 1.0 } else { 0.0 };
    m.min(127.0) as i32
}

/// Quantise x (`x.len() % 32 == 0`). A block holding a NaN or an infinity gets the scale NaN
/// and codes 0, so every product it enters is NaN (the crate's policy: non-finite activations
/// propagate; an infinity becomes NaN here, not ±inf).
pub fn quantize(x: &[f32]) -> HostQ8 {
    let mut q = vec![0i8; x.len()];
    let mut d = Vec::with_capacity(x.len() / QB);
    for (b, blk) in x.chunks(QB).enumerate() {
        if blk.iter().any(|v| !v.is_finite()) {
            d.push(f32::NAN);
            continue;
        }
        let amax = blk.iter().fold(0f32, |a, v| a.max(v.abs()));
        let s = amax * INV127;
        d.push(s);
        if s > 0.0 {
            for (i, &v) in blk.iter().enumerate() {
                let m = round_mag127(v, s);
                q[b * QB + i] = if v < 0.0 { -m } else { m } as i8;
            }
        }
    }
    HostQ8 { q, d }
}

fn pack4(v: [i8; 4]) -> u32 {
    u32::from_le_bytes(v.map(|b| b as u8))
}

/// The INT4-order GPU words: per 8-column word w, `[even cols 0,2,4,6 as i8x4, odd cols 1,3,5,7,
/// bits(d_b), bits(fl32(d_b * sum of the 8 q))]`.
pub fn pack_int4(h: &HostQ8) -> Vec<u32> {
    let mut out = Vec::with_capacity(h.k() / 2);
    for w in 0..h.k() / 8 {
        let c = 8 * w;
        out.push(pack4([h.q[c], h.q[c + 2], h.q[c + 4], h.q[c + 6]]));
        out.push(pack4([h.q[c + 1], h.q[c + 3], h.q[c + 5], h.q[c + 7]]));
        out.push(h.d[c / QB].to_bits());
        out.push(h.d_sum(c / QB, c..c + 8).to_bits());
    }
    out
}

/// Columns of sub-block `j` of super-block `blk` that quad lane `u` covers: positions 4u..4u+3
/// (`h = 0`) and 4u+16..4u+19 (`h = 1`).
pub fn q4k_cols(blk: usize, j: usize, u: usize, h: usize) -> std::ops::Range<usize> {
    let c = blk * QK_K + 32 * j + 4 * u + 16 * h;
    c..c + 4
}

/// The Q4_K-order GPU words (k % 256 == 0), struct of arrays: for quad `qd = 4 * blk + u`
/// (`quads = k / 64`), vec4 `t` at `t * quads + qd`: t = 0..3: i8x4 words of (sub-block 2t, h 0),
/// (2t, 1), (2t+1, 0), (2t+1, 1); t = 4, 5: `d` of sub-blocks 0..3, 4..7; t = 6, 7:
/// `fl32(d_j * sum of the quad's 8 q of sub-block j)` for j = 0..3, 4..7.
pub fn pack_q4k(h: &HostQ8) -> Vec<u32> {
    let quads = h.k() / 64;
    let mut out = vec![0u32; quads * 32];
    for qd in 0..quads {
        let (blk, u) = (qd / 4, qd % 4);
        for j in 0..8 {
            let b = blk * 8 + j;
            for hh in 0..2 {
                let r = q4k_cols(blk, j, u, hh);
                let word = pack4(std::array::from_fn(|i| h.q[r.start + i]));
                out[((j / 2) * quads + qd) * 4 + (j % 2) * 2 + hh] = word;
            }
            out[((4 + j / 4) * quads + qd) * 4 + j % 4] = h.d[b].to_bits();
            let ds = h.d_sum(b, q4k_cols(blk, j, u, 0).chain(q4k_cols(blk, j, u, 1)));
            out[((6 + j / 4) * quads + qd) * 4 + j % 4] = ds.to_bits();
        }
    }
    out
}

/// INT4 GEMV on q8 activations (`k % 32 == 0`, `group_size % 32 == 0`): values and the magnitudes
/// errors are normalised by. Per row: `sum_w s_g * (d_b * D_w - zo_g * fl32(d_b * S_w))` over
/// 8-column words, `D_w = sum (u - ...)`: `u` the unsigned code (signed codes + 8), `zo = offset + zero`.
pub fn int4_gemv(w: &HostInt4, x: &HostQ8) -> (Vec<f64>, Vec<f64>) {
    let ng = w.num_groups();
    let offset = if w.mode == crate::kernels::int4::Int4Mode::Signed { 8.0 } else { 0.0 };
    let mut y = vec![0f64; w.n];
    let mut mag = vec![0f64; w.n];
    for r in 0..w.n {
        for wi in 0..w.k / 8 {
            let c0 = 8 * wi;
            let gi = r * ng + c0 / w.group_size;
            let s = w.scales[gi] as f64;
            let zo = offset + w.zeros.as_ref().map_or(0.0, |z| z[gi] as f64);
            let (mut dot, mut adot) = (0i64, 0i64);
            for c in c0..c0 + 8 {
                let u = (w.q(r, c) as f64 + offset) as i64;
                dot += u * x.q[c] as i64;
                adot += (u * x.q[c] as i64).abs();
            }
            let d = x.d[c0 / QB] as f64;
            let ds = x.d_sum(c0 / QB, c0..c0 + 8) as f64;
            y[r] += s * (d * dot as f64 - zo * ds);
            mag[r] += s.abs() * (d * adot as f64 + zo.abs() * ds.abs());
        }
    }
    (y, mag)
}

/// Q4_K GEMV on q8 activations: per block and sub-block j,
/// `d * sc_j * d_j * D_j - dmin * m_j * sum_u fl32(d_j * S_{j,u})`.
pub fn q4k_gemv(n: usize, k: usize, blocks: &[BlockQ4K], x: &HostQ8) -> (Vec<f64>, Vec<f64>) {
    let nb = k / QK_K;
    let mut y = vec![0f64; n];
    let mut mag = vec![0f64; n];
    for r in 0..n {
        for blk in 0..nb {
            let b = &blocks[r * nb + blk];
            let d = half::f16::from_bits(b.d).to_f64();
            let dmin = half::f16::from_bits(b.dmin).to_f64();
            for j in 0..8 {
                let (sc, m) = get_scale_min(j, &b.scales);
                let (mut dot, mut adot) = (0i64, 0i64);
                for i in 0..32 {
                    let q = ((b.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15) as i64;
                    let p = q * x.q[blk * QK_K + 32 * j + i] as i64;
                    dot += p;
                    adot += p.abs();
                }
                let dx = x.d[blk * 8 + j] as f64;
                let ds: f64 = (0..4).map(|u| x.d_sum(blk * 8 + j, q4k_cols(blk, j, u, 0).chain(q4k_cols(blk, j, u, 1))) as f64).sum();
                let ads: f64 = (0..4).map(|u| (x.d_sum(blk * 8 + j, q4k_cols(blk, j, u, 0).chain(q4k_cols(blk, j, u, 1))) as f64).abs()).sum();
                y[r] += d * sc as f64 * dx * dot as f64 - dmin * m as f64 * ds;
                mag[r] += (d * sc as f64 * dx).abs() * adot as f64 + (dmin * m as f64).abs() * ads;
            }
        }
    }
    (y, mag)
}

/// The bound on `|W x_q8 - W x|` from activation rounding alone: `sum_c |w_rc| * d_b(c) / 2`.
pub fn rounding_bound(n: usize, k: usize, w: impl Fn(usize, usize) -> f64, x: &HostQ8) -> Vec<f64> {
    (0..n).map(|r| (0..k).map(|c| w(r, c).abs() * x.d[c / QB] as f64 / 2.0).sum()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantise_rounds_ties_away_and_saturates() {
        let mut x = vec![0f32; 32];
        x[0] = 127.0; // d = 1 (127 * fl(1/127) rounds to 1)
        let d = 127f32 * INV127;
        x[1] = 2.5 * d;
        x[2] = -2.5 * d;
        x[3] = 0.49 * d;
        let h = quantize(&x);
        assert_eq!(h.d[0], d);
        assert_eq!(&h.q[..4], &[127, 3, -3, 0]);
        // Every code reconstructs within d/2.
        let mut rng = crate::suite::Rng::new(7);
        let x = rng.normal_vec(64 * 32);
        let h = quantize(&x);
        for (c, &v) in x.iter().enumerate() {
            assert!((v as f64 - h.value(c)).abs() <= h.d[c / 32] as f64 * 0.5 * (1.0 + 1e-6), "col {c}");
        }
    }
}
