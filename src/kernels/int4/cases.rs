//! Test and bench cases of the INT4 family (see [`crate::suite`]).

use super::*;
use crate::reference;
use crate::suite::{compare, describe_all, guard_damage, guarded_f32, guarded_u32, Case, Check, Kernel, MatmulPrepared, MatmulWeights, Prepared, Rng, POISON_U32};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&GemvKernel, &GemmKernel, &QuantKernel, &DequantKernel]
}

/// Random valid weights: random codes, positive scales, optional zeros.
pub fn random_host(rng: &mut Rng, n: usize, k: usize, group_size: usize, mode: Int4Mode, zeros: bool) -> HostInt4 {
    let ng = k.div_ceil(group_size);
    let mut codes = rng.bytes(n * k.div_ceil(2));
    if k % 2 == 1 {
        for r in 0..n {
            codes[r * k.div_ceil(2) + k / 2] &= 0x0f;
        }
    }
    let zero_range = if mode == Int4Mode::Asymmetric { (0.0, 15.0) } else { (-1.5, 1.5) };
    HostInt4 { n, k, group_size, mode, codes, scales: rng.uniform_vec(n * ng, 0.002, 0.05), zeros: zeros.then(|| rng.uniform_vec(n * ng, zero_range.0, zero_range.1)) }
}

const MODES: [(Int4Mode, bool); 3] = [(Int4Mode::Signed, false), (Int4Mode::Signed, true), (Int4Mode::Asymmetric, true)];
const DIMS: [usize; 6] = [1, 3, 31, 33, 255, 1000];
const GROUPS: [usize; 4] = [32, 64, 128, 7];

fn mode_name(mode: Int4Mode, zeros: bool) -> &'static str {
    match (mode, zeros) {
        (Int4Mode::Signed, false) => "signed",
        (Int4Mode::Signed, true) => "signed+zeros",
        (Int4Mode::Asymmetric, _) => "asym",
    }
}

/// Shape grid: every (n, k) of DIMS x DIMS, cycling group sizes and modes, plus every
/// group size x mode at one odd shape.
fn grid() -> Vec<(usize, usize, usize, Int4Mode, bool)> {
    let mut v = Vec::new();
    for (i, (&n, &k)) in DIMS.iter().flat_map(|n| DIMS.iter().map(move |k| (n, k))).enumerate() {
        let (mode, z) = MODES[(i / 4) % 3];
        v.push((n, k, GROUPS[i % 4], mode, z));
    }
    for &g in &GROUPS {
        for &(mode, z) in &MODES {
            v.push((33, 517, g, mode, z));
        }
    }
    // Several interleave blocks (1024 columns each), the last one partial.
    v.push((7, 2600, 40, Int4Mode::Signed, false));
    v.push((5, 4096 + 264, 128, Int4Mode::Asymmetric, true));
    v
}

const LLM_SHAPES: [(usize, usize); 3] = [(4096, 4096), (14336, 4096), (4096, 14336)];

struct GemvKernel;
struct GemvCase {
    n: usize,
    k: usize,
    g: usize,
    mode: Int4Mode,
    zeros: bool,
}

impl Kernel for GemvKernel {
    fn info(&self) -> &'static KernelInfo {
        &GEMV
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        grid().into_iter().map(|(n, k, g, mode, zeros)| Box::new(GemvCase { n, k, g, mode, zeros }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let mut keys = Vec::new();
        for (gmode, gshift) in [(0, 2), (0, 99), (1, 99)] {
            for variant in [Variant::Portable, Variant::Subgroup] {
                let plan = GemvPlan { wg: 256, rows: 2, unroll: 2, team: if variant == Variant::Portable { 32 } else { 1 } };
                keys.push(Int4Pipeline::Gemv { variant, plan, gmode, gshift });
            }
            // The Native twin (workgroup teams) is one of the Subgroup pipelines.
            keys.push(Int4Pipeline::Gemv { variant: Variant::Subgroup, plan: GemvPlan::NATIVE, gmode, gshift });
            keys.push(Int4Pipeline::Gemv { variant: Variant::Native, plan: GemvPlan::NATIVE, gmode, gshift });
        }
        describe_all(keys)
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for g in [32, 128] {
            for (n, k) in LLM_SHAPES {
                v.push(Box::new(GemvCase { n, k, g, mode: Int4Mode::Signed, zeros: false }));
            }
        }
        v
    }
}

impl MatmulWeights for Int4Matrix {
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        matmul(b, self, x, y, m)
    }
}

#[allow(clippy::too_many_arguments)] // one case's shape, spelled out
fn setup_mat(ctx: &Context, rng: &mut Rng, copies: usize, m: usize, n: usize, k: usize, g: usize, mode: Int4Mode, zeros: bool) -> Result<Box<dyn Prepared>> {
    let host = random_host(rng, n, k, g, mode, zeros);
    let x = rng.uniform_vec(m * k, -1.0, 1.0);
    let reference = if m == 1 {
        reference::gemv(n, k, |r, c| host.value(r, c), |r, c| host.magnitude(r, c), &x)
    } else {
        reference::gemm(m, n, k, |r, c| host.value(r, c), |r, c| host.magnitude(r, c), &x)
    };
    let mut weights = vec![Int4Matrix::upload(ctx, &host)?];
    for _ in 1..copies {
        weights.push(Int4Matrix::upload(ctx, &random_host(rng, n, k, g, mode, zeros))?);
    }
    Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, m * n)?, m, reference, tol: 1e-5 }))
}

impl Case for GemvCase {
    fn name(&self) -> String {
        format!("n={} k={} g={} {}", self.n, self.k, self.g, mode_name(self.mode, self.zeros))
    }
    fn bytes(&self) -> u64 {
        let ng = self.k.div_ceil(self.g);
        let scale_bytes = (self.n * ng * 4 * if self.zeros { 2 } else { 1 }) as u64;
        (self.n * self.k.div_ceil(32) * 16) as u64 + scale_bytes + 4 * (self.k + self.n) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        setup_mat(ctx, rng, copies, 1, self.n, self.k, self.g, self.mode, self.zeros)
    }
}

struct GemmKernel;
struct GemmCase {
    m: usize,
    n: usize,
    k: usize,
    g: usize,
    mode: Int4Mode,
    zeros: bool,
}

impl Kernel for GemmKernel {
    fn info(&self) -> &'static KernelInfo {
        &GEMM
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        // (2, 33, 517) and (5, 70, 2000) take the split-K path (2 and 7 splits), the others one pass.
        let shapes = [(2, 33, 517, 32), (3, 1, 1, 7), (7, 65, 100, 64), (16, 64, 64, 128), (17, 31, 255, 7), (33, 100, 33, 32), (64, 129, 257, 64), (5, 70, 2000, 64)];
        shapes
            .iter()
            .enumerate()
            .map(|(i, &(m, n, k, g))| {
                let (mode, zeros) = MODES[i % 3];
                Box::new(GemmCase { m, n, k, g, mode, zeros }) as Box<dyn Case>
            })
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(GemmCase { m: 16, n: 4096, k: 4096, g: 128, mode: Int4Mode::Signed, zeros: false })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let mut v = describe_all([Int4Pipeline::Gemm]);
        v.extend(describe_all([crate::kernels::splitk::SplitReduce]));
        v
    }
}

impl Case for GemmCase {
    fn name(&self) -> String {
        format!("m={} n={} k={} g={} {}", self.m, self.n, self.k, self.g, mode_name(self.mode, self.zeros))
    }
    fn bytes(&self) -> u64 {
        (self.n * self.k.div_ceil(32) * 16 + self.n * self.k.div_ceil(self.g) * 4 + 4 * self.m * (self.k + self.n)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        setup_mat(ctx, rng, copies, self.m, self.n, self.k, self.g, self.mode, self.zeros)
    }
}

struct QuantKernel;
struct QuantCase {
    n: usize,
    k: usize,
    g: usize,
    mode: Int4Mode,
    f16: bool,
}

impl Kernel for QuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &QUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(1, 1, 32), (3, 31, 7), (33, 1000, 32), (31, 255, 64), (5, 1000, 128), (17, 33, 33)];
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for (i, &(n, k, g)) in shapes.iter().enumerate() {
            for mode in [Int4Mode::Signed, Int4Mode::Asymmetric] {
                v.push(Box::new(QuantCase { n, k, g, mode, f16: i % 2 == 1 }));
            }
        }
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(QuantCase { n: 4096, k: 4096, g: 128, mode: Int4Mode::Signed, f16: false })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let keys = [false, true].into_iter().flat_map(|f16| {
            [Variant::Portable, Variant::Subgroup, Variant::Native]
                .into_iter()
                .flat_map(move |variant| [Int4Pipeline::Scales { f16, variant }, Int4Pipeline::Codes { f16, variant }])
        });
        describe_all(keys)
    }
}

struct QuantPrepared<T: QuantSource> {
    src: GpuBuffer<T>,
    out: Int4Matrix,
    expect: HostInt4,
}

impl<T: QuantSource> Prepared for QuantPrepared<T> {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        quantize(b, &self.src, &self.out)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = self.out.download(ctx)?;
        let e = &self.expect;
        let code_diff = (0..e.n).flat_map(|r| (0..e.k).map(move |c| (r, c))).filter(|&(r, c)| got.code(r, c) != e.code(r, c)).count();
        let scale_diff = got.scales.iter().zip(&e.scales).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        let zero_diff = match (&got.zeros, &e.zeros) {
            (Some(a), Some(b)) => a.iter().zip(b).filter(|(a, b)| a.to_bits() != b.to_bits()).count(),
            _ => 0,
        };
        let mut note = String::new();
        if code_diff + scale_diff + zero_diff > 0 {
            note = format!("{code_diff} codes, {scale_diff} scales, {zero_diff} zeros differ from the CPU quantiser");
        }
        // Guard: padding nibbles of each row must be 0, and the buffers' tails untouched.
        let raw = ctx.read(self.out.codes())?;
        let rw = self.out.row_words();
        let words = crate::kernels::interleave::deinterleave(&raw[..e.n * rw], rw);
        let pad_bad = (0..e.n).flat_map(|r| (e.k..rw * 8).map(move |c| (r, c))).filter(|&(r, c)| (words[r * rw + c / 8] >> (4 * (c % 8))) & 15 != 0).count();
        let guard = guard_damage(&raw, e.n * rw, POISON_U32) + pad_bad;
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: guard, note })
    }
}

impl Case for QuantCase {
    fn name(&self) -> String {
        format!("n={} k={} g={} {} from {}", self.n, self.k, self.g, mode_name(self.mode, true), if self.f16 { "f16" } else { "f32" })
    }
    fn bytes(&self) -> u64 {
        let ng = self.k.div_ceil(self.g);
        (self.n * self.k * if self.f16 { 2 } else { 4 } * 2 + self.n * self.k / 2 + self.n * ng * 8) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, k) = (self.n, self.k);
        // Gaussian values, plus exact ties (x = (j + 1/2) * s) sprinkled in to exercise rounding.
        let mut vals = rng.normal_vec(n * k);
        for i in (0..n * k).step_by(5) {
            vals[i] = (rng.u32(15) as f32 - 7.0) * 0.5;
        }
        let mut out = Int4Matrix::alloc(ctx, n, k, self.g, self.mode)?;
        out.codes = guarded_u32(ctx, n * out.row_words())?;
        if self.f16 {
            let h: Vec<half::f16> = vals.iter().map(|&v| half::f16::from_f32(v)).collect();
            let as_f32: Vec<f32> = h.iter().map(|v| v.to_f32()).collect();
            let expect = reference::quant::quantize(&as_f32, n, k, self.g, self.mode);
            Ok(Box::new(QuantPrepared { src: ctx.upload(&h)?, out, expect }))
        } else {
            let expect = reference::quant::quantize(&vals, n, k, self.g, self.mode);
            Ok(Box::new(QuantPrepared { src: ctx.upload(&vals)?, out, expect }))
        }
    }
}

struct DequantKernel;
struct DequantCase {
    n: usize,
    k: usize,
    g: usize,
    mode: Int4Mode,
    zeros: bool,
}

impl Kernel for DequantKernel {
    fn info(&self) -> &'static KernelInfo {
        &DEQUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(1, 1, 32), (3, 31, 7), (33, 1000, 32), (31, 255, 64), (5, 1000, 128)];
        shapes
            .iter()
            .enumerate()
            .map(|(i, &(n, k, g))| {
                let (mode, zeros) = MODES[i % 3];
                Box::new(DequantCase { n, k, g, mode, zeros }) as Box<dyn Case>
            })
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Int4Pipeline::Dequant])
    }
}

struct DequantPrepared {
    w: Int4Matrix,
    out: GpuBuffer<f32>,
    reference: Vec<f64>,
    mag: Vec<f64>,
}

impl Prepared for DequantPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        dequantize(b, &self.w, &self.out)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.out)?, &self.reference, &self.mag, 1e-6))
    }
}

impl Case for DequantCase {
    fn name(&self) -> String {
        format!("n={} k={} g={} {}", self.n, self.k, self.g, mode_name(self.mode, self.zeros))
    }
    fn bytes(&self) -> u64 {
        (self.n * self.k * 4 + self.n * self.k / 2) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let host = random_host(rng, self.n, self.k, self.g, self.mode, self.zeros);
        let (n, k) = (self.n, self.k);
        let reference = (0..n * k).map(|i| host.value(i / k, i % k)).collect();
        let mag = (0..n * k).map(|i| host.magnitude(i / k, i % k)).collect();
        Ok(Box::new(DequantPrepared { w: Int4Matrix::upload(ctx, &host)?, out: guarded_f32(ctx, n * k)?, reference, mag }))
    }
}
