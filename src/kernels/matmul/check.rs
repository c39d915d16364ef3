//! The cases the Native self-check ([`crate::native`]) runs for the family's Native GEMVs (one
//! per MSL entry point: 2 rows per threadgroup below 2048 rows, 4 from there, each epilogue; f32
//! or int8 activations, the latter quantised by the GPU quantiser as the model does) and Native
//! GEMMs (m = 33, n = 70: tails in both, split K), on the format's random valid blocks
//! (within f16's range for the GEMM), against the f64 reference. Also the f16-input GEMM error
//! bound and weight generation the test grid shares. Built in every build.

use super::*;
use crate::reference;
use crate::suite::{guarded_f32, Case, MatmulPrepared, MatmulWeights, Prepared, Rng};

/// The format whose `op` kernel `info` is (`mm_<op>_<format>`).
fn format_of(info: &KernelInfo, op: &str) -> Option<&'static WeightFormat> {
    FORMATS.iter().copied().find(|f| info.name.strip_prefix("mm_").and_then(|n| n.strip_prefix(op)).and_then(|n| n.strip_prefix('_')) == Some(f.name))
}

/// The self-check cases of `mm_gemv_<format>` / `mm_gemv_q8_<format>` where the format has an
/// MSL GEMV on those activations: one per entry point (n = 33 below 2048 rows, where the plan
/// takes the fewest rows per threadgroup, 2049 from there; one more row for (gate, up) pairs).
pub(super) fn gemv_checks(info: &KernelInfo) -> Vec<Box<dyn Case>> {
    gemv_cases(info, true)
}

/// The fused-epilogue cases of [`gemv_checks`] (residual add, SwiGLU, GeGLU): the test grid's, whose
/// other cases run the plain store.
#[cfg(feature = "testkit")]
pub(super) fn gemv_epilogue_cases(info: &KernelInfo) -> Vec<Box<dyn Case>> {
    gemv_cases(info, false)
}

fn gemv_cases(info: &KernelInfo, store: bool) -> Vec<Box<dyn Case>> {
    let (f, q8, native) = match (format_of(info, "gemv"), format_of(info, "gemv_q8")) {
        (Some(f), _) => (f, false, f.native.as_ref()),
        (_, Some(f)) => (f, true, f.native_q8.as_ref()),
        _ => return Vec::new(),
    };
    let Some(native) = native else { return Vec::new() };
    // The integer dot needs the quad order (k % 256 == 0).
    let k = if q8 { 256 } else { (256 / f.block_weights).max(1) * f.block_weights };
    let small = native.entries.iter().map(|e| e.0).min();
    native
        .entries
        .iter()
        .filter_map(|&(rows, e, _)| {
            let epi = Epilogue::of(e).filter(|&epi| store || epi != Epilogue::Store)?;
            let n = if Some(rows) == small { 33 } else { 2049 } + usize::from(epi.pairs());
            Some(Box::new(GemvCheck { format: f, n, k, q8, epi }) as Box<dyn Case>)
        })
        .collect()
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

/// A GEMV of `n x k` random weights of `format` on f32 or int8 (`q8`, quantised on the GPU by
/// the quantiser the model records) activations with the epilogue `epi`: `y0 + W x` from random
/// `y0`, or the SwiGLU / GeGLU of the (gate, up) row pairs (`n` even). The self-check's GEMV case, and the
/// test grid's epilogue cases.
pub(crate) struct GemvCheck {
    pub(crate) format: &'static WeightFormat,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) q8: bool,
    pub(crate) epi: Epilogue,
}

impl MatmulWeights for WeightMatrix {
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        matmul(b, self, x, y, m)
    }
}

/// The reference of a GEMV's epilogue from the rows' dots and magnitudes (`dots`) and the
/// output's prior values `y0` (read by `Accumulate`).
pub(crate) fn epilogue_reference(epi: Epilogue, dots: (Vec<f64>, Vec<f64>), y0: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (d, m) = dots;
    match epi {
        Epilogue::Store => (d, m),
        Epilogue::Accumulate => d.iter().zip(&m).zip(y0).map(|((d, m), &y)| (d + y as f64, m + (y as f64).abs())).unzip(),
        Epilogue::SwiGlu | Epilogue::GeGlu => (0..d.len() / 2)
            .map(|i| {
                let ((g, ga), (u, ua)) = ((d[2 * i], m[2 * i]), (d[2 * i + 1], m[2 * i + 1]));
                let s = if epi == Epilogue::GeGlu { g / (1.0 + (-2.0 * (2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).exp()) } else { g / (1.0 + (-g).exp()) };
                // silu' lies within [-0.1, 1.1], gelu_tanh' within [-0.17, 1.13], and |silu(g)|,
                // |gelu_tanh(g)| <= |g|: the errors of g and u scale by these.
                (s * u, 1.2 * ga * u.abs() + g.abs() * ua + (s * u).abs())
            })
            .unzip(),
    }
}

/// A prepared [`GemvCheck`].
struct GemvPrepared {
    weights: Vec<WeightMatrix>,
    x: GpuBuffer<f32>,
    xq: Option<Q8Activations>,
    y: GpuBuffer<f32>,
    epi: Epilogue,
    reference: (Vec<f64>, Vec<f64>),
}

impl Prepared for GemvPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let w = &self.weights[copy % self.weights.len()];
        match &self.xq {
            Some(xq) => {
                crate::kernels::q8::record_quantize(b, &self.x, xq, 1)?;
                gemv_with(b, w, GemvInput::Q8(xq), &self.y, self.epi)
            }
            None => gemv_with(b, w, GemvInput::F32(&self.x), &self.y, self.epi),
        }
    }
    fn check(&self, ctx: &Context) -> Result<crate::suite::Check> {
        Ok(crate::suite::compare(&ctx.read(&self.y)?, &self.reference.0, &self.reference.1, 1e-5))
    }
}

impl Case for GemvCheck {
    fn name(&self) -> String {
        let epi = match self.epi {
            Epilogue::Store => "",
            Epilogue::Accumulate => " acc",
            Epilogue::SwiGlu => " swiglu",
            Epilogue::GeGlu => " geglu",
        };
        format!("n={} k={}{epi}", self.n, self.k)
    }

    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        let x = if self.q8 { 6 } else { 4 } * self.k;
        (self.n * (self.format.gpu_row_words)(self.k) * 4 + x + 4 * self.n) as u64
    }

    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (f, n, k, epi) = (self.format, self.n, self.k, self.epi);
        ensure(!epi.pairs() || n % 2 == 0, || Error::Shape(format!("{epi:?} case of n = {n} rows")))?;
        let (bytes, w, mag) = random_matrix(f, rng, n, k, false)?;
        let mut weights = vec![WeightMatrix::upload_format(ctx, f, n, k, &bytes)?];
        for _ in 1..copies {
            weights.push(WeightMatrix::upload_format(ctx, f, n, k, &random_matrix(f, rng, n, k, false)?.0)?);
        }
        let mut x = rng.uniform_vec(k, -1.0, 1.0);
        // The GEMV multiplies what the quantiser makes of x (the CPU quantiser's values, bit for bit).
        let dots = |x: &[f32]| {
            let xv: Vec<f32> = if self.q8 {
                let h = reference::q8::quantize(x);
                (0..k).map(|c| h.value(c) as f32).collect()
            } else {
                x.to_vec()
            };
            reference::gemv(n, k, |r, c| w[r * k + c] as f64, |r, c| mag[r * k + c], &xv)
        };
        let mut d = dots(&x);
        let big = d.0.iter().fold(0f64, |m, v| m.max(v.abs()));
        if epi.pairs() && big > 2f64.powi(50) {
            // A pair's product must stay within f32 (the random scales of some formats reach
            // 2^100): x scaled by a power of two (exact, and so is its quantisation).
            let s = 2f32.powi(50 - big.log2().ceil() as i32);
            x.iter_mut().for_each(|v| *v *= s);
            d = dots(&x);
        }
        let outputs = if epi.pairs() { n / 2 } else { n };
        let mut y0 = vec![f32::from_bits(crate::suite::POISON_F32); outputs + crate::suite::GUARD];
        if epi == Epilogue::Accumulate {
            y0[..n].copy_from_slice(&rng.uniform_vec(n, -2.0, 2.0));
        }
        let reference = epilogue_reference(epi, d, &y0);
        let xq = if self.q8 { Some(Q8Activations::alloc(ctx, k)?) } else { None };
        Ok(Box::new(GemvPrepared { weights, x: ctx.upload(&x)?, xq, y: ctx.upload(&y0)?, epi, reference }))
    }
}
