//! Test and bench cases of the Q4_K family (see [`crate::suite`]).

use super::check::{weight_bytes, MatCase};
use super::*;
use crate::formats::q4k::dequantize_row;
use crate::suite::{describe_all, guard_damage, guarded_f32, Case, Check, Kernel, Prepared, Rng, POISON_F32};

pub use super::check::random_blocks;

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&GemvKernel, &GemmKernel, &DequantKernel]
}

const NS: [usize; 5] = [1, 3, 31, 33, 255];
const KS: [usize; 4] = [256, 512, 768, 2560];
const LLM_SHAPES: [(usize, usize); 3] = [(4096, 4096), (14336, 4096), (4096, 14336)];

struct GemvKernel;

impl Kernel for GemvKernel {
    fn info(&self) -> &'static KernelInfo {
        &GEMV
    }
    /// Every n of NS x every k of KS (2 rows per team), plus n = 2049 (4 rows, a partial team).
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = NS.iter().flat_map(|&n| KS.iter().map(move |&k| Box::new(MatCase { m: 1, n, k }) as Box<dyn Case>)).collect();
        v.push(Box::new(MatCase { m: 1, n: 2049, k: 512 }));
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        LLM_SHAPES.iter().map(|&(n, k)| Box::new(MatCase { m: 1, n, k }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let mut keys = Vec::new();
        for variant in [Variant::Portable, Variant::Subgroup] {
            for rows in GEMV_ROWS {
                let plan = GemvPlan { wg: 256, rows, unroll: 2, team: if variant == Variant::Portable { 32 } else { 1 } };
                keys.push(Q4kPipeline::Gemv { variant, plan });
            }
        }
        for rows in NATIVE_ROWS {
            // The Native twin (workgroup teams) is one of the Subgroup pipelines.
            keys.push(Q4kPipeline::Gemv { variant: Variant::Subgroup, plan: native_plan(rows) });
            keys.push(Q4kPipeline::Gemv { variant: Variant::Native, plan: native_plan(rows) });
        }
        describe_all(keys)
    }
}

struct GemmKernel;

impl Kernel for GemmKernel {
    fn info(&self) -> &'static KernelInfo {
        &GEMM
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(2, 33, 512), (7, 1, 256), (7, 65, 768), (33, 31, 256), (64, 3, 2560), (64, 129, 512), (17, 255, 256)];
        shapes.iter().map(|&(m, n, k)| Box::new(MatCase { m, n, k }) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(MatCase { m: 32, n: 4096, k: 4096 })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let mut v = describe_all([Q4kPipeline::Gemm]);
        v.extend(describe_all([crate::kernels::splitk::SplitReduce]));
        v
    }
}

struct DequantKernel;
struct DequantCase {
    n: usize,
    k: usize,
}

impl Kernel for DequantKernel {
    fn info(&self) -> &'static KernelInfo {
        &DEQUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        [(1, 256), (3, 512), (33, 768), (31, 2560)].iter().map(|&(n, k)| Box::new(DequantCase { n, k }) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(DequantCase { n: 4096, k: 4096 })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Q4kPipeline::Dequant])
    }
}

struct DequantPrepared {
    weights: Vec<Q4kMatrix>,
    out: GpuBuffer<f32>,
    expect: Vec<f32>,
}

impl Prepared for DequantPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        dequantize(b, &self.weights[copy % self.weights.len()], &self.out)
    }
    /// Bit equality with the CPU dequantiser (itself bit-exact with gguf-py).
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = ctx.read(&self.out)?;
        let n = self.expect.len();
        let differ = got.iter().zip(&self.expect).filter(|(g, e)| g.to_bits() != e.to_bits()).count();
        let first = got.iter().zip(&self.expect).position(|(g, e)| g.to_bits() != e.to_bits());
        let note = match first {
            Some(i) => format!("{differ} values differ in bits from gguf-py's; first at {i}: {} vs {}", got[i], self.expect[i]),
            None => String::new(),
        };
        let nonfinite = got.iter().take(n).filter(|v| !v.is_finite()).count();
        Ok(Check { err: 0.0, tol: 0.0, nonfinite, guard_damage: guard_damage(&got, n, POISON_F32), note })
    }
}

impl Case for DequantCase {
    fn name(&self) -> String {
        format!("n={} k={}", self.n, self.k)
    }
    fn bytes(&self) -> u64 {
        weight_bytes(self.n, self.k) + 4 * (self.n * self.k) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, k) = (self.n, self.k);
        let blocks = random_blocks(rng, n * k / QK_K);
        let expect = dequantize_row(&blocks);
        let mut weights = vec![Q4kMatrix::upload(ctx, n, k, &blocks)?];
        for _ in 1..copies {
            weights.push(Q4kMatrix::upload(ctx, n, k, &random_blocks(rng, n * k / QK_K))?);
        }
        Ok(Box::new(DequantPrepared { weights, out: guarded_f32(ctx, n * k)?, expect }))
    }
}
