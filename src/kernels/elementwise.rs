//! Elementwise kernels of a transformer decode step, f32:
//!
//! * [`rmsnorm`]: `y[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]` per row, any row
//!   length (one workgroup per row; Portable reduces in workgroup memory, Subgroup with
//!   `subgroupAdd`, correct for any subgroup size).
//! * [`gate`] / [`gate_inplace`]: `y = act(a) * b`, the gated unit of an FFN, with the activation
//!   an [`Activation`]: SiLU `a / (1 + exp(-a))` (SwiGLU, Llama-style) or GELU with the tanh
//!   approximation `a / 2 * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 a^3)))` (GeGLU, Gemma);
//!   [`silu_gate`] / [`silu_gate_inplace`] are the SiLU case.
//! * [`add`] / [`add_inplace`]: `y = a + b` (residual add).
//! * [`softcap_inplace`]: `x = cap * tanh(x / cap)` (logit soft-capping, Gemma 2's final logits).
//! * [`scale_inplace`]: `x = s * x` (Gemma's embedding scale).
//!
//! In-place forms bind the destination read-write and the other operand read-only, so one buffer
//! bound twice in one dispatch (which wgpu rejects) is a typed error here, never a GPU error.
//! The CPU references (`reference_rmsnorm`, `reference_gate`, `reference_add`, `reference_softcap`;
//! test kit) are f64.
//! Sources: wgsl/elementwise_rmsnorm.wgsl + elementwise_reduce_{portable,subgroup}.wgsl,
//! elementwise_ops.wgsl + elementwise_{binary,inplace,unary}.wgsl.
//!
//! ```
//! use wgkernels::kernels::elementwise;
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let n = 4096;
//! let (x, w, h) = (ctx.upload(&vec![1.0f32; n])?, ctx.upload(&vec![1.0f32; n])?, ctx.alloc::<f32>(n)?);
//! let mut b = ctx.batch();
//! elementwise::rmsnorm(&mut b, &x, &w, &h, 1, n, 1e-5)?;
//! elementwise::silu_gate_inplace(&mut b, &h, &w, n)?; // h = silu(h) * w
//! elementwise::add_inplace(&mut b, &x, &h, n)?; // x += h
//! b.run()?;
//! // rmsnorm(1) = 1 (up to eps), silu(1) = 1 / (1 + e^-1), so x = 1 + 0.7311 everywhere.
//! let want = 1.0 + 1.0 / (1.0 + (-1f32).exp());
//! assert!(ctx.read(&x)?.iter().all(|v| (v - want).abs() < 1e-4));
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::error::{ensure, Error, Result};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

pub const RMSNORM: KernelInfo = KernelInfo::new("elementwise_rmsnorm", &[Variant::Portable, Variant::Subgroup], None);
pub const RMSNORM_ADD: KernelInfo = KernelInfo::new("elementwise_rmsnorm_add", &[Variant::Portable, Variant::Subgroup], None);
pub const SILU_GATE: KernelInfo = KernelInfo::new("elementwise_silu_gate", &[Variant::Portable], None);
pub const GELU_GATE: KernelInfo = KernelInfo::new("elementwise_gelu_gate", &[Variant::Portable], None);
pub const ADD: KernelInfo = KernelInfo::new("elementwise_add", &[Variant::Portable], None);
pub const SOFTCAP: KernelInfo = KernelInfo::new("elementwise_softcap", &[Variant::Portable], None);
pub const SCALE: KernelInfo = KernelInfo::new("elementwise_scale", &[Variant::Portable], None);

const RMSNORM_WGSL: &str = include_str!("../../wgsl/elementwise_rmsnorm.wgsl");
const REDUCE_PORTABLE: &str = include_str!("../../wgsl/elementwise_reduce_portable.wgsl");
const REDUCE_SUBGROUP: &str = include_str!("../../wgsl/elementwise_reduce_subgroup.wgsl");
const OPS_WGSL: &str = include_str!("../../wgsl/elementwise_ops.wgsl");
const BINARY_WGSL: &str = include_str!("../../wgsl/elementwise_binary.wgsl");
const INPLACE_WGSL: &str = include_str!("../../wgsl/elementwise_inplace.wgsl");
const UNARY_WGSL: &str = include_str!("../../wgsl/elementwise_unary.wgsl");

/// Invocations per RMSNorm workgroup (one row per workgroup).
pub const RMSNORM_WG: u32 = 256;
/// Invocations per workgroup of the binary kernels (one element each).
const BINARY_WG: u64 = 256;
/// Largest element count of one tensor (keeps every index, grid padding included, within u32).
pub const MAX_ELEMENTS: usize = 1 << 31;

params_struct! {
    struct NormParams {
        rows: u32,
        n: u32,
        eps: f32,
        _p: u32,
    }
}

params_struct! {
    struct OpParams {
        len: u32,
        /// The unary operation's parameter (the soft-cap).
        scalar: f32,
        _p1: u32,
        _p2: u32,
    }
}

const NORM_BINDINGS: &[StorageBinding] = &[StorageBinding::read("x", "f32"), StorageBinding::read("w", "f32"), StorageBinding::write("y", "f32")];
const BINARY_BINDINGS: &[StorageBinding] = &[StorageBinding::read("a", "f32"), StorageBinding::read("b", "f32"), StorageBinding::write("y", "f32")];
const INPLACE_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "f32"), StorageBinding::read("b", "f32")];
const BINARY_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::read("a", "vec4<f32>"), StorageBinding::read("b", "vec4<f32>"), StorageBinding::write("y", "vec4<f32>")];
const INPLACE_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "vec4<f32>"), StorageBinding::read("b", "vec4<f32>")];
const UNARY_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "f32")];
const UNARY_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "vec4<f32>")];
const ELEM_F32: &str = "alias T = f32;\n";
const ELEM_VEC4: &str = "alias T = vec4<f32>;\n";

/// The binary operation (the WGSL `OP` override).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add = 0,
    SiluGate = 1,
    GeluTanhGate = 2,
}

/// The in-place unary operation (the WGSL `OP` override of elementwise_unary.wgsl), with its
/// scalar parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `cap * tanh(x / cap)`.
    Softcap = 0,
    /// `s * x`.
    Scale = 1,
}

/// The activation of a gated unit `act(gate) * up` ([`gate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `a / (1 + exp(-a))` (SwiGLU).
    Silu,
    /// `a / 2 * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 a^3)))`, GELU's tanh approximation (GeGLU).
    GeluTanh,
}

impl Activation {
    /// The kernel that computes `act(a) * b`.
    pub fn info(self) -> &'static KernelInfo {
        match self {
            Activation::Silu => &SILU_GATE,
            Activation::GeluTanh => &GELU_GATE,
        }
    }

    fn op(self) -> BinaryOp {
        match self {
            Activation::Silu => BinaryOp::SiluGate,
            Activation::GeluTanh => BinaryOp::GeluTanhGate,
        }
    }
}

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElementwisePipeline {
    /// `add`: the normalised rows are added to `y` ([`rmsnorm_add`]).
    RmsNorm { variant: Variant, add: bool },
    /// `vec`: one vec4 per invocation (lengths that are a multiple of 4; H100, 16 M elements:
    /// 118 µs -> see docs/PERFORMANCE.md), else one f32.
    Binary { op: BinaryOp, inplace: bool, vec: bool },
    /// A unary operation in place, one vec4 (`vec`) or one f32 per invocation.
    Unary { op: UnaryOp, vec: bool },
}

impl PipelineKey for ElementwisePipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            ElementwisePipeline::RmsNorm { variant, add } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![RMSNORM_WGSL, if variant == Variant::Subgroup { REDUCE_SUBGROUP } else { REDUCE_PORTABLE }]),
                entry: "main",
                constants: vec![("WG", RMSNORM_WG as f64), ("ADD", add as u32 as f64)],
                workgroup_size: [RMSNORM_WG, 1, 1],
                params_size: std::mem::size_of::<NormParams>() as u64,
                bindings: NORM_BINDINGS,
            },
            ElementwisePipeline::Binary { op, inplace, vec } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![if vec { ELEM_VEC4 } else { ELEM_F32 }, OPS_WGSL, if inplace { INPLACE_WGSL } else { BINARY_WGSL }]),
                entry: "main",
                constants: vec![("OP", op as u32 as f64)],
                workgroup_size: [BINARY_WG as u32, 1, 1],
                params_size: std::mem::size_of::<OpParams>() as u64,
                bindings: match (inplace, vec) {
                    (true, true) => INPLACE_VEC_BINDINGS,
                    (true, false) => INPLACE_BINDINGS,
                    (false, true) => BINARY_VEC_BINDINGS,
                    (false, false) => BINARY_BINDINGS,
                },
            },
            ElementwisePipeline::Unary { op, vec } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![if vec { ELEM_VEC4 } else { ELEM_F32 }, OPS_WGSL, UNARY_WGSL]),
                entry: "main",
                constants: vec![("OP", op as u32 as f64)],
                workgroup_size: [BINARY_WG as u32, 1, 1],
                params_size: std::mem::size_of::<OpParams>() as u64,
                bindings: if vec { UNARY_VEC_BINDINGS } else { UNARY_BINDINGS },
            },
        }
    }
}

fn distinct(what: &str, a: crate::buffer::BufRef, b: crate::buffer::BufRef) -> Result<()> {
    ensure(a.buffer != b.buffer, || Error::Argument(format!("{what}: the same buffer is bound as input and output (use the in-place form)")))
}

fn check_len(len: usize) -> Result<()> {
    ensure(len > 0, || Error::Shape("length 0".into()))?;
    ensure(len <= MAX_ELEMENTS, || Error::Shape(format!("{len} elements exceed {MAX_ELEMENTS}")))
}

/// RMSNorm of `rows` rows of length `n`: `y[r*n + i] = x[r*n + i] / sqrt(mean(x[r]^2) + eps) * w[i]`.
/// `x` and `y` must be different buffers; `eps` finite and `>= 0`.
pub fn rmsnorm(b: &mut Batch, x: &GpuBuffer<f32>, w: &GpuBuffer<f32>, y: &GpuBuffer<f32>, rows: usize, n: usize, eps: f32) -> Result<()> {
    norm_any(b, false, x, w, y, rows, n, eps)
}

/// `y[r, i] += x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]`: [`rmsnorm`] added to `y` in the
/// same dispatch (a post-norm before a residual add, as Gemma's blocks end). Same checks.
pub fn rmsnorm_add(b: &mut Batch, x: &GpuBuffer<f32>, w: &GpuBuffer<f32>, y: &GpuBuffer<f32>, rows: usize, n: usize, eps: f32) -> Result<()> {
    norm_any(b, true, x, w, y, rows, n, eps)
}

#[allow(clippy::too_many_arguments)]
fn norm_any(b: &mut Batch, add: bool, x: &GpuBuffer<f32>, w: &GpuBuffer<f32>, y: &GpuBuffer<f32>, rows: usize, n: usize, eps: f32) -> Result<()> {
    let ctx = b.context();
    let variant = ctx.variant_for(if add { &RMSNORM_ADD } else { &RMSNORM })?;
    ensure(rows > 0 && n > 0, || Error::Shape(format!("rows = {rows}, n = {n}: both must be > 0")))?;
    let total = rows.checked_mul(n).ok_or_else(|| Error::Shape("rows * n overflows".into()))?;
    check_len(total)?;
    ensure(eps.is_finite() && eps >= 0.0, || Error::Argument(format!("eps = {eps}: must be finite and >= 0")))?;
    x.require("x", total)?;
    w.require("w", n)?;
    y.require("y", total)?;
    distinct("rmsnorm", x.raw(), y.raw())?;
    distinct("rmsnorm (w, y)", w.raw(), y.raw())?;
    let params = NormParams { rows: rows as u32, n: n as u32, eps, _p: 0 };
    b.dispatch(&ElementwisePipeline::RmsNorm { variant, add }, &params, &[x.raw(), w.raw(), y.raw()], ctx.grid(rows as u64)?)
}

/// Whether a `len`-element operation runs on whole vec4s, its params (with `scalar`) and its grid.
fn elementwise_launch(ctx: &crate::context::Context, len: usize, scalar: f32) -> Result<(bool, OpParams, [u32; 3])> {
    check_len(len)?;
    // Whole vec4s where the length allows (`Tuning::elementwise_vec = false` turns that off, to compare).
    let vec = len % 4 == 0 && ctx.caps().tuning.elementwise_vec;
    let units = if vec { len / 4 } else { len };
    Ok((vec, OpParams { len: units as u32, scalar, _p1: 0, _p2: 0 }, ctx.grid((units as u64).div_ceil(BINARY_WG))?))
}

fn binary(b: &mut Batch, info: &KernelInfo, op: BinaryOp, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, y: Option<&GpuBuffer<f32>>, len: usize) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(info)?;
    let (vec, params, grid) = elementwise_launch(ctx, len, 0.0)?;
    a.require("a", len)?;
    bb.require("b", len)?;
    match y {
        Some(y) => {
            y.require("y", len)?;
            distinct(info.name, a.raw(), y.raw())?;
            distinct(info.name, bb.raw(), y.raw())?;
            b.dispatch(&ElementwisePipeline::Binary { op, inplace: false, vec }, &params, &[a.raw(), bb.raw(), y.raw()], grid)
        }
        None => {
            distinct(info.name, a.raw(), bb.raw())?;
            b.dispatch(&ElementwisePipeline::Binary { op, inplace: true, vec }, &params, &[a.raw(), bb.raw()], grid)
        }
    }
}

/// `y[i] = a[i] + b[i]` for `i < len` (`y` distinct from `a` and `b`; `a` may equal `b`).
pub fn add(b: &mut Batch, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, y: &GpuBuffer<f32>, len: usize) -> Result<()> {
    binary(b, &ADD, BinaryOp::Add, a, bb, Some(y), len)
}

/// `a[i] += b[i]` for `i < len` (the residual add; `a` and `b` distinct).
pub fn add_inplace(b: &mut Batch, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, len: usize) -> Result<()> {
    binary(b, &ADD, BinaryOp::Add, a, bb, None, len)
}

/// `y[i] = act(a[i]) * b[i]` for `i < len` (`y` distinct from `a` and `b`).
pub fn gate(b: &mut Batch, act: Activation, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, y: &GpuBuffer<f32>, len: usize) -> Result<()> {
    binary(b, act.info(), act.op(), a, bb, Some(y), len)
}

/// `a[i] = act(a[i]) * b[i]` for `i < len` (`a` and `b` distinct).
pub fn gate_inplace(b: &mut Batch, act: Activation, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, len: usize) -> Result<()> {
    binary(b, act.info(), act.op(), a, bb, None, len)
}

/// `y[i] = silu(a[i]) * b[i]` for `i < len` (`y` distinct from `a` and `b`): [`gate`] with SiLU.
pub fn silu_gate(b: &mut Batch, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, y: &GpuBuffer<f32>, len: usize) -> Result<()> {
    gate(b, Activation::Silu, a, bb, y, len)
}

/// `a[i] = silu(a[i]) * b[i]` for `i < len` (`a` and `b` distinct): [`gate_inplace`] with SiLU.
pub fn silu_gate_inplace(b: &mut Batch, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, len: usize) -> Result<()> {
    gate_inplace(b, Activation::Silu, a, bb, len)
}

/// `x[i] = cap * tanh(x[i] / cap)` for `i < len`: logit soft-capping (values stay within
/// `(-cap, cap)`, nearly unchanged well inside). `cap` finite and `> 0`.
pub fn softcap_inplace(b: &mut Batch, x: &GpuBuffer<f32>, len: usize, cap: f32) -> Result<()> {
    ensure(cap.is_finite() && cap > 0.0, || Error::Argument(format!("soft-cap {cap}: must be finite and > 0")))?;
    unary(b, &SOFTCAP, UnaryOp::Softcap, x, len, cap)
}

/// `x[i] = s * x[i]` for `i < len` (`s` finite).
pub fn scale_inplace(b: &mut Batch, x: &GpuBuffer<f32>, len: usize, s: f32) -> Result<()> {
    ensure(s.is_finite(), || Error::Argument(format!("scale {s}: must be finite")))?;
    unary(b, &SCALE, UnaryOp::Scale, x, len, s)
}

fn unary(b: &mut Batch, info: &KernelInfo, op: UnaryOp, x: &GpuBuffer<f32>, len: usize, scalar: f32) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(info)?;
    let (vec, params, grid) = elementwise_launch(ctx, len, scalar)?;
    x.require("x", len)?;
    b.dispatch(&ElementwisePipeline::Unary { op, vec }, &params, &[x.raw()], grid)
}

crate::testkit_pub! {
    /// f64 RMSNorm of `rows` rows of length `n = w.len()`, and per element the magnitude
    /// `|x| * inv_rms * |w|` its error is normalised by.
    pub fn reference_rmsnorm(x: &[f32], w: &[f32], rows: usize, eps: f32) -> (Vec<f64>, Vec<f64>) {
        let n = w.len();
        let (mut y, mut mag) = (Vec::with_capacity(rows * n), Vec::with_capacity(rows * n));
        for r in 0..rows {
            let row = &x[r * n..(r + 1) * n];
            let ss: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum();
            let inv = 1.0 / (ss / n as f64 + eps as f64).sqrt();
            for (&v, &g) in row.iter().zip(w) {
                y.push(v as f64 * inv * g as f64);
                mag.push((v as f64 * inv * g as f64).abs());
            }
        }
        (y, mag)
    }
}

crate::testkit_pub! {
    /// f64 `act(a)`.
    pub fn reference_activation(act: Activation, a: f64) -> f64 {
        match act {
            Activation::Silu => a / (1.0 + (-a).exp()),
            // a / 2 * (1 + tanh(u)) written as a / (1 + exp(-2 u)), its equal that does not
            // cancel to 0 where tanh(u) rounds to -1.
            Activation::GeluTanh => a / (1.0 + (-2.0 * (2.0 / std::f64::consts::PI).sqrt() * (a + 0.044715 * a * a * a)).exp()),
        }
    }
}

crate::testkit_pub! {
    /// f64 `act(a) * b` and its magnitude `|act(a) * b|`, floored at 1e-30: GELU of a very
    /// negative input is below f32's normal range (1.2e-38; GPUs may flush it to 0) or 0 in f32.
    pub fn reference_gate(act: Activation, a: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let y: Vec<f64> = a.iter().zip(b).map(|(&a, &b)| reference_activation(act, a as f64) * b as f64).collect();
        let mag = y.iter().map(|v| v.abs().max(1e-30)).collect();
        (y, mag)
    }
}

crate::testkit_pub! {
    /// f64 `cap * tanh(x / cap)` and its magnitude `|x|` (the input's rounding carries through).
    pub fn reference_softcap(x: &[f32], cap: f32) -> (Vec<f64>, Vec<f64>) {
        let c = cap as f64;
        x.iter().map(|&v| (c * (v as f64 / c).tanh(), (v as f64).abs())).unzip()
    }
}

crate::testkit_pub! {
    /// f64 `a + b` and its magnitude `|a| + |b|`.
    pub fn reference_add(a: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
        a.iter().zip(b).map(|(&a, &b)| (a as f64 + b as f64, (a as f64).abs() + (b as f64).abs())).unzip()
    }
}

#[cfg(feature = "testkit")]
pub use cases::kernels;

/// The family's params structs and the WGSL pipelines that bind each (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let all: Vec<_> = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let of = |variants: &[&str]| crate::kernels::pipelines_of(&all, variants);
    vec![crate::kernels::params_twin!(NormParams, of(&["RmsNorm"])), crate::kernels::params_twin!(OpParams, of(&["Binary", "Unary"]))]
}

#[cfg(feature = "testkit")]
mod cases {
    use super::*;
    use crate::context::Context;
    use crate::suite::{compare, describe_all, guarded_f32, Case, Check, Kernel, PlanCase, Prepared, Rng};

    /// Lengths that run each mode: scalar (odd) and whole vec4s.
    const MODE_LENS: [usize; 2] = [255, 256];

    pub fn kernels() -> Vec<&'static dyn Kernel> {
        vec![
            &NormKernel(false),
            &NormKernel(true),
            &BinKernel(BinaryOp::SiluGate),
            &BinKernel(BinaryOp::GeluTanhGate),
            &BinKernel(BinaryOp::Add),
            &UnaryKernel(UnaryOp::Softcap),
            &UnaryKernel(UnaryOp::Scale),
        ]
    }

    /// RMSNorm; `.0`: added to the output ([`rmsnorm_add`]).
    struct NormKernel(bool);

    impl Kernel for NormKernel {
        fn info(&self) -> &'static KernelInfo {
            if self.0 {
                &RMSNORM_ADD
            } else {
                &RMSNORM
            }
        }
        fn test_cases(&self) -> Vec<Box<dyn Case>> {
            let shapes = [(1, 1), (1, 7), (3, 33), (5, 255), (2, 256), (1, 257), (7, 1000), (1, 4096), (2, 5120), (3, 11008), (1, 12347)];
            shapes.into_iter().map(|(rows, n)| Box::new(NormCase { rows, n, add: self.0 }) as Box<dyn Case>).collect()
        }
        fn bench_cases(&self) -> Vec<Box<dyn Case>> {
            [(1, 4096), (32, 4096), (512, 4096)].into_iter().map(|(rows, n)| Box::new(NormCase { rows, n, add: self.0 }) as Box<dyn Case>).collect()
        }
        fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
            describe_all([Variant::Portable, Variant::Subgroup].map(|variant| ElementwisePipeline::RmsNorm { variant, add: self.0 }))
        }
    }

    struct NormCase {
        rows: usize,
        n: usize,
        add: bool,
    }

    struct NormPrepared {
        x: Vec<GpuBuffer<f32>>,
        w: GpuBuffer<f32>,
        y: Vec<GpuBuffer<f32>>,
        rows: usize,
        n: usize,
        eps: f32,
        add: bool,
        reference: (Vec<f64>, Vec<f64>),
    }

    impl Case for NormCase {
        fn name(&self) -> String {
            format!("rows={} n={}", self.rows, self.n)
        }
        fn bytes(&self) -> u64 {
            (4 * (2 * self.rows * self.n + self.n)) as u64
        }
        fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
            let total = self.rows * self.n;
            // Rows of very different scales: the normalisation must undo them.
            let mut x = rng.normal_vec(total);
            for r in 0..self.rows {
                let s = 10f32.powf(rng.uniform(-2.0, 2.0));
                x[r * self.n..(r + 1) * self.n].iter_mut().for_each(|v| *v *= s);
            }
            let w = rng.uniform_vec(self.n, -2.0, 2.0);
            let eps = rng.uniform(1e-6, 1e-5);
            let mut reference = reference_rmsnorm(&x, &w, self.rows, eps);
            let y0 = if self.add {
                // The residual the rows are added to (guards after it, poisoned).
                let mut y0 = rng.uniform_vec(total, -4.0, 4.0);
                for (i, &v) in y0.iter().enumerate() {
                    reference.0[i] += v as f64;
                    reference.1[i] += (v as f64).abs();
                }
                y0.extend(std::iter::repeat_n(f32::from_bits(crate::suite::POISON_F32), crate::suite::GUARD));
                ctx.upload(&y0)?
            } else {
                guarded_f32(ctx, total)?
            };
            let mut xs = vec![ctx.upload(&x)?];
            let mut ys = vec![y0];
            for _ in 1..copies {
                xs.push(ctx.upload(&rng.normal_vec(total))?);
                ys.push(ctx.alloc(total)?);
            }
            Ok(Box::new(NormPrepared { x: xs, w: ctx.upload(&w)?, y: ys, rows: self.rows, n: self.n, eps, add: self.add, reference }))
        }
    }

    impl Prepared for NormPrepared {
        fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
            let c = copy % self.x.len();
            norm_any(b, self.add, &self.x[c], &self.w, &self.y[c], self.rows, self.n, self.eps)
        }
        fn check(&self, ctx: &Context) -> Result<Check> {
            Ok(compare(&ctx.read(&self.y[0])?, &self.reference.0, &self.reference.1, 1e-5))
        }
    }

    struct BinKernel(BinaryOp);

    impl Kernel for BinKernel {
        fn info(&self) -> &'static KernelInfo {
            match self.0 {
                BinaryOp::Add => &ADD,
                BinaryOp::SiluGate => &SILU_GATE,
                BinaryOp::GeluTanhGate => &GELU_GATE,
            }
        }
        fn test_cases(&self) -> Vec<Box<dyn Case>> {
            let lens = [1usize, 3, 255, 256, 257, 1000, 4096, 11008, 65537, 70001];
            lens.iter()
                .enumerate()
                .map(|(i, &len)| Box::new(BinCase { op: self.0, len, inplace: i % 2 == 1 }) as Box<dyn Case>)
                .chain([Box::new(BinCase { op: self.0, len: 4095, inplace: false }) as Box<dyn Case>])
                .collect()
        }
        fn bench_cases(&self) -> Vec<Box<dyn Case>> {
            let decode = match self.0 {
                BinaryOp::Add => 4096,
                BinaryOp::SiluGate | BinaryOp::GeluTanhGate => 14336,
            };
            [(decode, true), (1 << 24, false), (1 << 24, true)].into_iter().map(|(len, inplace)| Box::new(BinCase { op: self.0, len, inplace }) as Box<dyn Case>).collect()
        }
        fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
            describe_all(self.mode_cases().map(|c| ElementwisePipeline::Binary { op: self.0, inplace: c.inplace, vec: c.len % 4 == 0 }))
        }
        fn plan_cases(&self) -> Vec<PlanCase> {
            self.mode_cases().map(|c| PlanCase::new(None, crate::Tuning::default(), Box::new(c))).collect()
        }
    }

    impl BinKernel {
        /// One case per pipeline (separate output or in place, scalar or vec4).
        fn mode_cases(&self) -> impl Iterator<Item = BinCase> + '_ {
            [false, true].into_iter().flat_map(move |inplace| MODE_LENS.map(|len| BinCase { op: self.0, len, inplace }))
        }
    }

    struct BinCase {
        op: BinaryOp,
        len: usize,
        inplace: bool,
    }

    struct BinPrepared {
        case: (BinaryOp, usize, bool),
        a: Vec<GpuBuffer<f32>>,
        b: Vec<GpuBuffer<f32>>,
        y: Vec<GpuBuffer<f32>>,
        reference: (Vec<f64>, Vec<f64>),
    }

    impl Case for BinCase {
        fn name(&self) -> String {
            format!("n={}{}", self.len, if self.inplace { " in-place" } else { "" })
        }
        fn bytes(&self) -> u64 {
            12 * self.len as u64
        }
        fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
            let input = |rng: &mut Rng| rng.normal_vec(self.len).into_iter().map(|v| 3.0 * v).collect::<Vec<f32>>();
            let (a, b) = (input(rng), input(rng));
            let reference = match self.op {
                BinaryOp::Add => reference_add(&a, &b),
                BinaryOp::SiluGate => reference_gate(Activation::Silu, &a, &b),
                BinaryOp::GeluTanhGate => reference_gate(Activation::GeluTanh, &a, &b),
            };
            // In place, `a` is the output: it gets the guard region.
            let mut a_host = a.clone();
            if self.inplace {
                a_host.resize(self.len + crate::suite::GUARD, f32::from_bits(crate::suite::POISON_F32));
            }
            let (mut av, mut bv, mut yv) = (vec![ctx.upload(&a_host)?], vec![ctx.upload(&b)?], Vec::new());
            if !self.inplace {
                yv.push(guarded_f32(ctx, self.len)?);
            }
            for _ in 1..copies {
                av.push(ctx.upload(&input(rng))?);
                bv.push(ctx.upload(&input(rng))?);
                if !self.inplace {
                    yv.push(ctx.alloc(self.len)?);
                }
            }
            Ok(Box::new(BinPrepared { case: (self.op, self.len, self.inplace), a: av, b: bv, y: yv, reference }))
        }
    }

    impl Prepared for BinPrepared {
        fn encode(&self, bt: &mut Batch, copy: usize) -> Result<()> {
            let (op, len, inplace) = self.case;
            let c = copy % self.a.len();
            let (a, b) = (&self.a[c], &self.b[c]);
            let act = match op {
                BinaryOp::Add => None,
                BinaryOp::SiluGate => Some(Activation::Silu),
                BinaryOp::GeluTanhGate => Some(Activation::GeluTanh),
            };
            match (act, inplace) {
                (None, false) => add(bt, a, b, &self.y[c], len),
                (None, true) => add_inplace(bt, a, b, len),
                (Some(act), false) => gate(bt, act, a, b, &self.y[c], len),
                (Some(act), true) => gate_inplace(bt, act, a, b, len),
            }
        }
        fn check(&self, ctx: &Context) -> Result<Check> {
            let (op, _, inplace) = self.case;
            let out = ctx.read(if inplace { &self.a[0] } else { &self.y[0] })?;
            // Add rounds once; the gates' exp is within a few ulp on every backend we know.
            let tol = if op == BinaryOp::Add { 1e-6 } else { 2e-5 };
            Ok(compare(&out, &self.reference.0, &self.reference.1, tol))
        }
    }

    struct UnaryKernel(UnaryOp);

    impl Kernel for UnaryKernel {
        fn info(&self) -> &'static KernelInfo {
            match self.0 {
                UnaryOp::Softcap => &SOFTCAP,
                UnaryOp::Scale => &SCALE,
            }
        }
        fn test_cases(&self) -> Vec<Box<dyn Case>> {
            // Gemma 2's caps (30 on the final logits, 50 on attention scores) and a small one;
            // scales like Gemma's sqrt(hidden).
            [(1usize, 30.0f32), (3, 50.0), (257, 30.0), (1000, 0.5), (4095, 30.0), (65537, 30.0)]
                .into_iter()
                .map(|(len, cap)| Box::new(UnaryCase { op: self.0, len, cap }) as Box<dyn Case>)
                .collect()
        }
        fn bench_cases(&self) -> Vec<Box<dyn Case>> {
            vec![Box::new(UnaryCase { op: self.0, len: 256_000, cap: 30.0 })]
        }
        fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
            describe_all(MODE_LENS.map(|len| ElementwisePipeline::Unary { op: self.0, vec: len % 4 == 0 }))
        }
        /// One case per pipeline (scalar, vec4).
        fn plan_cases(&self) -> Vec<PlanCase> {
            MODE_LENS.iter().map(|&len| PlanCase::new(None, crate::Tuning::default(), Box::new(UnaryCase { op: self.0, len, cap: 30.0 }))).collect()
        }
    }

    struct UnaryCase {
        op: UnaryOp,
        len: usize,
        cap: f32,
    }

    struct UnaryPrepared {
        op: UnaryOp,
        x: Vec<GpuBuffer<f32>>,
        len: usize,
        cap: f32,
        reference: (Vec<f64>, Vec<f64>),
    }

    impl Case for UnaryCase {
        fn name(&self) -> String {
            format!("n={} {}={}", self.len, if self.op == UnaryOp::Scale { "s" } else { "cap" }, self.cap)
        }
        fn bytes(&self) -> u64 {
            8 * self.len as u64
        }
        fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
            // Logits from well inside the cap to far past it (tanh saturated).
            let input = |rng: &mut Rng| rng.normal_vec(self.len).into_iter().map(|v| 2.0 * self.cap * v).collect::<Vec<f32>>();
            let x = input(rng);
            let reference = match self.op {
                UnaryOp::Softcap => reference_softcap(&x, self.cap),
                UnaryOp::Scale => x.iter().map(|&v| (v as f64 * self.cap as f64, (v as f64 * self.cap as f64).abs())).unzip(),
            };
            let mut host = x;
            host.resize(self.len + crate::suite::GUARD, f32::from_bits(crate::suite::POISON_F32));
            let mut xs = vec![ctx.upload(&host)?];
            for _ in 1..copies {
                xs.push(ctx.upload(&input(rng))?);
            }
            Ok(Box::new(UnaryPrepared { op: self.op, x: xs, len: self.len, cap: self.cap, reference }))
        }
    }

    impl Prepared for UnaryPrepared {
        fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
            let x = &self.x[copy % self.x.len()];
            match self.op {
                UnaryOp::Softcap => softcap_inplace(b, x, self.len, self.cap),
                UnaryOp::Scale => scale_inplace(b, x, self.len, self.cap),
            }
        }
        fn check(&self, ctx: &Context) -> Result<Check> {
            Ok(compare(&ctx.read(&self.x[0])?, &self.reference.0, &self.reference.1, 2e-5))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BindCache;
    use crate::context::{Context, ContextOptions};

    fn ctx() -> Context {
        Context::new_blocking(ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)")
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let ctx = ctx();
        let (a, b, y) = (ctx.upload(&[1f32; 8]).unwrap(), ctx.upload(&[2f32; 8]).unwrap(), ctx.alloc::<f32>(8).unwrap());
        let w = ctx.upload(&[1f32; 4]).unwrap();
        let mut bt = ctx.batch();
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 0, 4, 1e-5), Err(Error::Shape(_))));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 2, 0, 1e-5), Err(Error::Shape(_))));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 3, 4, 1e-5), Err(Error::BufferTooSmall { name: "x", .. })));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 1, 8, 1e-5), Err(Error::BufferTooSmall { name: "w", .. })));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 2, 4, f32::NAN), Err(Error::Argument(_))));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &y, 2, 4, -1.0), Err(Error::Argument(_))));
        assert!(matches!(rmsnorm(&mut bt, &a, &w, &a, 2, 4, 1e-5), Err(Error::Argument(_))));
        assert!(matches!(add(&mut bt, &a, &b, &y, 0), Err(Error::Shape(_))));
        assert!(matches!(add(&mut bt, &a, &b, &y, 9), Err(Error::BufferTooSmall { .. })));
        assert!(matches!(add(&mut bt, &a, &b, &a, 8), Err(Error::Argument(_))));
        assert!(matches!(silu_gate(&mut bt, &a, &b, &b, 8), Err(Error::Argument(_))));
        assert!(matches!(add_inplace(&mut bt, &a, &a, 8), Err(Error::Argument(_))));
        assert!(matches!(silu_gate_inplace(&mut bt, &a, &a, 8), Err(Error::Argument(_))));
        assert!(matches!(gate(&mut bt, Activation::GeluTanh, &a, &b, &a, 8), Err(Error::Argument(_))));
        assert!(matches!(gate_inplace(&mut bt, Activation::GeluTanh, &a, &b, 9), Err(Error::BufferTooSmall { .. })));
        for cap in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(matches!(softcap_inplace(&mut bt, &a, 8, cap), Err(Error::Argument(_))), "cap {cap}");
        }
        assert!(matches!(softcap_inplace(&mut bt, &a, 9, 30.0), Err(Error::BufferTooSmall { .. })));
        assert!(matches!(softcap_inplace(&mut bt, &a, 0, 30.0), Err(Error::Shape(_))));
        assert!(matches!(scale_inplace(&mut bt, &a, 8, f32::NAN), Err(Error::Argument(_))));
        assert!(matches!(scale_inplace(&mut bt, &a, 9, 2.0), Err(Error::BufferTooSmall { .. })));
        assert!(bt.is_empty(), "a rejected call recorded a dispatch");
        // a == b is fine out of place (both read-only).
        add(&mut bt, &a, &a, &y, 8).unwrap();
        bt.run().unwrap();
        assert_eq!(ctx.read(&y).unwrap(), vec![2f32; 8]);
    }

    /// Batches through a BindCache reuse bind groups and parameter blocks, stay correct when the
    /// parameters or buffers change, and survive the cache clearing itself at capacity.
    #[test]
    fn bind_cache_reuse_and_eviction() {
        let ctx = ctx();
        let cache = BindCache::new(3);
        let n = 1000;
        let a_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b = ctx.upload(&vec![0.5f32; n]).unwrap();
        let ys: Vec<_> = (0..3).map(|_| ctx.alloc::<f32>(n).unwrap()).collect();
        let a = ctx.upload(&a_host).unwrap();
        for round in 0..4 {
            for (j, y) in ys.iter().enumerate() {
                let len = n - 100 * j - round;
                ctx.write(y, &vec![-1f32; n]).unwrap();
                let mut bt = ctx.batch().with_cache(&cache);
                add(&mut bt, &a, &b, y, len).unwrap();
                add(&mut bt, &a, &b, y, len).unwrap(); // same key twice in one batch: a hit
                bt.run().unwrap();
                let out = ctx.read(y).unwrap();
                for (i, v) in out.iter().enumerate() {
                    let want = if i < len { a_host[i] + 0.5 } else { -1.0 };
                    assert_eq!(*v, want, "round {round} y{j} [{i}]");
                }
            }
            assert!(cache.len() <= 4, "cache holds {} bind groups past its capacity of 3", cache.len());
        }
        cache.clear();
        assert!(cache.is_empty());
    }
}
