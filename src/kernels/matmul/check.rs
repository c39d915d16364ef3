//! The cases the Native self-check ([`crate::native`]) runs for the family's Native GEMVs (one
//! per MSL entry point: 2 rows per threadgroup below 2048 rows, 4 from there; f32 activations)
//! and Native GEMMs (m = 33, n = 70: tails in both, split K), on the format's random valid blocks
//! (within f16's range for the GEMM), against the f64 reference. Also the f16-input GEMM error
//! bound and weight generation the test grid shares. Built in every build.

use super::*;
use crate::reference;
use crate::suite::{guarded_f32, Case, MatmulPrepared, MatmulWeights, Prepared, Rng};

/// The format whose `op` kernel `info` is (`mm_<op>_<format>`).
fn format_of(info: &KernelInfo, op: &str) -> Option<&'static WeightFormat> {
    FORMATS.iter().copied().find(|f| info.name.strip_prefix("mm_").and_then(|n| n.strip_prefix(op)).and_then(|n| n.strip_prefix('_')) == Some(f.name))
}

/// The self-check cases of `mm_gemv_<format>` where the format has an MSL GEMV.
pub(super) fn gemv_checks(info: &KernelInfo) -> Vec<Box<dyn Case>> {
    let Some(f) = format_of(info, "gemv").filter(|f| f.native.is_some()) else { return Vec::new() };
    let k = (256 / f.block_weights).max(1) * f.block_weights;
    vec![Box::new(GemvCheck { format: f, n: 33, k }), Box::new(GemvCheck { format: f, n: 2049, k })]
}

/// The self-check cases of `mm_gemm_<format>` where the format has an MSL GEMM.
pub(super) fn gemm_checks(info: &KernelInfo) -> Vec<Box<dyn Case>> {
    let Some(f) = format_of(info, "gemm").filter(|f| f.native_gemm.is_some()) else { return Vec::new() };
    let k = (512 / f.block_weights).max(1) * f.block_weights;
    vec![Box::new(GemmCheck { format: f, m: 33, n: 70, k })]
}

/// Error tolerance of the GEMMs with f16 inputs (Matrix, Native), normalised by sum |w x|:
/// weights and activations are rounded to f16 (relative error <= 2^-11 each, so <= ~2^-10 =
/// 9.8e-4 per product), products are summed in f32 (<= k 2^-23 relative to the sum of magnitudes
/// even where the matrix unit truncates instead of rounding: 3.1e-4 at the test's k <= 2560, 4.9e-4
/// at the bench's 4096).
pub(crate) const MATRIX_TOL: f64 = 2e-3;
/// Half the spacing of f16's subnormals: the absolute rounding error of a value below 2^-14.
const F16_SUBNORMAL_ERR: f64 = 1.0 / (1u64 << 25) as f64;
/// Largest f16 magnitude (finite).
const F16_MAX: f32 = 65504.0;

/// A fresh generator seeded from `rng`.
pub(crate) fn fresh(rng: &mut Rng) -> fastrand::Rng {
    fastrand::Rng::with_seed(((rng.u32(u32::MAX) as u64) << 32) | rng.u32(u32::MAX) as u64)
}

/// Random weights of `f`: (GGUF bytes, exact values, operand magnitudes). `f16_range`: every
/// weight within f16's finite range (blocks outside it are drawn again), as the GEMMs with f16
/// inputs need.
pub(crate) fn random_matrix(f: &WeightFormat, rng: &mut Rng, n: usize, k: usize, f16_range: bool) -> Result<(Vec<u8>, Vec<f32>, Vec<f64>)> {
    let mut r = fresh(rng);
    let mut bytes = (f.random_blocks)(&mut r, n * k / f.block_weights);
    if f16_range {
        let mut w = vec![0f32; f.block_weights];
        for (i, blk) in bytes.chunks_exact_mut(f.block_bytes).enumerate() {
            let mut tries = 0;
            loop {
                (f.dequantize)(blk, &mut w);
                if w.iter().all(|v| v.abs() <= F16_MAX) {
                    break;
                }
                tries += 1;
                ensure(tries < 1000, || Error::Argument(format!("{}: no block within f16's range in 1000 draws (block {i})", f.name)))?;
                blk.copy_from_slice(&(f.random_blocks)(&mut r, 1));
            }
        }
    }
    let mut w = vec![0f32; n * k];
    (f.dequantize)(&bytes, &mut w);
    let mut mag = vec![0f64; n * k];
    (f.magnitudes)(&bytes, &mut mag);
    Ok((bytes, w, mag))
}

/// The f64 reference of an f16-input GEMM of the rows of `x` (`x.len() / k` rows) with the
/// `n x k` weights `w` (magnitudes `mag`), each output's magnitude widened by the share of
/// [`MATRIX_TOL`] that values in f16's subnormal range (which round with an absolute error) take.
pub(crate) fn f16_gemm_reference(n: usize, k: usize, w: &[f32], mag: &[f64], x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut reference = reference::gemm(x.len() / k, n, k, |r, c| w[r * k + c] as f64, |r, c| mag[r * k + c], x);
    let sw: Vec<f64> = w.chunks_exact(k).map(|r| r.iter().map(|v| v.abs() as f64).sum()).collect();
    for (ri, xrow) in x.chunks_exact(k).enumerate() {
        let sx: f64 = xrow.iter().map(|v| v.abs() as f64).sum();
        for (r, swr) in sw.iter().enumerate() {
            reference.1[ri * n + r] += F16_SUBNORMAL_ERR * (sx + swr) / MATRIX_TOL;
        }
    }
    reference
}

/// A Native GEMM self-check: `m` rows of x times `n x k` random weights within f16's range.
pub(crate) struct GemmCheck {
    pub(crate) format: &'static WeightFormat,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

impl Case for GemmCheck {
    fn name(&self) -> String {
        format!("m={} n={} k={}", self.m, self.n, self.k)
    }

    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        (self.n * (self.format.gpu_row_words)(self.k) * 4 + 4 * self.m * (self.k + self.n)) as u64
    }

    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (f, m, n, k) = (self.format, self.m, self.n, self.k);
        let (bytes, w, mag) = random_matrix(f, rng, n, k, true)?;
        let mut weights = vec![WeightMatrix::upload_format(ctx, f, n, k, &bytes)?];
        for _ in 1..copies {
            weights.push(WeightMatrix::upload_format(ctx, f, n, k, &random_matrix(f, rng, n, k, true)?.0)?);
        }
        let x = rng.uniform_vec(m * k, -1.0, 1.0);
        let reference = f16_gemm_reference(n, k, &w, &mag, &x);
        Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, m * n)?, m, reference, tol: MATRIX_TOL }))
    }
}

pub(crate) struct GemvCheck {
    pub(crate) format: &'static WeightFormat,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

impl MatmulWeights for WeightMatrix {
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        matmul(b, self, x, y, m)
    }
}

impl Case for GemvCheck {
    fn name(&self) -> String {
        format!("n={} k={}", self.n, self.k)
    }

    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        (self.n * (self.format.gpu_row_words)(self.k) * 4 + 4 * (self.k + self.n)) as u64
    }

    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (f, n, k) = (self.format, self.n, self.k);
        let blocks = n * k / f.block_weights;
        let mut r = fastrand::Rng::with_seed(((rng.u32(u32::MAX) as u64) << 32) | rng.u32(u32::MAX) as u64);
        let bytes = (f.random_blocks)(&mut r, blocks);
        let mut w = vec![0f32; n * k];
        (f.dequantize)(&bytes, &mut w);
        let mut mag = vec![0f64; n * k];
        (f.magnitudes)(&bytes, &mut mag);
        let mut weights = vec![WeightMatrix::upload_format(ctx, f, n, k, &bytes)?];
        for _ in 1..copies {
            weights.push(WeightMatrix::upload_format(ctx, f, n, k, &(f.random_blocks)(&mut r, blocks))?);
        }
        let x = rng.uniform_vec(k, -1.0, 1.0);
        let reference = reference::gemv(n, k, |r, c| w[r * k + c] as f64, |r, c| mag[r * k + c], &x);
        Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, n)?, m: 1, reference, tol: 1e-5 }))
    }
}
