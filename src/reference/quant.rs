//! INT4 quantiser reference. Rounding is ties away from zero, computed exactly; scales use only
//! correctly rounded f32 operations so that GPU and CPU agree bit-for-bit:
//! signed `s = absmax * fl(1/7)`, `q = clamp(round(x / s), -8, 7)`;
//! asymmetric `s = (max(x, 0) - min(x, 0)) * fl(1/15)`, `zero = clamp(round(-min / s), 0, 15)`,
//! `q = clamp(round(x / s) + zero, 0, 15)`. A group whose scale is 0 gets code 0 (and zero 0).

use crate::kernels::int4::{HostInt4, Int4Mode};

pub const INV7: f32 = 1.0 / 7.0;
pub const INV15: f32 = 1.0 / 15.0;

/// round-half-away(|x| / s), capped at 16, computed exactly in f64 (s > 0).
pub fn round_mag(ax: f32, s: f32) -> u32 {
    let ax2 = 2.0 * ax.abs() as f64;
    (0..16u32).filter(|j| ax2 >= (2 * j + 1) as f64 * s as f64).count() as u32
}

/// Round-half-away(x / s) (signed), saturating at ±16.
pub fn round_div(x: f32, s: f32) -> i32 {
    let m = round_mag(x, s) as i32;
    if x < 0.0 {
        -m
    } else {
        m
    }
}

/// Scale (and zero) of one group of values.
pub fn group_params(vals: &[f32], mode: Int4Mode) -> (f32, Option<f32>) {
    let lo = vals.iter().fold(0f32, |a, &v| a.min(v));
    let hi = vals.iter().fold(0f32, |a, &v| a.max(v));
    match mode {
        Int4Mode::Signed => (hi.max(-lo).abs() * INV7, None),
        Int4Mode::Asymmetric => {
            let s = (hi - lo) * INV15;
            let z = if s > 0.0 { round_mag(-lo, s).min(15) } else { 0 };
            (s, Some(z as f32))
        }
    }
}

/// The 4-bit code of `v` given its group's scale and zero.
pub fn code(v: f32, s: f32, zero: Option<f32>, mode: Int4Mode) -> u8 {
    let q = if s > 0.0 { round_div(v, s) } else { 0 };
    match mode {
        Int4Mode::Signed => (q.clamp(-8, 7) & 15) as u8,
        Int4Mode::Asymmetric => (q + zero.unwrap_or(0.0) as i32).clamp(0, 15) as u8,
    }
}

/// Quantise a row-major [n, k] matrix.
pub fn quantize(w: &[f32], n: usize, k: usize, group_size: usize, mode: Int4Mode) -> HostInt4 {
    let ng = k.div_ceil(group_size);
    let rb = k.div_ceil(2);
    let mut codes = vec![0u8; n * rb];
    let mut scales = vec![0f32; n * ng];
    let mut zeros = (mode == Int4Mode::Asymmetric).then(|| vec![0f32; n * ng]);
    for r in 0..n {
        for g in 0..ng {
            let (c0, c1) = (g * group_size, ((g + 1) * group_size).min(k));
            let (s, z) = group_params(&w[r * k + c0..r * k + c1], mode);
            scales[r * ng + g] = s;
            if let (Some(zs), Some(z)) = (zeros.as_mut(), z) {
                zs[r * ng + g] = z;
            }
            for c in c0..c1 {
                let q = code(w[r * k + c], s, z, mode);
                codes[r * rb + c / 2] |= q << (4 * (c % 2));
            }
        }
    }
    HostInt4 { n, k, group_size, mode, codes, scales, zeros }
}
