//! INT8 GEMV: `y[r] = sum_c (q[r, c] - zero) * scale * x[c]` with scale/zero per tensor or per
//! row, signed (-128..127) or unsigned (0..255) codes. GPU layout: codes row-major, 4 per u32,
//! rows padded to 16 bytes, words in the [`crate::kernels::interleave`] order. Sources: wgsl/int8_gemv.wgsl (+ team_*.wgsl).
//!
//! ```no_run
//! use wgkernels::kernels::int8::{self, HostInt8, Int8Matrix, Int8Scale};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (n, k) = (64, 128);
//! let host = HostInt8 { n, k, signed: true, codes: vec![3; n * k], scale: Int8Scale::PerTensor { scale: 0.01, zero: 0.0 } };
//! let w = Int8Matrix::upload(&ctx, &host)?;
//! let (x, y) = (ctx.upload(&vec![1.0f32; k])?, ctx.alloc::<f32>(n)?);
//! let mut b = ctx.batch();
//! int8::gemv(&mut b, &w, &x, &y)?;
//! b.run()?;
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::kernels::int4::{plan_grid, team_source, tuned_plan, GemvPlan};
use crate::kernels::interleave;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};

pub const GEMV: KernelInfo = KernelInfo { name: "int8_gemv", variants: &[Variant::Portable, Variant::Subgroup, Variant::Native], extra: None };

const GEMV_WGSL: &str = include_str!("../../wgsl/int8_gemv.wgsl");
const GEMV_MSL: &str = include_str!("../../msl/int8_gemv.metal");

/// Scale and zero point granularity.
#[derive(Clone, Debug, PartialEq)]
pub enum Int8Scale {
    PerTensor {
        scale: f32,
        zero: f32,
    },
    /// `n` scales and `n` zeros.
    PerRow {
        scales: Vec<f32>,
        zeros: Vec<f32>,
    },
}

/// INT8 weights in the host layout: `codes` row-major `[n, k]` bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInt8 {
    pub n: usize,
    pub k: usize,
    pub signed: bool,
    pub codes: Vec<u8>,
    pub scale: Int8Scale,
}

impl HostInt8 {
    pub fn validate(&self) -> Result<()> {
        ensure(self.n > 0 && self.k > 0, || Error::Shape(format!("n = {}, k = {}: both must be > 0", self.n, self.k)))?;
        ensure(self.n.checked_mul(self.k).is_some_and(|v| v < u32::MAX as usize), || Error::Shape("n * k exceeds 2^32".into()))?;
        ensure(self.codes.len() == self.n * self.k, || Error::Argument(format!("codes: {} bytes, expected n * k = {}", self.codes.len(), self.n * self.k)))?;
        if let Int8Scale::PerRow { scales, zeros } = &self.scale {
            ensure(scales.len() == self.n && zeros.len() == self.n, || {
                Error::Argument(format!("per-row scales/zeros: {}/{} values, expected n = {}", scales.len(), zeros.len(), self.n))
            })?;
        }
        Ok(())
    }

    fn parts(&self, r: usize, c: usize) -> (f64, f64, f64) {
        let b = self.codes[r * self.k + c];
        let q = if self.signed { b as i8 as f64 } else { b as f64 };
        let (s, z) = match &self.scale {
            Int8Scale::PerTensor { scale, zero } => (*scale, *zero),
            Int8Scale::PerRow { scales, zeros } => (scales[r], zeros[r]),
        };
        (q, z as f64, s as f64)
    }

    /// The weight at (r, c) per the spec, in f64.
    pub fn value(&self, r: usize, c: usize) -> f64 {
        let (q, z, s) = self.parts(r, c);
        (q - z) * s
    }

    /// The matrix in the `int8` weight format ([`crate::formats::int8`]; upload with
    /// [`crate::kernels::matmul::WeightMatrix::upload_format`]): blocks of 32 weights, row
    /// after row, each the row's (or the tensor's) f32 scale and the block's 32 codes,
    /// unchanged. Lossless: every dequantised weight equals [`HostInt8::value`] rounded to f32.
    ///
    /// Needs signed codes, zero points of 0, `k` a multiple of 32 and scales that are finite
    /// and normal or zero; anything else is an error (the format cannot hold it).
    pub fn to_int8_blocks(&self) -> Result<Vec<u8>> {
        use crate::formats::{int4::valid_scale, int8};
        self.validate()?;
        ensure(self.signed, || Error::Argument("int8 blocks hold signed codes only".into()))?;
        let (scales, zeros): (&[f32], &[f32]) = match &self.scale {
            Int8Scale::PerTensor { scale, zero } => (std::slice::from_ref(scale), std::slice::from_ref(zero)),
            Int8Scale::PerRow { scales, zeros } => (scales, zeros),
        };
        ensure(zeros.iter().all(|&z| z == 0.0), || Error::Argument("int8 blocks have no zero points (zeros are not all 0)".into()))?;
        ensure(self.k % int8::BLOCK_WEIGHTS == 0, || Error::Shape(format!("int8 blocks: k = {} must be a multiple of 32", self.k)))?;
        if let Some(i) = scales.iter().position(|&d| !valid_scale(d)) {
            return Err(Error::Format(format!("int8 blocks: scale {i} = {:e} is not finite and normal or zero", scales[i])));
        }
        let nb = self.k / int8::BLOCK_WEIGHTS;
        let total =
            self.n.checked_mul(nb).and_then(|b| b.checked_mul(int8::BLOCK_BYTES)).ok_or_else(|| Error::Shape(format!("n = {}, k = {}: int8 blocks overflow", self.n, self.k)))?;
        let mut out = Vec::with_capacity(total);
        for (r, row) in self.codes.chunks_exact(self.k).enumerate() {
            let d = scales[if scales.len() == 1 { 0 } else { r }];
            for codes in row.chunks_exact(int8::BLOCK_WEIGHTS) {
                let codes: &[u8; 32] = codes.try_into().map_err(|_| Error::Argument("codes: short block".into()))?;
                out.extend_from_slice(&int8::block(d, codes));
            }
        }
        Ok(out)
    }

    /// Operand magnitude `(|q| + |zero| + 128) * scale` of the weight at (r, c) (128: the
    /// signed-code offset the kernel folds into the zero point): the error scale.
    pub fn magnitude(&self, r: usize, c: usize) -> f64 {
        let (q, z, s) = self.parts(r, c);
        (q.abs() + z.abs() + 128.0) * s.abs()
    }
}

/// INT8 weights on the GPU.
pub struct Int8Matrix {
    n: usize,
    k: usize,
    signed: bool,
    per_row: bool,
    codes: GpuBuffer<u32>,
    scales: GpuBuffer<f32>,
    zeros: GpuBuffer<f32>,
}

impl Int8Matrix {
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    fn row_words(&self) -> usize {
        self.k.div_ceil(16) * 4
    }
    /// Bytes one GEMV reads from the weights (codes incl. row padding, scales, zeros).
    pub fn bytes(&self) -> u64 {
        (self.n * self.row_words() * 4) as u64 + if self.per_row { 8 * self.n as u64 } else { 8 }
    }

    pub fn upload(ctx: &Context, h: &HostInt8) -> Result<Int8Matrix> {
        h.validate()?;
        let rw = h.k.div_ceil(16) * 4;
        let mut words = vec![0u32; h.n * rw];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for r in 0..h.n {
            bytes[r * rw * 4..r * rw * 4 + h.k].copy_from_slice(&h.codes[r * h.k..(r + 1) * h.k]);
        }
        let words = interleave::interleave(&words, rw);
        let (scales, zeros, per_row) = match &h.scale {
            Int8Scale::PerTensor { scale, zero } => (vec![*scale], vec![*zero], false),
            Int8Scale::PerRow { scales, zeros } => (scales.clone(), zeros.clone(), true),
        };
        Ok(Int8Matrix { n: h.n, k: h.k, signed: h.signed, per_row, codes: ctx.upload(&words)?, scales: ctx.upload(&scales)?, zeros: ctx.upload(&zeros)? })
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GemvParams {
    n: u32,
    k: u32,
    row_vec4s: u32,
    xor_mask: u32,
    zero_offset: f32,
    per_row: u32,
    _p: [u32; 2],
}

const BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("codes", "vec4<u32>"),
    StorageBinding::read("scales", "f32"),
    StorageBinding::read("zeros", "f32"),
    StorageBinding::read("x", "vec4<f32>"),
    StorageBinding::write("y", "f32"),
];

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Int8Pipeline {
    pub variant: Variant,
    pub plan: GemvPlan,
}

impl PipelineKey for Int8Pipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        if self.variant == Variant::Native {
            return PipelineDesc::native(GEMV_MSL, "int8_gemv", Int8Pipeline { variant: Variant::Subgroup, ..self.clone() }.describe(_caps));
        }
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![team_source(self.variant), interleave::WGSL, GEMV_WGSL]),
            entry: "main",
            constants: self.plan.constants(self.variant, &[]),
            workgroup_size: [self.plan.wg, 1, 1],
            params_size: std::mem::size_of::<GemvParams>() as u64,
            bindings: BINDINGS,
        }
    }
}

/// Plan and grid for an n-row INT8 GEMV. Default (fastest measured on an H200, 2026-11-22): one
/// team per workgroup of 128 invocations, 4 rows, one vec4 step per iteration (for the Subgroup
/// variant the Native twin's plan, [`GemvPlan::NATIVE`]). `WGKERNELS_INT8_WG`, `_ROWS`, `_UNROLL`, `_TEAM` and
/// `_PLANES` override the defaults, for tuning experiments (see [`crate::kernels::int4`]'s plans).
fn gemv_plan(ctx: &Context, n: usize, variant: Variant) -> Result<(GemvPlan, [u32; 3])> {
    if variant == Variant::Native {
        let (_, _, grid) = crate::native::team_plan(ctx, n)?;
        return Ok((GemvPlan::NATIVE, grid));
    }
    let plan = tuned_plan(&ctx.caps().tuning.int8_gemv, variant, GemvPlan { wg: 128, rows: 4, unroll: 1, team: if variant == Variant::Portable { 128 } else { 0 } });
    Ok((plan, plan_grid(ctx, &plan, n, variant)?))
}

/// `y[0..n] = W x` (`x.len() >= k`, `y.len() >= n`).
pub fn gemv(b: &mut Batch, w: &Int8Matrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    x.require("x", w.k)?;
    y.require("y", w.n)?;
    let params = GemvParams {
        n: w.n as u32,
        k: w.k as u32,
        row_vec4s: (w.row_words() / 4) as u32,
        xor_mask: if w.signed { 0x8080_8080 } else { 0 },
        zero_offset: if w.signed { 128.0 } else { 0.0 },
        per_row: w.per_row as u32,
        _p: [0; 2],
    };
    let bufs = [w.codes.raw(), w.scales.raw(), w.zeros.raw(), x.raw(), y.raw()];
    ctx.with_native_fallback(&GEMV, |variant| {
        let (plan, grid) = gemv_plan(ctx, w.n, variant)?;
        b.dispatch(&Int8Pipeline { variant, plan }, &params, &bufs, grid)
    })
}

#[cfg(feature = "testkit")]
pub use cases::kernels;
pub(crate) use check::gemv_checks;

/// The case the Native self-check runs ([`crate::native`]), against the f64 reference. Built in
/// every build; the test grid (`cases`, `testkit` feature) reuses it.
mod check {
    use super::*;
    use crate::reference;
    use crate::suite::{guarded_f32, Case, MatmulPrepared, MatmulWeights, Prepared, Rng};

    /// The self-check case of the one Native entry point (`int8_gemv`).
    pub(crate) fn gemv_checks() -> Vec<Box<dyn Case>> {
        vec![Box::new(GemvCase { n: 33, k: 1000, signed: true, per_row: true })]
    }

    pub(super) struct GemvCase {
        pub(super) n: usize,
        pub(super) k: usize,
        pub(super) signed: bool,
        pub(super) per_row: bool,
    }

    fn random_host(rng: &mut Rng, n: usize, k: usize, signed: bool, per_row: bool) -> HostInt8 {
        let scale = if per_row {
            Int8Scale::PerRow { scales: rng.uniform_vec(n, 0.001, 0.01), zeros: rng.uniform_vec(n, -3.0, 3.0) }
        } else {
            Int8Scale::PerTensor { scale: rng.uniform(0.001, 0.01), zero: rng.uniform(-3.0, 3.0) }
        };
        HostInt8 { n, k, signed, codes: rng.bytes(n * k), scale }
    }

    impl MatmulWeights for Int8Matrix {
        fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, _m: usize) -> Result<()> {
            gemv(b, self, x, y)
        }
    }

    impl Case for GemvCase {
        fn name(&self) -> String {
            format!("n={} k={} {} {}", self.n, self.k, if self.signed { "signed" } else { "unsigned" }, if self.per_row { "per-row" } else { "per-tensor" })
        }
        #[cfg(feature = "testkit")]
        fn bytes(&self) -> u64 {
            (self.n * self.k.div_ceil(16) * 16 + 8 * self.n + 4 * (self.k + self.n)) as u64
        }
        fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
            let host = random_host(rng, self.n, self.k, self.signed, self.per_row);
            let x = rng.uniform_vec(self.k, -1.0, 1.0);
            let reference = reference::gemv(self.n, self.k, |r, c| host.value(r, c), |r, c| host.magnitude(r, c), &x);
            let mut weights = vec![Int8Matrix::upload(ctx, &host)?];
            for _ in 1..copies {
                weights.push(Int8Matrix::upload(ctx, &random_host(rng, self.n, self.k, self.signed, self.per_row))?);
            }
            Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, self.n)?, m: 1, reference, tol: 1e-5 }))
        }
    }
}

/// The test and bench grid (`testkit` feature).
#[cfg(feature = "testkit")]
mod cases {
    use super::check::GemvCase;
    use super::*;
    use crate::suite::{describe_all, Case, Kernel};

    pub fn kernels() -> Vec<&'static dyn Kernel> {
        vec![&GemvKernel]
    }

    struct GemvKernel;

    impl Kernel for GemvKernel {
        fn info(&self) -> &'static KernelInfo {
            &GEMV
        }
        fn test_cases(&self) -> Vec<Box<dyn Case>> {
            let dims = [1usize, 3, 31, 33, 255, 1000];
            let mut v: Vec<Box<dyn Case>> = Vec::new();
            for (i, (&n, &k)) in dims.iter().flat_map(|n| dims.iter().map(move |k| (n, k))).enumerate() {
                v.push(Box::new(GemvCase { n, k, signed: i % 2 == 0, per_row: (i / 2) % 2 == 0 }));
            }
            v.push(Box::new(GemvCase { n: 9, k: 2600, signed: true, per_row: true }));
            v
        }
        fn bench_cases(&self) -> Vec<Box<dyn Case>> {
            [(4096, 4096), (14336, 4096), (4096, 14336)].into_iter().map(|(n, k)| Box::new(GemvCase { n, k, signed: true, per_row: true }) as Box<dyn Case>).collect()
        }
        fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
            describe_all([
                Int8Pipeline { variant: Variant::Portable, plan: GemvPlan { wg: 128, rows: 4, unroll: 1, team: 128 } },
                Int8Pipeline { variant: Variant::Portable, plan: GemvPlan { wg: 256, rows: 2, unroll: 2, team: 32 } },
                Int8Pipeline { variant: Variant::Subgroup, plan: GemvPlan { wg: 256, rows: 2, unroll: 2, team: 1 } },
                // The Native twin (workgroup teams) is one of the Subgroup pipelines.
                Int8Pipeline { variant: Variant::Subgroup, plan: GemvPlan::NATIVE },
                Int8Pipeline { variant: Variant::Native, plan: GemvPlan::NATIVE },
            ])
        }
    }
}
