//! RoPE in f64: the table and the rotation (the spec of wgsl/rope_*.wgsl).

use crate::kernels::rope::{PairLayout, RopeConfig};

#[cfg(feature = "testkit")]
/// `(cos, sin) * attention_factor` for positions `0..rows`, row-major `[rows, head_dim / 2]`.
pub fn table(cfg: &RopeConfig, rows: usize) -> Vec<(f64, f64)> {
    let inv = cfg.inv_freq();
    let af = cfg.attention_factor();
    let mut t = Vec::with_capacity(rows * inv.len());
    for pos in 0..rows {
        for &f in &inv {
            let a = pos as f64 * f;
            t.push((a.cos() * af, a.sin() * af));
        }
    }
    t
}

/// `(cos, sin) * attention_factor` of one position and pair.
pub fn cos_sin(inv_freq: &[f64], attention_factor: f64, pos: usize, i: usize) -> (f64, f64) {
    let a = pos as f64 * inv_freq[i];
    (a.cos() * attention_factor, a.sin() * attention_factor)
}

/// Rotate one head `x[0..d]` at position `pos`; returns the rotated head and, per element, the
/// magnitude `(|a| + |b|) * attention_factor` its rounding error scales with.
pub fn rotate_head(x: &[f64], layout: PairLayout, inv_freq: &[f64], attention_factor: f64, pos: usize) -> (Vec<f64>, Vec<f64>) {
    let d = x.len();
    let mut out = x.to_vec();
    let mut mag = vec![0.0; d];
    for i in 0..d / 2 {
        let (ea, eb) = layout.pair(i, d);
        let (c, s) = cos_sin(inv_freq, attention_factor, pos, i);
        let (a, b) = (x[ea], x[eb]);
        out[ea] = a * c - b * s;
        out[eb] = b * c + a * s;
        let m = (a.abs() + b.abs()) * attention_factor;
        mag[ea] = m;
        mag[eb] = m;
    }
    (out, mag)
}

/// Rotate `x` `[tokens, heads, d]`, token `t` at position `pos(t)`.
pub fn rotate(x: &[f64], heads: usize, d: usize, layout: PairLayout, cfg: &RopeConfig, pos: impl Fn(usize) -> usize) -> (Vec<f64>, Vec<f64>) {
    let inv = cfg.inv_freq();
    let af = cfg.attention_factor();
    let mut out = Vec::with_capacity(x.len());
    let mut mag = Vec::with_capacity(x.len());
    for (row, head) in x.chunks(d).enumerate() {
        let (o, m) = rotate_head(head, layout, &inv, af, pos(row / heads));
        out.extend(o);
        mag.extend(m);
    }
    (out, mag)
}
