//! Test and bench cases of the INT4 family (see [`crate::suite`]).

use super::check::{mode_name, setup_mat, GemvCase, QuantCase};
use super::*;
use crate::suite::{compare, describe_all, guarded_f32, Case, Check, Kernel, Prepared, Rng};

pub use super::check::random_host;

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&GemvKernel, &GemmKernel, &QuantKernel, &DequantKernel]
}

const MODES: [(Int4Mode, bool); 3] = [(Int4Mode::Signed, false), (Int4Mode::Signed, true), (Int4Mode::Asymmetric, true)];
const DIMS: [usize; 6] = [1, 3, 31, 33, 255, 1000];
const GROUPS: [usize; 4] = [32, 64, 128, 7];

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
