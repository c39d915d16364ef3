//! Test and bench cases of the int8 activation quantiser (see [`crate::suite`]): the GPU
//! quantiser bit for bit against the CPU one. (The GEMVs on int8 activations are the
//! weight-matrix family's, `mm_gemv_q8_<format>` / `mm_gemm_q8_<format>`.)

use super::*;
use crate::reference::q8 as r8;
use crate::suite::{compare, describe_all, guard_damage, guarded_f32, guarded_u32, Case, Check, Kernel, Prepared, Rng, POISON_F32, POISON_U32};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&QuantKernel, &NormQuantKernel, &PostNormKernel, &MergeQuantKernel]
}

impl Q8Activations {
    /// Upload a host quantisation (e.g. [`crate::reference::q8::quantize`]'s) in the GPU layout.
    pub fn upload(ctx: &Context, h: &r8::HostQ8) -> Result<Q8Activations> {
        let k = h.k();
        ensure(k > 0 && k % QB == 0 && h.d.len() == k / QB, || Error::Shape(format!("host q8: k = {k}, {} scales", h.d.len())))?;
        Ok(Q8Activations { k, rows: 1, x4: ctx.upload(&r8::pack_int4(h))?, xk: (k % QK_K == 0).then(|| ctx.upload(&r8::pack_q4k(h))).transpose()? })
    }
}

/// Activations of varied magnitude per block: normal values times 10^[-3, 2), a few exact or
/// near rounding ties, one block scaled far down.
fn random_x(rng: &mut Rng, k: usize) -> Vec<f32> {
    let mut x = rng.normal_vec(k);
    for blk in x.chunks_mut(QB) {
        let s = 10f32.powf(rng.uniform(-3.0, 2.0));
        blk.iter_mut().for_each(|v| *v *= s);
        if rng.u32(3) == 0 {
            // amax = 127 * 2^e, then values at (m + 1/2) * d.
            let e = rng.u32(8) as i32 - 4;
            blk[0] = 127.0 * 2f32.powi(e);
            let d = blk[0] * r8::INV127;
            for v in blk.iter_mut().skip(1).step_by(3) {
                *v = (2 * rng.u32(127) + 1) as f32 * d / 2.0 * if rng.u32(2) == 0 { 1.0 } else { -1.0 };
            }
        }
    }
    x
}

// ---------------------------------------------------------------------------------------------
// Quantiser

struct QuantKernel;
/// `m` of `rows` rows of `k` quantised (`quantize_rows`; `m == rows`: `quantize_activations`).
struct QuantCase {
    k: usize,
    rows: usize,
    m: usize,
}

fn quant_case(k: usize, rows: usize, m: usize) -> Box<dyn Case> {
    Box::new(QuantCase { k, rows, m })
}

impl Kernel for QuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &QUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<_> = [32, 96, 256, 1056, 2560, 4096 + 256].iter().map(|&k| quant_case(k, 1, 1)).collect();
        // Several rows: all of them, and 3 of 5 (the Q4_K-order planes keep the 5-row stride).
        v.extend([quant_case(96, 3, 3), quant_case(512, 4, 4), quant_case(768, 5, 3)]);
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [4096, 14336].iter().map(|&k| quant_case(k, 1, 1)).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Q8Pipeline::Quantize])
    }
}

struct QuantPrepared {
    x: GpuBuffer<f32>,
    m: usize,
    out: Q8Activations,
    expect: r8::HostQ8,
}

impl Prepared for QuantPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        if self.m == self.out.rows {
            quantize_activations(b, &self.x, &self.out)
        } else {
            quantize_rows(b, &self.x, &self.out, self.m)
        }
    }
    /// Bit equality of both layouts with the CPU quantiser (rows past `m` untouched: poison),
    /// and intact guards.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let mut x4 = r8::pack_int4(&self.expect);
        x4.resize(self.out.rows * self.out.k / 2, POISON_U32);
        let (mut note, mut guard) = word_diff(&ctx.read(&self.out.x4)?, &x4, "int4 order");
        if let Some(xk) = &self.out.xk {
            // The m rows' planes of 16-byte records, each at the buffer's plane stride.
            let (mq, q) = (self.m * self.out.k / 64, self.out.quads());
            let packed = r8::pack_q4k(&self.expect);
            let mut want = vec![POISON_U32; q * XK_WORDS_PER_QUAD];
            for t in 0..8 {
                want[t * q * 4..(t * q + mq) * 4].copy_from_slice(&packed[t * mq * 4..(t + 1) * mq * 4]);
            }
            let (n2, g2) = word_diff(&ctx.read(xk)?, &want, "q4k order");
            guard += g2;
            if !n2.is_empty() {
                note = if note.is_empty() { n2 } else { format!("{note}; {n2}") };
            }
        }
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: guard, note })
    }
}

impl Case for QuantCase {
    fn name(&self) -> String {
        match self.rows {
            1 => format!("k={}", self.k),
            _ => format!("k={} m={} rows={}", self.k, self.m, self.rows),
        }
    }
    /// x read, both orders written.
    fn bytes(&self) -> u64 {
        let c = self.m * self.k;
        (c * 4 + c * 2 + if self.k % QK_K == 0 { c * 2 } else { 0 }) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let (k, rows) = (self.k, self.rows);
        let mut x = random_x(rng, self.m * k);
        if k >= 96 {
            x[32..64].iter_mut().for_each(|v| *v = 0.0); // a zero block: d = 0, codes 0
        }
        // Per row, as one vector: blocks never straddle rows.
        let expect = r8::quantize(&x);
        let out = Q8Activations { k, rows, x4: guarded_u32(ctx, rows * k / 2)?, xk: (k % QK_K == 0).then(|| guarded_u32(ctx, rows * k / 64 * XK_WORDS_PER_QUAD)).transpose()? };
        Ok(Box::new(QuantPrepared { x: ctx.upload(&x)?, m: self.m, out, expect }))
    }
}

// ---------------------------------------------------------------------------------------------
// RMSNorm + quantiser

struct NormQuantKernel;
struct NormQuantCase {
    k: usize,
}

impl Kernel for NormQuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &NORM_QUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        [32, 96, 256, 1056, 4096 + 256].iter().map(|&k| Box::new(NormQuantCase { k }) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [4096].iter().map(|&k| Box::new(NormQuantCase { k }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Q8Pipeline::NormQuantize])
    }
}

struct NormQuantPrepared {
    x: GpuBuffer<f32>,
    w: GpuBuffer<f32>,
    eps: f32,
    xn: GpuBuffer<f32>,
    out: Q8Activations,
    /// f64 normalised values and their magnitudes.
    reference: (Vec<f64>, Vec<f64>),
}

impl Prepared for NormQuantPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        rmsnorm_quantize(b, &self.x, &self.w, self.eps, &self.xn, &self.out)
    }
    /// `xn` against the f64 RMSNorm within the RMSNorm kernel's own tolerance (1e-5 of each
    /// value), and both int8 layouts bit-equal to the CPU quantiser's on that `xn` (what the
    /// GEMVs read is exactly the quantisation of the values written); intact guards.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let k = self.out.k;
        let xn = ctx.read(&self.xn)?;
        let mut c = compare(&xn, &self.reference.0, &self.reference.1, 1e-5);
        c.guard_damage = guard_damage(&xn, k, POISON_F32);
        let (note, guard) = q8_diff(ctx, &xn, &self.out)?;
        c.guard_damage += guard;
        c.note = note;
        Ok(c)
    }
}

impl Case for NormQuantCase {
    fn name(&self) -> String {
        format!("k={}", self.k)
    }
    /// x and w read, xn and both orders written.
    fn bytes(&self) -> u64 {
        (self.k * 12 + self.k * 2 + if self.k % QK_K == 0 { self.k * 2 } else { 0 }) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let k = self.k;
        let s = 10f32.powf(rng.uniform(-2.0, 2.0));
        let mut x: Vec<f32> = rng.normal_vec(k).into_iter().map(|v| v * s).collect();
        if k >= 96 {
            x[32..64].iter_mut().for_each(|v| *v = 0.0); // a zero block: d = 0, codes 0
        }
        let w = rng.uniform_vec(k, -2.0, 2.0);
        let eps = rng.uniform(1e-6, 1e-5);
        let reference = crate::kernels::elementwise::reference_rmsnorm(&x, &w, 1, eps);
        let out = guarded_q8(ctx, k)?;
        Ok(Box::new(NormQuantPrepared { x: ctx.upload(&x)?, w: ctx.upload(&w)?, eps, xn: guarded_f32(ctx, k)?, out, reference }))
    }
}

// ---------------------------------------------------------------------------------------------
// Post-norm residual add + RMSNorm (+ quantiser)

struct PostNormKernel;
/// One row of `k`; `quantize`: with the int8 output.
struct PostNormCase {
    k: usize,
    quantize: bool,
}

impl Kernel for PostNormKernel {
    fn info(&self) -> &'static KernelInfo {
        &POST_NORM
    }
    /// Rows of one to several workgroups, with and without the Q4_K order (k % 256), and the
    /// f32-only form (k = 2560: Gemma-3-4B's hidden size).
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        [(32, true), (96, false), (256, true), (1056, true), (2560, true), (2560, false), (4096 + 256, true)]
            .into_iter()
            .map(|(k, quantize)| Box::new(PostNormCase { k, quantize }) as Box<dyn Case>)
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [(2560, true), (4096, true)].into_iter().map(|(k, quantize)| Box::new(PostNormCase { k, quantize }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([false, true].map(|quantize| Q8Pipeline::PostNorm { quantize }))
    }
}

struct PostNormPrepared {
    k: usize,
    x: GpuBuffer<f32>,
    a: GpuBuffer<f32>,
    post: GpuBuffer<f32>,
    norm: GpuBuffer<f32>,
    eps: f32,
    x_out: GpuBuffer<f32>,
    xn: GpuBuffer<f32>,
    out: Option<Q8Activations>,
    /// f64 `x + rmsnorm(a) * post` and its magnitudes.
    reference: (Vec<f64>, Vec<f64>),
    norm_host: Vec<f32>,
}

impl Prepared for PostNormPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        let p = PostNorm { x: &self.x, a: &self.a, post: &self.post, x_out: &self.x_out, norm: &self.norm, xn: &self.xn, k: self.k, eps: self.eps };
        post_norm(b, &p, self.out.as_ref())
    }
    /// `x_out` against the f64 residual add within the RMSNorm's tolerance (1e-5 of the
    /// magnitudes added); `xn` against the f64 RMSNorm of the `x_out` written, within the same
    /// tolerance; both int8 layouts (when quantised) bit-equal to the CPU quantiser's on the `xn`
    /// written; every guard intact.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let k = self.k;
        let x_out = ctx.read(&self.x_out)?;
        let residual = compare(&x_out, &self.reference.0, &self.reference.1, 1e-5);
        let want = crate::kernels::elementwise::reference_rmsnorm(&x_out[..k], &self.norm_host, 1, self.eps);
        let xn = ctx.read(&self.xn)?;
        let mut normed = compare(&xn, &want.0, &want.1, 1e-5);
        if let Some(out) = &self.out {
            let (note, guard) = q8_diff(ctx, &xn, out)?;
            normed.guard_damage += guard;
            normed.note = note;
        }
        Ok(residual.and(normed))
    }
}

impl Case for PostNormCase {
    fn name(&self) -> String {
        format!("k={}{}", self.k, if self.quantize { "" } else { " f32" })
    }
    /// x, a and both weights read; x_out and xn written, and both int8 orders when quantised.
    fn bytes(&self) -> u64 {
        let q8 = if self.quantize { self.k * 2 + if self.k % QK_K == 0 { self.k * 2 } else { 0 } } else { 0 };
        (self.k * 24 + q8) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let k = self.k;
        // The block's output at any scale (the post-norm undoes it), the residual at its own.
        let s = 10f32.powf(rng.uniform(-2.0, 2.0));
        let a: Vec<f32> = rng.normal_vec(k).into_iter().map(|v| v * s).collect();
        let r = 10f32.powf(rng.uniform(-1.0, 1.0));
        let x: Vec<f32> = rng.normal_vec(k).into_iter().map(|v| v * r).collect();
        let (post, norm) = (rng.uniform_vec(k, -2.0, 2.0), rng.uniform_vec(k, 0.0, 3.0));
        let eps = rng.uniform(1e-6, 1e-5);
        let (mut sum, mut mag) = crate::kernels::elementwise::reference_rmsnorm(&a, &post, 1, eps);
        for ((s, m), &v) in sum.iter_mut().zip(&mut mag).zip(&x) {
            *s += v as f64;
            *m += (v as f64).abs();
        }
        let out = if self.quantize { Some(guarded_q8(ctx, k)?) } else { None };
        Ok(Box::new(PostNormPrepared {
            k,
            x: ctx.upload(&x)?,
            a: ctx.upload(&a)?,
            post: ctx.upload(&post)?,
            norm: ctx.upload(&norm)?,
            eps,
            x_out: guarded_f32(ctx, k)?,
            xn: guarded_f32(ctx, k)?,
            out,
            reference: (sum, mag),
            norm_host: norm,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Split-K attention merge + quantiser

struct MergeQuantKernel;
/// The partials of `heads` heads of `d`, `nchunks` chunks each.
struct MergeQuantCase {
    heads: usize,
    nchunks: usize,
    d: usize,
}

fn merge_case(heads: usize, nchunks: usize, d: usize) -> Box<dyn Case> {
    Box::new(MergeQuantCase { heads, nchunks, d })
}

impl Kernel for MergeQuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &MERGE_QUANTIZE
    }
    /// One chunk; odd pair counts (a poisoned pad pair after them); chunk counts below, at and
    /// past the 8 the kernel keeps in flight; k without the Q4_K order (192, 480); head sizes
    /// 32 to 256; Llama-3.2-1B's and Llama-3-8B's attention outputs.
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        [(1, 1, 32), (3, 5, 64), (4, 9, 64), (2, 17, 128), (5, 3, 96), (2, 66, 256), (32, 30, 64), (32, 8, 128)].map(|(h, n, d)| merge_case(h, n, d)).into()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [(32, 30, 64), (32, 32, 128), (32, 66, 128)].map(|(h, n, d)| merge_case(h, n, d)).into()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Q8Pipeline::MergeQuantize])
    }
}

struct MergeQuantPrepared {
    part_o: GpuBuffer<f32>,
    part_ml: GpuBuffer<[f32; 2]>,
    case: (usize, usize, usize),
    out: GpuBuffer<f32>,
    xq: Q8Activations,
    /// f64 merged values and their magnitudes (sum |o_c| 2^(m_c - M) / L).
    reference: (Vec<f64>, Vec<f64>),
}

impl Prepared for MergeQuantPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        let (heads, nchunks, d) = self.case;
        merge_quantize(b, &MergeParts { part_o: &self.part_o, part_ml: &self.part_ml, heads, nchunks, d }, &self.out, &self.xq)
    }
    /// `out` against the f64 merge (f32 sums of up to 66 terms: 1e-5 of the magnitude), both
    /// int8 layouts bit-equal to the CPU quantiser's on the `out` written; intact guards.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let k = self.xq.k;
        let out = ctx.read(&self.out)?;
        let mut c = compare(&out, &self.reference.0, &self.reference.1, 1e-5);
        c.guard_damage = guard_damage(&out, k, POISON_F32);
        let (note, guard) = q8_diff(ctx, &out, &self.xq)?;
        c.guard_damage += guard;
        c.note = note;
        Ok(c)
    }
}

impl Case for MergeQuantCase {
    fn name(&self) -> String {
        format!("heads={} nchunks={} d={}", self.heads, self.nchunks, self.d)
    }
    /// The partials read, out and both orders written.
    fn bytes(&self) -> u64 {
        let k = self.heads * self.d;
        (self.heads * self.nchunks * (self.d + 2) * 4 + k * 4 + k * 2 + if k % QK_K == 0 { k * 2 } else { 0 }) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let (heads, n, d) = (self.heads, self.nchunks, self.d);
        let rows = heads * n;
        // Running maxima spread over 2^-12..2^12 of each other, sums of 1..64 keys' weights.
        let mut ml: Vec<[f32; 2]> = (0..rows).map(|_| [rng.uniform(-12.0, 12.0), rng.uniform(1.0, 64.0)]).collect();
        // The pad pair: NaN wherever a read past the pairs would land.
        ml.resize(rows.next_multiple_of(2), [f32::from_bits(POISON_F32); 2]);
        let o: Vec<f32> = rng.normal_vec(rows * d).into_iter().map(|v| v * 8.0).collect();
        let (mut want, mut mag) = (vec![0.0f64; heads * d], vec![0.0f64; heads * d]);
        for h in 0..heads {
            let m = (0..n).map(|c| ml[h * n + c][0] as f64).fold(f64::MIN, f64::max);
            let w: Vec<f64> = (0..n).map(|c| (ml[h * n + c][0] as f64 - m).exp2()).collect();
            let l: f64 = (0..n).map(|c| ml[h * n + c][1] as f64 * w[c]).sum();
            for e in 0..d {
                for c in 0..n {
                    let v = o[(h * n + c) * d + e] as f64 * w[c];
                    want[h * d + e] += v / l;
                    mag[h * d + e] += v.abs() / l;
                }
            }
        }
        Ok(Box::new(MergeQuantPrepared {
            part_o: ctx.upload(&o)?,
            part_ml: ctx.upload(&ml)?,
            case: (heads, n, d),
            out: guarded_f32(ctx, heads * d)?,
            xq: guarded_q8(ctx, heads * d)?,
            reference: (want, mag),
        }))
    }
}
