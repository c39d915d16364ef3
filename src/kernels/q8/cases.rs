//! Test and bench cases of the q8 family (see [`crate::suite`]).
//!
//! The GEMV cases quantise x on the CPU and upload it ([`Q8Activations::upload`]), so they test
//! the GEMV alone (the quantiser's own cases check the GPU quantiser bit for bit against the CPU
//! one). Each GEMV output is checked twice: against the f64 reference of exactly what the GPU
//! computes on the quantised x (tolerance 1e-5 of the operand magnitudes, as the f32 GEMVs), and
//! against the exact f32-activation product within the derived bound
//! `sum_c |w_c| * d_b(c) / 2` plus the same f32 allowance.

use super::*;
use crate::formats::q4k::{dequantize_row, BlockQ4K};
use crate::kernels::int4::Int4Mode;
use crate::kernels::int4::{random_host, HostInt4};
use crate::kernels::q4k::{operand_magnitudes, random_blocks};
use crate::reference::{self, q8 as r8};
use crate::suite::{compare, describe_all, guard_damage, guarded_f32, guarded_u32, Case, Check, Kernel, Prepared, Rng, POISON_F32, POISON_U32};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&QuantKernel, &NormQuantKernel, &Int4Kernel, &Q4kKernel]
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

fn word_diff(got: &[u32], expect: &[u32], what: &str) -> (String, usize) {
    let n = expect.len();
    let differ = got.iter().zip(expect).filter(|(a, b)| a != b).count();
    let note = match got.iter().zip(expect).position(|(a, b)| a != b) {
        Some(i) => format!("{what}: {differ} words differ from the CPU quantiser, first at {i}: {:#010x} vs {:#010x}", got[i], expect[i]),
        None => String::new(),
    };
    (note, guard_damage(got, n, POISON_U32))
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
        let expect = r8::quantize(&xn[..k]);
        let mut notes = Vec::new();
        let (n1, g1) = word_diff(&ctx.read(&self.out.x4)?, &r8::pack_int4(&expect), "int4 order");
        notes.push(n1);
        c.guard_damage += g1;
        if let Some(xk) = &self.out.xk {
            let (n2, g2) = word_diff(&ctx.read(xk)?, &r8::pack_q4k(&expect), "q4k order");
            notes.push(n2);
            c.guard_damage += g2;
        }
        c.note = notes.into_iter().filter(|n| !n.is_empty()).collect::<Vec<_>>().join("; ");
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
        let out = Q8Activations { k, rows: 1, x4: guarded_u32(ctx, k / 2)?, xk: (k % QK_K == 0).then(|| guarded_u32(ctx, k / 64 * XK_WORDS_PER_QUAD)).transpose()? };
        Ok(Box::new(NormQuantPrepared { x: ctx.upload(&x)?, w: ctx.upload(&w)?, eps, xn: guarded_f32(ctx, k)?, out, reference }))
    }
}

// ---------------------------------------------------------------------------------------------
// GEMVs

/// Output of a q8 GEMV case and its two references.
struct GemvCheck {
    y: GpuBuffer<f32>,
    q8: (Vec<f64>, Vec<f64>),
    /// Exact product, and the allowed deviation from it.
    exact: Vec<f64>,
    allow: Vec<f64>,
}

impl GemvCheck {
    /// `w`/`wmag`: exact weights and operand magnitudes of row r, column c.
    /// `q8`: the reference on quantised x (n values and magnitudes); `x`: the k activations.
    fn new(ctx: &Context, x: &[f32], xq: &r8::HostQ8, q8: (Vec<f64>, Vec<f64>), w: impl Fn(usize, usize) -> f64, wmag: impl Fn(usize, usize) -> f64) -> Result<GemvCheck> {
        let (n, k) = (q8.0.len(), x.len());
        let (exact, emag) = reference::gemv(n, k, &w, wmag, x);
        let bound = r8::rounding_bound(n, k, &w, xq);
        let allow = (0..n).map(|r| bound[r] + 1e-5 * (q8.1[r] + emag[r])).collect();
        Ok(GemvCheck { y: guarded_f32(ctx, n)?, q8, exact, allow })
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let y = ctx.read(&self.y)?;
        let own = compare(&y, &self.q8.0, &self.q8.1, 1e-5);
        let mut vs_exact = compare(&y, &self.exact, &self.allow, 1.0);
        vs_exact.guard_damage = 0; // counted once
        Ok(own.and(vs_exact))
    }
}

/// The default plan's shape with `rows` rows per team (for the offline shader checks).
fn default_like(variant: Variant, rows: u32) -> GemvPlan {
    GemvPlan { wg: 256, rows, unroll: 2, team: if variant == Variant::Portable { 32 } else { 1 } }
}

const LLM_SHAPES: [(usize, usize); 3] = [(4096, 4096), (14336, 4096), (4096, 14336)];

struct Int4Kernel;
struct Int4Case {
    n: usize,
    k: usize,
    g: usize,
    mode: Int4Mode,
    zeros: bool,
}

const MODES: [(Int4Mode, bool); 3] = [(Int4Mode::Signed, false), (Int4Mode::Signed, true), (Int4Mode::Asymmetric, true)];

impl Kernel for Int4Kernel {
    fn info(&self) -> &'static KernelInfo {
        &INT4_GEMV
    }
    /// Odd n (partial row blocks), k from one x block to several interleave blocks (1024
    /// columns each, the last partial), group sizes 32..128 incl. a non-power-of-two (96) and
    /// groups that straddle interleave blocks, every mode.
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        let (ns, ks, gs) = ([1, 3, 33, 67], [32, 96, 1056, 2080], [32, 64, 96, 128]);
        for (i, (&n, &k)) in ns.iter().flat_map(|n| ks.iter().map(move |k| (n, k))).enumerate() {
            let (mode, zeros) = MODES[i % 3];
            v.push(Box::new(Int4Case { n, k, g: gs[(i / 3) % 4], mode, zeros }));
        }
        v.push(Box::new(Int4Case { n: 5, k: 4096 + 256, g: 128, mode: Int4Mode::Asymmetric, zeros: true }));
        v.push(Box::new(Int4Case { n: 130, k: 512, g: 32, mode: Int4Mode::Signed, zeros: false }));
        // k >= 8192 with n < 8192: the whole-workgroup-team plan.
        v.push(Box::new(Int4Case { n: 9, k: 8192 + 96, g: 32, mode: Int4Mode::Signed, zeros: true }));
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for g in [32, 128] {
            for (n, k) in LLM_SHAPES {
                v.push(Box::new(Int4Case { n, k, g, mode: Int4Mode::Signed, zeros: false }));
            }
        }
        v
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let mut keys = Vec::new();
        for variant in [Variant::Portable, Variant::Subgroup] {
            for (rows, gshift, zeros) in [(1, 2, false), (2, 4, true), (4, 99, true)] {
                keys.push(Q8Pipeline::Int4Gemv { variant, plan: default_like(variant, rows), gshift, zeros });
            }
            let wide = if variant == Variant::Portable { GemvPlan { wg: 256, rows: 4, unroll: 2, team: 256 } } else { GemvPlan { wg: 128, rows: 2, unroll: 2, team: 0 } };
            keys.push(Q8Pipeline::Int4Gemv { variant, plan: wide, gshift: 2, zeros: false });
        }
        describe_all(keys)
    }
}

struct Int4Prepared {
    weights: Vec<Int4Matrix>,
    xq: Q8Activations,
    out: GemvCheck,
}

impl Prepared for Int4Prepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        int4_gemv(b, &self.weights[copy % self.weights.len()], &self.xq, &self.out.y)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        self.out.check(ctx)
    }
}

fn mode_name(mode: Int4Mode, zeros: bool) -> &'static str {
    match (mode, zeros) {
        (Int4Mode::Signed, false) => "signed",
        (Int4Mode::Signed, true) => "signed+zeros",
        (Int4Mode::Asymmetric, _) => "asym",
    }
}

impl Case for Int4Case {
    fn name(&self) -> String {
        format!("n={} k={} g={} {}", self.n, self.k, self.g, mode_name(self.mode, self.zeros))
    }
    /// Codes, scales (and zeros), the q8 x (2 bytes per column) and y.
    fn bytes(&self) -> u64 {
        let ng = self.k.div_ceil(self.g);
        let scale_bytes = (self.n * ng * 4 * if self.zeros { 2 } else { 1 }) as u64;
        (self.n * self.k / 2) as u64 + scale_bytes + (2 * self.k + 4 * self.n) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, k) = (self.n, self.k);
        let host: HostInt4 = random_host(rng, n, k, self.g, self.mode, self.zeros);
        let x = random_x(rng, k);
        let xq = r8::quantize(&x);
        let out = GemvCheck::new(ctx, &x, &xq, r8::int4_gemv(&host, &xq), |r, c| host.value(r, c), |r, c| host.magnitude(r, c))?;
        let mut weights = vec![Int4Matrix::upload(ctx, &host)?];
        for _ in 1..copies {
            weights.push(Int4Matrix::upload(ctx, &random_host(rng, n, k, self.g, self.mode, self.zeros))?);
        }
        Ok(Box::new(Int4Prepared { weights, xq: Q8Activations::upload(ctx, &xq)?, out }))
    }
}

struct Q4kKernel;
struct Q4kCase {
    n: usize,
    k: usize,
}

impl Kernel for Q4kKernel {
    fn info(&self) -> &'static KernelInfo {
        &Q4K_GEMV
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for n in [1, 3, 33, 67] {
            for k in [256, 768, 2560] {
                v.push(Box::new(Q4kCase { n, k }));
            }
        }
        v.push(Box::new(Q4kCase { n: 130, k: 512 }));
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        LLM_SHAPES.iter().map(|&(n, k)| Box::new(Q4kCase { n, k }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let keys = [Variant::Portable, Variant::Subgroup].into_iter().flat_map(|variant| [1, 2, 4].map(|rows| Q8Pipeline::Q4kGemv { variant, plan: default_like(variant, rows) }));
        describe_all(keys)
    }
}

struct Q4kPrepared {
    weights: Vec<Q4kMatrix>,
    xq: Q8Activations,
    out: GemvCheck,
}

impl Prepared for Q4kPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        q4k_gemv(b, &self.weights[copy % self.weights.len()], &self.xq, &self.out.y)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        self.out.check(ctx)
    }
}

impl Case for Q4kCase {
    fn name(&self) -> String {
        format!("n={} k={}", self.n, self.k)
    }
    /// 144 bytes per 256 weights, the q8 x (2 bytes per column) and y.
    fn bytes(&self) -> u64 {
        (self.n * self.k / QK_K * crate::formats::q4k::BLOCK_BYTES + 2 * self.k + 4 * self.n) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, k) = (self.n, self.k);
        let blocks: Vec<BlockQ4K> = random_blocks(rng, n * k / QK_K);
        let x = random_x(rng, k);
        let xq = r8::quantize(&x);
        let (w, mag) = (dequantize_row(&blocks), operand_magnitudes(&blocks));
        let out = GemvCheck::new(ctx, &x, &xq, r8::q4k_gemv(n, k, &blocks, &xq), |r, c| w[r * k + c] as f64, |r, c| mag[r * k + c])?;
        let mut weights = vec![Q4kMatrix::upload(ctx, n, k, &blocks)?];
        for _ in 1..copies {
            weights.push(Q4kMatrix::upload(ctx, n, k, &random_blocks(rng, n * k / QK_K))?);
        }
        Ok(Box::new(Q4kPrepared { weights, xq: Q8Activations::upload(ctx, &xq)?, out }))
    }
}
