//! The TurboQuant 4-bit codebook and the seeded random signs: the one place these constants live.
//! The CPU reference reads them from here and the WGSL kernels get them through
//! [`wgsl_snippet`], which is generated from the same arrays.
//!
//! Codes are ordered by value: code `8 + m` is `+CENTROIDS[m]`, code `7 - m` is `-CENTROIDS[m]`,
//! so code 0 is the most negative centroid and code 15 the most positive.

use std::sync::OnceLock;

/// The positive half of the 16 Lloyd-Max centroids for N(0, 1) (the negative half mirrors it),
/// written as published (7 decimals); the f32 nearest to each is what every kernel uses.
#[allow(clippy::excessive_precision)]
pub const CENTROIDS: [f32; 8] = [0.1283950, 0.3880483, 0.6567591, 0.9423405, 1.2562312, 1.6180464, 2.0690172, 2.7325896];

/// Expected per-coordinate MSE of this quantiser on N(0, 1) (Max 1960, 16 levels).
pub const GAUSSIAN_MSE: f64 = 0.009497;

/// The value of a 4-bit code.
pub fn centroid(code: u8) -> f32 {
    let c = (code & 15) as usize;
    if c >= 8 {
        CENTROIDS[c - 8]
    } else {
        -CENTROIDS[7 - c]
    }
}

/// Decision boundaries between consecutive positive centroids (midpoints, in f64); together
/// with 0 and their negatives they are the 15 boundaries of the quantiser.
pub fn boundaries() -> [f64; 7] {
    std::array::from_fn(|i| (CENTROIDS[i] as f64 + CENTROIDS[i + 1] as f64) / 2.0)
}

/// The code of a scaled coordinate `u` (nearest centroid; `u >= 0` takes the positive half).
pub fn code_of(u: f64) -> u8 {
    let m = boundaries().iter().filter(|&&b| u.abs() > b).count() as u8;
    if u >= 0.0 {
        8 + m
    } else {
        7 - m
    }
}

/// Distance from `u` to the nearest decision boundary (0 and ±midpoints).
pub fn boundary_distance(u: f64) -> f64 {
    boundaries().iter().fold(u.abs(), |d, &b| d.min((u.abs() - b).abs()))
}

/// Sign mask of a layer: bit `i` of the `d / 32` words set means coordinate `i` is negated
/// before the transform. `None` gives no signs (a plain Hadamard rotation). The stream is
/// splitmix64 of the seed, so a seed means the same signs everywhere.
pub fn sign_words(seed: Option<u64>, d: usize) -> Vec<u32> {
    let words = d.div_ceil(32);
    let Some(seed) = seed else {
        return vec![0; words];
    };
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..words).map(|_| next() as u32).collect()
}

/// Whether coordinate `i` is negated under `signs` (from [`sign_words`]).
pub fn negated(signs: &[u32], i: usize) -> bool {
    (signs[i / 32] >> (i % 32)) & 1 == 1
}

/// WGSL constants generated from this module: `TQ_CENTROIDS` (all 16, by code) and the positive
/// decision boundaries `TQ_B1..TQ_B7` rounded to f32.
pub fn wgsl_snippet() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| {
        let cs: Vec<String> = (0..16u8).map(|c| format!("{:?}", centroid(c))).collect();
        let mut s = String::from("// Generated from src/kernels/turboquant/codebook.rs (do not edit).\n");
        s += &format!("const TQ_CENTROIDS = array<f32, 16>({});\n", cs.join(", "));
        for (i, b) in boundaries().iter().enumerate() {
            s += &format!("const TQ_B{}: f32 = {:?};\n", i + 1, *b as f32);
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_ordered_and_nearest() {
        for c in 0..15u8 {
            assert!(centroid(c) < centroid(c + 1));
        }
        for i in -3000..=3000 {
            let u = i as f64 / 1000.0;
            let best = (0..16u8).min_by(|&a, &b| (centroid(a) as f64 - u).abs().total_cmp(&(centroid(b) as f64 - u).abs())).unwrap();
            let c = code_of(u);
            assert!(c == best || boundary_distance(u) < 1e-9, "u {u}: code {c}, nearest {best}");
        }
    }

    #[test]
    fn signs_are_seeded_and_balanced() {
        assert_eq!(sign_words(Some(3), 512), sign_words(Some(3), 512));
        assert_ne!(sign_words(Some(3), 512), sign_words(Some(4), 512));
        assert!(sign_words(None, 128).iter().all(|&w| w == 0));
        let ones: u32 = sign_words(Some(99), 512).iter().map(|w| w.count_ones()).sum();
        assert!((200..312).contains(&ones), "{ones} of 512 signs negative");
    }

    #[test]
    fn snippet_parses_back() {
        // The WGSL literals read back as exactly the f32 values the CPU uses.
        let s = wgsl_snippet();
        let line = s.lines().find(|l| l.starts_with("const TQ_CENTROIDS")).unwrap();
        let inner = &line[line.find('(').unwrap() + 1..line.rfind(')').unwrap()];
        let vals: Vec<f32> = inner.split(',').map(|v| v.trim().parse().unwrap()).collect();
        assert_eq!(vals, (0..16u8).map(centroid).collect::<Vec<_>>());
        for (i, b) in boundaries().iter().enumerate() {
            let l = s.lines().find(|l| l.starts_with(&format!("const TQ_B{}:", i + 1))).unwrap();
            let v: f32 = l[l.find('=').unwrap() + 1..].trim().trim_end_matches(';').parse().unwrap();
            assert_eq!(v, *b as f32);
        }
    }
}
