//! Test and bench cases of the weight-matrix family (see [`crate::suite`]): for every format of
//! [`FORMATS`], GEMV (f32 and int8 activations), GEMM, the int8 GEMM of a few rows (formats with
//! an integer dot; the GPU quantiser and the GEMM timed together) and dequantise, on the format's random
//! valid blocks, odd row counts, a row-chunked matrix, poisoned guard regions and f64
//! references (dequantise: bit equality with the CPU dequantiser). GEMM cases that run as Matrix
//! (see [`super::matrix`]) or Native take weights within f16's range and the f16 error bound
//! ([`MATRIX_TOL`]); large GEMMs are checked on a sample of rows.

use super::check::{f16_gemm_reference, random_matrix, MATRIX_TOL};
use super::*;
use crate::reference::{self, q8 as r8};
use crate::suite::{compare, describe_all, guard_damage, guarded_f32, Case, Check, Kernel, MatmulPrepared, PlanCase, Prepared, Rng, POISON_F32};
use crate::tuning::{GemvTuning, Tuning};

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Gemv,
    GemvQ8,
    Gemm,
    GemmQ8,
    Dequant,
    /// A row lookup ([`gather_row`]): a case of the dequantise kernel.
    Gather,
}

struct MmKernel {
    format: &'static WeightFormat,
    op: Op,
}

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    static ALL: OnceLock<Vec<MmKernel>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let ops = |f: &'static WeightFormat| [Op::Gemv, Op::GemvQ8, Op::Gemm, Op::GemmQ8, Op::Dequant].into_iter().filter(move |&op| op != Op::GemmQ8 || has_integer_dot(f));
        FORMATS.iter().flat_map(|&format| ops(format).map(move |op| MmKernel { format, op })).collect()
    });
    all.iter().map(|k| k as &dyn Kernel).collect()
}

/// Columns every k of `f` must be a multiple of: the block (1 for the float formats, so their
/// test ks are odd); `q8`: also the 32-column activation blocks.
fn k_quantum(f: &WeightFormat, q8: bool) -> usize {
    let lcm = |a: usize, b: usize| a / gcd(a, b) * b;
    if q8 {
        lcm(f.block_weights, 32)
    } else {
        f.block_weights
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Test ks: one quantum, three, an odd multiple near 300 and one near 2560 (distinct; for the
/// float formats 1, 3, 301 and 2560).
fn test_ks(f: &WeightFormat, q8: bool) -> Vec<usize> {
    let q = k_quantum(f, q8);
    let mut v = vec![q, 3 * q, q * (300usize.div_ceil(q) | 1), q * 2560usize.div_ceil(q)];
    if q8 && q < 256 {
        // Three 256-column groups: the integer dot's quad order (k % 256 == 0) at an odd count.
        v.push(768);
    }
    v.dedup();
    v.sort();
    v.dedup();
    v
}

const NS: [usize; 4] = [1, 3, 33, 255];
const LLM_SHAPES: [(usize, usize); 3] = [(4096, 4096), (14336, 4096), (4096, 14336)];
/// Matrix shapes (n, k) of Llama-3-8B and Qwen2.5-7B layers besides 4096 x 4096.
const PROMPT_SHAPES: [(usize, usize); 6] = [(14336, 4096), (4096, 14336), (1024, 4096), (3584, 3584), (18944, 3584), (3584, 18944)];

struct MatCase {
    format: &'static WeightFormat,
    op: Op,
    m: usize,
    n: usize,
    k: usize,
    /// Chunks to split the matrix into (1: as uploaded normally).
    chunks: usize,
    /// GEMM through [`gemm_staged`] (the two-pass Matrix GEMM where it applies).
    staged: bool,
}

fn upload_case(ctx: &Context, f: &'static WeightFormat, n: usize, k: usize, bytes: &[u8], chunks: usize) -> Result<WeightMatrix> {
    let row_bytes = ((f.gpu_row_words)(k) * 4) as u64;
    let limit = if chunks > 1 { row_bytes * n.div_ceil(chunks) as u64 } else { u64::MAX };
    let w = WeightMatrix::upload_limited(ctx, f, n, k, bytes, None, limit)?;
    ensure(w.chunks() == chunks, || Error::Argument(format!("expected {chunks} chunks, got {}", w.chunks())))?;
    Ok(w)
}

/// The q8 GEMV's prepared form: quantised x on the GPU.
struct Q8Prepared {
    weights: Vec<WeightMatrix>,
    xq: Q8Activations,
    y: GpuBuffer<f32>,
    reference: (Vec<f64>, Vec<f64>),
}

impl Prepared for Q8Prepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        gemv_q8(b, &self.weights[copy % self.weights.len()], &self.xq, &self.y)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(crate::suite::compare(&ctx.read(&self.y)?, &self.reference.0, &self.reference.1, TOL))
    }
}

/// The q8 GEMM's prepared form: f32 x on the GPU, quantised by the GPU quantiser into
/// activations of [`GEMM_Q8_MAX_M`] rows (so the record planes' stride is not `m`'s) and
/// multiplied, both in the timed batch (the quantiser, Portable only, is recorded under every
/// variant of the GEMM: it is its input stage, as in llama.cpp's MUL_MAT); the reference is the
/// int8 GEMV's per row (x quantised by the CPU quantiser, which the GPU one matches bit for bit).
struct GemmQ8Prepared {
    weights: Vec<WeightMatrix>,
    x: GpuBuffer<f32>,
    xq: Q8Activations,
    y: GpuBuffer<f32>,
    m: usize,
    reference: (Vec<f64>, Vec<f64>),
}

impl Prepared for GemmQ8Prepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        crate::kernels::q8::record_quantize(b, &self.x, &self.xq, self.m)?;
        gemm_q8(b, &self.weights[copy % self.weights.len()], &self.xq, &self.y, self.m)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.y)?, &self.reference.0, &self.reference.1, TOL))
    }
}

/// Dequantise (or, with `idx`, gather one row): bit equality with the CPU dequantiser.
struct DequantPrepared {
    weights: Vec<WeightMatrix>,
    idx: Option<GpuBuffer<u32>>,
    out: GpuBuffer<f32>,
    expect: Vec<f32>,
}

impl Prepared for DequantPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let w = &self.weights[copy % self.weights.len()];
        match &self.idx {
            Some(idx) => gather_row(b, w, idx, &self.out),
            None => dequantize(b, w, &self.out),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = ctx.read(&self.out)?;
        let n = self.expect.len();
        let differ = got.iter().zip(&self.expect).filter(|(g, e)| g.to_bits() != e.to_bits()).count();
        let first = got.iter().zip(&self.expect).position(|(g, e)| g.to_bits() != e.to_bits());
        let mut note = match first {
            Some(i) => format!("{differ} values differ in bits from the CPU dequantiser's; first at {i}: {} vs {}", got[i], self.expect[i]),
            None => String::new(),
        };
        if got.len() < n {
            note += &format!("output has {} of {n} values", got.len());
        }
        let nonfinite = got.iter().take(n).filter(|v| !v.is_finite()).count();
        Ok(Check { err: 0.0, tol: 0.0, nonfinite, guard_damage: guard_damage(&got, n, POISON_F32), note })
    }
}

/// Error tolerance, normalised by the operand magnitudes (as the other f32 GEMVs).
const TOL: f64 = 1e-5;

/// Outputs above this many multiply-adds (m n k) are checked on [`SAMPLED_ROWS`] rows of x.
const FULL_REFERENCE_MACS: usize = 1 << 26;
const SAMPLED_ROWS: usize = 8;

/// A GEMM case's prepared form: the checked rows of the output (all, or a sample for large m)
/// against their f64 reference; every output must be finite and the guard region intact.
struct GemmPrepared {
    weights: Vec<WeightMatrix>,
    /// [`gemm_staged`]'s work buffers, and whether its two-pass path must apply (the context
    /// runs the GEMM as Matrix at an m it takes): a case that should run it and does not fails.
    staged: Option<(GemmScratch, bool)>,
    x: GpuBuffer<f32>,
    y: GpuBuffer<f32>,
    m: usize,
    n: usize,
    rows: Vec<usize>,
    reference: (Vec<f64>, Vec<f64>),
    tol: f64,
}

impl Prepared for GemmPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let w = &self.weights[copy % self.weights.len()];
        match &self.staged {
            Some((scratch, _)) => gemm_staged(b, w, &self.x, &self.y, self.m, scratch),
            None => gemm(b, w, &self.x, &self.y, self.m),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        if let Some((scratch, true)) = &self.staged {
            if wide::staged_pipeline(ctx, &self.weights[0], self.m, scratch)?.is_none() {
                return Ok(Check { err: 0.0, tol: self.tol, nonfinite: 0, guard_damage: 0, note: "the two-pass Matrix GEMM did not apply".into() });
            }
        }
        let out = ctx.read(&self.y)?;
        let (m, n) = (self.m, self.n);
        if out.len() < m * n {
            return Ok(compare(&out, &vec![0.0; m * n], &vec![1.0; m * n], self.tol));
        }
        let mut got = Vec::with_capacity(self.rows.len() * n + out.len() - m * n);
        for &i in &self.rows {
            got.extend_from_slice(&out[i * n..(i + 1) * n]);
        }
        got.extend_from_slice(&out[m * n..]);
        let mut c = compare(&got, &self.reference.0, &self.reference.1, self.tol);
        c.nonfinite = out[..m * n].iter().filter(|v| !v.is_finite()).count();
        // A sample of the rows is checked for large m (`checked_rows`); a note would fail the check.
        Ok(c)
    }
}

/// Rows of x a GEMM case checks: all, or for large m x n x k the first, the last and random ones.
fn checked_rows(rng: &mut Rng, m: usize, n: usize, k: usize) -> Vec<usize> {
    if m.saturating_mul(n).saturating_mul(k) <= FULL_REFERENCE_MACS || m <= SAMPLED_ROWS {
        return (0..m).collect();
    }
    let mut rows = vec![0, m - 1];
    while rows.len() < SAMPLED_ROWS {
        rows.push(rng.u32(m as u32) as usize);
    }
    rows.sort();
    rows.dedup();
    rows
}

impl Case for MatCase {
    fn name(&self) -> String {
        let mut s = if self.m > 1 { format!("m={} n={} k={}", self.m, self.n, self.k) } else { format!("n={} k={}", self.n, self.k) };
        if self.chunks > 1 {
            s += &format!(" chunks={}", self.chunks);
        }
        if self.staged {
            s += " staged";
        }
        s
    }

    fn bytes(&self) -> u64 {
        let w = (self.n * (self.format.gpu_row_words)(self.k) * 4) as u64;
        match self.op {
            Op::Dequant => w + 4 * (self.n * self.k) as u64,
            Op::Gather => w / self.n as u64 + 4 * self.k as u64,
            Op::GemvQ8 => w + 2 * self.k as u64 + 4 * self.n as u64,
            // x read and its codes written and read once, y written.
            Op::GemmQ8 => w + 8 * (self.m * self.k) as u64 + 4 * (self.m * self.n) as u64,
            _ => w + 4 * (self.m * (self.k + self.n)) as u64,
        }
    }

    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (f, m, n, k) = (self.format, self.m, self.n, self.k);
        // The Matrix and Native GEMMs round their inputs to f16: weights within its range, its tolerance.
        let matrix = self.op == Op::Gemm && gemm_pipeline(ctx, f, m, k)?.is_some();
        let (bytes, w, mag) = random_matrix(f, rng, n, k, matrix)?;
        let mut weights = vec![upload_case(ctx, f, n, k, &bytes, self.chunks)?];
        for _ in 1..copies {
            weights.push(upload_case(ctx, f, n, k, &random_matrix(f, rng, n, k, matrix)?.0, self.chunks)?);
        }
        let (wv, mv) = (|r: usize, c: usize| w[r * k + c] as f64, |r: usize, c: usize| mag[r * k + c]);
        match self.op {
            Op::Dequant => Ok(Box::new(DequantPrepared { weights, idx: None, out: guarded_f32(ctx, n * k)?, expect: w })),
            Op::Gather => {
                let r = rng.u32(n as u32) as usize;
                let idx = ctx.upload(&[r as u32])?;
                Ok(Box::new(DequantPrepared { weights, idx: Some(idx), out: guarded_f32(ctx, k)?, expect: w[r * k..(r + 1) * k].to_vec() }))
            }
            Op::GemvQ8 => {
                let x = rng.normal_vec(k);
                let xq = r8::quantize(&x);
                let xv: Vec<f32> = (0..k).map(|c| xq.value(c) as f32).collect();
                let reference = reference::gemv(n, k, wv, mv, &xv);
                Ok(Box::new(Q8Prepared { weights, xq: Q8Activations::upload(ctx, &xq)?, y: guarded_f32(ctx, n)?, reference }))
            }
            Op::GemmQ8 => {
                let x = rng.normal_vec(m * k);
                let mut xv = Vec::with_capacity(m * k);
                for row in x.chunks_exact(k) {
                    let xq = r8::quantize(row);
                    xv.extend((0..k).map(|c| xq.value(c) as f32));
                }
                let reference = reference::gemm(m, n, k, wv, mv, &xv);
                let xq = Q8Activations::alloc_rows(ctx, k, GEMM_Q8_MAX_M)?;
                Ok(Box::new(GemmQ8Prepared { weights, x: ctx.upload(&x)?, xq, y: guarded_f32(ctx, m * n)?, m, reference }))
            }
            Op::Gemv => {
                let x = rng.uniform_vec(m * k, -1.0, 1.0);
                let reference = reference::gemv(n, k, wv, mv, &x);
                Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, m * n)?, m, reference, tol: TOL }))
            }
            Op::Gemm => {
                let x = rng.uniform_vec(m * k, -1.0, 1.0);
                let rows = checked_rows(rng, m, n, k);
                let xr: Vec<f32> = rows.iter().flat_map(|&i| x[i * k..(i + 1) * k].iter().copied()).collect();
                let (reference, tol) = if matrix { (f16_gemm_reference(n, k, &w, &mag, &xr), MATRIX_TOL) } else { (reference::gemm(rows.len(), n, k, wv, mv, &xr), TOL) };
                // Where the two-pass path cannot apply, gemm_staged runs the GEMM's other path
                // (its contract); where it can, it must (the check fails otherwise).
                let staged = if self.staged { Some((GemmScratch::new(ctx, m, &[(n, k)])?, wide::applies(ctx, f, m, k)?)) } else { None };
                Ok(Box::new(GemmPrepared { weights, staged, x: ctx.upload(&x)?, y: guarded_f32(ctx, m * n)?, m, n, rows, reference, tol }))
            }
        }
    }
}

impl MmKernel {
    fn case(&self, m: usize, n: usize, k: usize, chunks: usize) -> Box<dyn Case> {
        Box::new(MatCase { format: self.format, op: self.op, m, n, k, chunks, staged: false })
    }
    fn staged_case(&self, m: usize, n: usize, k: usize, chunks: usize) -> Box<dyn Case> {
        Box::new(MatCase { format: self.format, op: self.op, m, n, k, chunks, staged: true })
    }
}

impl Kernel for MmKernel {
    fn info(&self) -> &'static KernelInfo {
        let i = kernel_infos(self.format);
        match self.op {
            Op::Gemv => &i.gemv,
            Op::GemvQ8 => &i.gemv_q8,
            Op::Gemm => &i.gemm,
            Op::GemmQ8 => &i.gemm_q8,
            Op::Dequant | Op::Gather => &i.dequant,
        }
    }

    /// GEMVs: every n of NS x every test k, plus a 3-chunk matrix of 67 rows and 2049 rows of
    /// the smallest k. GEMM: odd m and n over the test ks, a chunked one, m = 1, and a k that
    /// ends inside a K step. Dequantise: four shapes and a chunked one.
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        // The int8 GEMM needs the quad order: k % 256 == 0 (one, three and ten 256-column groups).
        let ks = if self.op == Op::GemmQ8 { vec![256, 768, 2560] } else { test_ks(self.format, self.op == Op::GemvQ8) };
        let mut v = Vec::new();
        match self.op {
            Op::Gemv | Op::GemvQ8 => {
                for &n in &NS {
                    for &k in &ks {
                        v.push(self.case(1, n, k, 1));
                    }
                }
                v.push(self.case(1, 67, ks[1], 3));
                // Enough rows for the most rows per threadgroup of a Native plan (n >= 2048); for
                // the integer dot a k of whole 256-column groups (its quad order).
                let quads = self.op == Op::GemvQ8 && has_integer_dot(self.format);
                v.push(self.case(1, 2049, ks.iter().copied().find(|k| !quads || k % 256 == 0).unwrap_or(ks[0]), 1));
                // The fused epilogues (residual add, SwiGLU) of each Native entry point: the
                // self-check's cases (the plain store is the grid above).
                v.extend(super::check::gemv_epilogue_cases(self.info()));
            }
            Op::Gemm => {
                // Odd m and n around the Matrix tiles (32 / 128 rows x 128 outputs) and their tails.
                let shapes = [(2, 33), (7, 1), (33, 31), (17, 255), (64, 129), (100, 130), (130, 67)];
                for (i, &(m, n)) in shapes.iter().enumerate() {
                    v.push(self.case(m, n, ks[i % ks.len()], 1));
                }
                v.push(self.case(5, 67, ks[1], 3));
                // One input row (the Matrix GEMM runs from m = 1 when required), and a row length
                // of whole vec4s that ends inside a 64-column step: for 32-weight blocks 81 slices
                // of 32, split into 9 splits of 5 steps of 64 (the last one step, half of it past
                // k); for the float formats 324 columns, a run cut by the row's end.
                let q = k_quantum(self.format, false);
                let q4 = q / gcd(q, 4) * 4;
                v.push(self.case(1, 20, ks[ks.len() - 1], 1));
                v.push(self.case(40, 70, q4 * if q4 >= 256 { 9 } else { 81 }, 1));
                // The two-pass GEMM (from m = 256; elsewhere the other path, as gemm_staged
                // promises): edge tiles along m and n (both tile widths), row lengths off whole
                // 64-column steps (but for 256-weight blocks), a 3-chunk matrix. Small k: the CPU
                // executors run these too.
                v.push(self.staged_case(300, 130, q4 * if q4 >= 256 { 1 } else { 3 }, 1));
                v.push(self.staged_case(257, 67, q4, 3));
            }
            Op::GemmQ8 => {
                // m = 3, 8 and 16 (an odd m that leaves a slot of its 4-slot pipeline idle;
                // both plans: two quads per lane in flight up to m = 8, one above; every
                // accumulator), n odd (not a multiple of any team's rows), k of one to ten
                // 256-column groups, a 3-chunk matrix. Each slot count is its own pipeline, slow
                // to build on a CPU adapter: the formats besides Q4_K and Q6_K take m = 3 and 16
                // only.
                let all = [(3, 33), (3, 1), (8, 255), (8, 31), (16, 3), (16, 67), (16, 130)];
                let k_quants = matches!(self.format.ggml_type, Some(GgmlType::Q4_K | GgmlType::Q6_K));
                let shapes: Vec<_> = all.into_iter().filter(|&(m, _)| k_quants || m != 8).collect();
                for (i, &(m, n)) in shapes.iter().enumerate() {
                    v.push(self.case(m, n, ks[i % ks.len()], 1));
                }
                v.push(self.case(3, 67, ks[1], 3));
            }
            Op::Dequant | Op::Gather => {
                for (i, n) in [1, 3, 33, 31].into_iter().enumerate() {
                    v.push(self.case(1, n, ks[i % ks.len()], 1));
                }
                v.push(self.case(1, 67, ks[0], 3));
            }
        }
        v
    }

    /// With shader bounds checks on, the int8 GEMM runs one case of each plan (m = 3 and 16):
    /// each m is a pipeline of its own, built again with the checks, and slow to build on a CPU
    /// adapter. The other ops run their whole grid.
    fn bounds_checked_cases(&self) -> Vec<Box<dyn Case>> {
        match self.op {
            Op::GemmQ8 => vec![self.case(3, 33, 256, 1), self.case(16, 67, 2560, 1)],
            _ => self.test_cases(),
        }
    }

    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        match self.op {
            Op::Gemv | Op::GemvQ8 => LLM_SHAPES.iter().map(|&(n, k)| self.case(1, n, k, 1)).collect(),
            // m = 16 and 512 for every format; also 4, 8, 128 and 2048 for the common GGUF formats.
            Op::Gemm => {
                let common = matches!(self.format.ggml_type, Some(GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::F16));
                let ms: &[usize] = if common { &[4, 8, 16, 128, 512, 2048] } else { &[16, 512] };
                let mut v: Vec<_> = ms.iter().map(|&m| self.case(m, 4096, 4096, 1)).collect();
                if common {
                    v.extend([512, 2048].iter().map(|&m| self.staged_case(m, 4096, 4096, 1)));
                }
                // The two-pass GEMM at the other matrix shapes of 7B-8B prompts (Q4_K only).
                if self.format.ggml_type == Some(GgmlType::Q4_K) {
                    v.extend(PROMPT_SHAPES.iter().map(|&(n, k)| self.staged_case(512, n, k, 1)));
                }
                v
            }
            // The int8 GEMM of a few rows at the shapes of the GEMVs.
            Op::GemmQ8 => [4, 8, 16].iter().flat_map(|&m| LLM_SHAPES.iter().map(move |&(n, k)| self.case(m, n, k, 1))).collect(),
            Op::Dequant | Op::Gather => vec![self.case(1, 4096, 4096, 1)],
        }
    }

    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let format = Fmt(self.format);
        match self.op {
            Op::Gemv | Op::GemvQ8 | Op::GemmQ8 => describe_all(self.team_plans().into_iter().map(|p| match self.op {
                Op::GemmQ8 => MmPipeline::GemmQ8 { format, variant: p.variant, plan: p.plan, slots: p.slots },
                _ => MmPipeline::Gemv { format, variant: p.variant, plan: p.plan, act: p.act, epi: p.epi },
            })),
            Op::Gemm => {
                let mut keys = vec![MmPipeline::Gemm { format }, MmPipeline::Widen { format }];
                keys.extend(matrix::sample_pipelines(format));
                if self.format.native_gemm.is_some() {
                    // Its twin is the Portable GEMM above.
                    keys.push(MmPipeline::GemmNative { format });
                }
                let mut v = describe_all(keys);
                v.extend(describe_all([matrix::RunCheck(format)]));
                v.extend(describe_all(matrix::sample_pipelines(format).into_iter().filter_map(|k| match k {
                    MmPipeline::GemmMatrix { format, sg, tile } => Some(matrix::StageCheck { format, sg, tile }),
                    _ => None,
                })));
                v
            }
            Op::Dequant | Op::Gather => describe_all([MmPipeline::Dequant { format }, MmPipeline::Gather { format }]),
        }
    }

    /// Each listed team plan (but the Native ones) under the tuning that picks it, on a small
    /// case: the plain store on the grid's case of 33 rows (int8 activations: of whole 256-column
    /// groups where the plan takes the integer dot, else of one block), a fused epilogue on its
    /// self-check case of 33 or 34 rows, the int8 GEMM with `m` = its slots. Dequantise: the row
    /// lookup (a 3-chunk matrix), which the grid does not run.
    fn plan_cases(&self) -> Vec<PlanCase> {
        if matches!(self.op, Op::Dequant) {
            let q = k_quantum(self.format, false);
            let k = 3 * (q / gcd(q, 4) * 4);
            let case = Box::new(MatCase { format: self.format, op: Op::Gather, m: 1, n: 67, k, chunks: 3, staged: false });
            return vec![PlanCase::new(None, Tuning::default(), case)];
        }
        let ks = test_ks(self.format, self.op != Op::Gemv);
        let k_for = |act: Activations| match act {
            Activations::F32 => ks[1],
            Activations::Q8 => ks[0],
            // The integer dot's quad order: whole 256-column groups.
            Activations::Q8Int => ks.iter().copied().find(|k| k % 256 == 0).unwrap_or(256),
        };
        self.team_plans()
            .into_iter()
            .filter(|p| p.variant != Variant::Native)
            .map(|p| {
                let overrides = GemvTuning {
                    wg: Some(p.plan.wg),
                    rows: Some(p.plan.rows),
                    unroll: Some(p.plan.unroll),
                    team: (p.variant != Variant::Portable).then_some(p.plan.team),
                    planes: (p.variant == Variant::Portable).then_some(p.plan.team),
                };
                let k = k_for(p.act);
                let (tuning, case): (Tuning, Box<dyn Case>) = match self.op {
                    Op::GemmQ8 => (Tuning { gemm_q8: overrides, ..Tuning::default() }, self.case(p.slots as usize, 33, 256, 1)),
                    _ if p.epi == Epilogue::Store => (Tuning { gemv: overrides, ..Tuning::default() }, self.case(1, 33, k, 1)),
                    _ => {
                        let n = 33 + usize::from(p.epi.pairs());
                        (Tuning { gemv: overrides, ..Tuning::default() }, Box::new(super::check::GemvCheck { format: self.format, n, k, q8: self.op == Op::GemvQ8, epi: p.epi }))
                    }
                };
                PlanCase::new(Some(p.variant), tuning, case)
            })
            .collect()
    }
}

/// (rows, unroll) of the GEMV plans listed for the Portable and Subgroup variants (with the
/// default plan's invocations and teams; the Native twins' plans come from the format's entries).
const GEMV_PLANS: [(u32, u32); 5] = [(1, 1), (2, 2), (4, 2), (2, 1), (2, 4)];
/// (slots, rows, unroll) of the int8 GEMM plans listed for the Portable and Subgroup variants
/// (with the default GEMV plan's invocations and teams).
const GEMM_Q8_PLANS: [(u32, u32, u32); 7] = [(1, 1, 1), (2, 4, 2), (8, 1, 4), (8, 4, 2), (16, 2, 1), (16, 2, 2), (16, 4, 2)];

/// One listed team plan: the pipelines of a GEMV or int8 GEMM kernel, and what its plan case
/// runs.
#[derive(PartialEq)]
struct TeamPlan {
    variant: Variant,
    plan: GemvPlan,
    /// The GEMV's activations.
    act: Activations,
    /// The GEMV's epilogue (`Store` for the int8 GEMM).
    epi: Epilogue,
    /// The int8 GEMM's accumulator slots (0 for a GEMV).
    slots: u32,
}

impl MmKernel {
    /// The GEMV's activations (f32, or int8 in the quad order where the format has an integer dot).
    fn act(&self) -> Activations {
        if self.op == Op::Gemv {
            Activations::F32
        } else {
            Activations::q8_for(self.format, true)
        }
    }

    /// The one table of this team kernel's plans: [`Kernel::pipelines`] lists them,
    /// [`Kernel::plan_cases`] runs each (but the Native ones). GEMVs: [`GEMV_PLANS`] per variant
    /// (int8 activations: of the integer dot where the format has one, and the default plan of
    /// the dequantising path that the grid's ks off whole 256-column groups take) and, for each entry point of the format's
    /// Native GEMV, its plan as Subgroup (the Native twin) and as Native; the int8 GEMM:
    /// [`GEMM_Q8_PLANS`] and the default plans of the grid's slots (4, 8, 16) per variant.
    fn team_plans(&self) -> Vec<TeamPlan> {
        let mut v = Vec::new();
        let act = self.act();
        let store = |variant, plan, act, slots| TeamPlan { variant, plan, act, epi: Epilogue::Store, slots };
        for variant in [Variant::Portable, Variant::Subgroup] {
            if self.op == Op::GemmQ8 {
                v.extend(GEMM_Q8_PLANS.iter().map(|&(slots, rows, unroll)| store(variant, GemvPlan { rows, unroll, ..default_plan(variant) }, act, slots)));
                let caps = Caps::nominal();
                for slots in [4, 8, 16] {
                    let p = store(variant, gemm_q8_plan(&caps, variant, slots as usize), act, slots);
                    if !v.contains(&p) {
                        v.push(p);
                    }
                }
            } else {
                v.extend(GEMV_PLANS.iter().map(|&(rows, unroll)| store(variant, GemvPlan { rows, unroll, ..default_plan(variant) }, act, 0)));
                if act == Activations::Q8Int && k_quantum(self.format, true) % 256 != 0 {
                    v.push(store(variant, default_plan(variant), Activations::Q8, 0));
                }
            }
        }
        if self.op != Op::GemmQ8 {
            for &(rows, e, _) in native_gemv(self.format, act).map_or(&[][..], |n| n.entries) {
                let Some(epi) = Epilogue::of(e) else { continue };
                for variant in [Variant::Subgroup, Variant::Native] {
                    v.push(TeamPlan { variant, plan: native_plan(rows), act, epi, slots: 0 });
                }
            }
        }
        v
    }
}
