//! CPU references with f64 accumulation: the executable specification of every kernel.
//!
//! Public with the `testkit` feature. Without it this module is crate-private and holds only what
//! the Native self-check's cases compare with ([`crate::native`]).

pub mod attention;
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub mod q8;
pub mod quant;
pub mod rope;
pub mod turboquant;

/// Reference mat-vec: `y[r] = sum_c w(r, c) * x[c]` in f64, plus the magnitude
/// `sum_c wmag(r, c) * |x[c]|` that errors are normalised by, where `wmag` bounds the operands
/// the GPU combines into a weight (e.g. `(|q| + |zero| + offset) * scale`), so that f32
/// rounding of those operands is inside the error scale.
pub fn gemv(n: usize, k: usize, w: impl Fn(usize, usize) -> f64, wmag: impl Fn(usize, usize) -> f64, x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0f64; n];
    let mut mag = vec![0f64; n];
    for r in 0..n {
        for (c, &xc) in x.iter().enumerate().take(k) {
            y[r] += w(r, c) * xc as f64;
            mag[r] += wmag(r, c) * (xc as f64).abs();
        }
    }
    (y, mag)
}

/// Reference mat-mat: `y[i, r] = sum_c x[i, c] * w(r, c)`, shape [m, n], with magnitudes as in [`gemv`].
pub fn gemm(m: usize, n: usize, k: usize, w: impl Fn(usize, usize) -> f64, wmag: impl Fn(usize, usize) -> f64, x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let wd: Vec<f64> = (0..n * k).map(|i| w(i / k, i % k)).collect();
    let wm: Vec<f64> = (0..n * k).map(|i| wmag(i / k, i % k)).collect();
    let mut y = vec![0f64; m * n];
    let mut mag = vec![0f64; m * n];
    for i in 0..m {
        let xr = &x[i * k..(i + 1) * k];
        for r in 0..n {
            let (wr, mr) = (&wd[r * k..(r + 1) * k], &wm[r * k..(r + 1) * k]);
            let (mut s, mut a) = (0f64, 0f64);
            for c in 0..k {
                s += wr[c] * xr[c] as f64;
                a += mr[c] * (xr[c] as f64).abs();
            }
            y[i * n + r] = s;
            mag[i * n + r] = a;
        }
    }
    (y, mag)
}
