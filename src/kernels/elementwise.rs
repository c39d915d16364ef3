//! Elementwise kernels of a transformer decode step, f32:
//!
//! * [`rmsnorm`]: `y[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]` per row, any row
//!   length (one workgroup per row; Portable reduces in workgroup memory, Subgroup with
//!   `subgroupAdd`, correct for any subgroup size).
//! * [`rmsnorm_qk`]: two groups of rows of one length, each with its own weight and output, in
//!   one dispatch (the per-head q and k norms of Qwen3 and Gemma 3); arithmetic of [`rmsnorm`].
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
//! Sources: wgsl/elementwise_rmsnorm.wgsl (and elementwise_rmsnorm_qk.wgsl) +
//! elementwise_rmsnorm_row.wgsl (the row loop) + elementwise_reduce_{portable,subgroup}.wgsl,
//! elementwise_ops.wgsl + glu.wgsl (the gate of a gated linear unit, shared with the GEMV epilogue and
//! the prefill's gate/up pairs) + elementwise_{binary,inplace,unary}.wgsl.
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
pub const RMSNORM_QK: KernelInfo = KernelInfo::new("elementwise_rmsnorm_qk", &[Variant::Portable, Variant::Subgroup], None);
pub const RMSNORM_ADD: KernelInfo = KernelInfo::new("elementwise_rmsnorm_add", &[Variant::Portable, Variant::Subgroup], None);
pub const SILU_GATE: KernelInfo = KernelInfo::new("elementwise_silu_gate", &[Variant::Portable], None);
pub const GELU_GATE: KernelInfo = KernelInfo::new("elementwise_gelu_gate", &[Variant::Portable], None);
pub const ADD: KernelInfo = KernelInfo::new("elementwise_add", &[Variant::Portable], None);
pub const SOFTCAP: KernelInfo = KernelInfo::new("elementwise_softcap", &[Variant::Portable], None);
pub const SCALE: KernelInfo = KernelInfo::new("elementwise_scale", &[Variant::Portable], None);

const RMSNORM_WGSL: &str = include_str!("../../wgsl/elementwise_rmsnorm.wgsl");
const RMSNORM_QK_WGSL: &str = include_str!("../../wgsl/elementwise_rmsnorm_qk.wgsl");
const RMSNORM_ROW_WGSL: &str = include_str!("../../wgsl/elementwise_rmsnorm_row.wgsl");
const REDUCE_PORTABLE: &str = include_str!("../../wgsl/elementwise_reduce_portable.wgsl");
const REDUCE_SUBGROUP: &str = include_str!("../../wgsl/elementwise_reduce_subgroup.wgsl");
const OPS_WGSL: &str = include_str!("../../wgsl/elementwise_ops.wgsl");
/// The gate of a gated linear unit (`glu_act`), over the element type `T` of an [`ELEM_F32`] /
/// [`ELEM_VEC4`] line put first.
pub(crate) const GLU_WGSL: &str = include_str!("../../wgsl/glu.wgsl");
const BINARY_WGSL: &str = include_str!("../../wgsl/elementwise_binary.wgsl");
const INPLACE_WGSL: &str = include_str!("../../wgsl/elementwise_inplace.wgsl");
const UNARY_WGSL: &str = include_str!("../../wgsl/elementwise_unary.wgsl");

/// Invocations per RMSNorm workgroup (one row per workgroup).
pub const RMSNORM_WG: u32 = 256;
/// Invocations per [`rmsnorm_qk`] workgroup (one row, an attention head of 64 to 256 values).
pub const RMSNORM_QK_WG: u32 = 128;
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
    struct QkNormParams {
        rows: u32,
        n: u32,
        eps: f32,
        /// Rows of the first group (q); rows past it are the second group's (k).
        rows_q: u32,
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
const QK_NORM_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("xq", "f32"),
    StorageBinding::read("wq", "f32"),
    StorageBinding::write("yq", "f32"),
    StorageBinding::read("xk", "f32"),
    StorageBinding::read("wk", "f32"),
    StorageBinding::write("yk", "f32"),
];
const BINARY_BINDINGS: &[StorageBinding] = &[StorageBinding::read("a", "f32"), StorageBinding::read("b", "f32"), StorageBinding::write("y", "f32")];
const INPLACE_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "f32"), StorageBinding::read("b", "f32")];
const BINARY_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::read("a", "vec4<f32>"), StorageBinding::read("b", "vec4<f32>"), StorageBinding::write("y", "vec4<f32>")];
const INPLACE_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "vec4<f32>"), StorageBinding::read("b", "vec4<f32>")];
const UNARY_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "f32")];
const UNARY_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "vec4<f32>")];
pub(crate) const ELEM_F32: &str = "alias T = f32;\n";
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
    /// [`rmsnorm_qk`]: two groups of rows.
    RmsNormQk { variant: Variant },
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
                source: ShaderSource::Wgsl(vec![RMSNORM_WGSL, RMSNORM_ROW_WGSL, reduce_source(variant)]),
                entry: "main",
                constants: vec![("WG", RMSNORM_WG as f64), ("ADD", add as u32 as f64)],
                workgroup_size: [RMSNORM_WG, 1, 1],
                params_size: std::mem::size_of::<NormParams>() as u64,
                bindings: NORM_BINDINGS,
            },
            ElementwisePipeline::RmsNormQk { variant } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![RMSNORM_QK_WGSL, RMSNORM_ROW_WGSL, reduce_source(variant)]),
                entry: "main",
                constants: vec![("WG", RMSNORM_QK_WG as f64)],
                workgroup_size: [RMSNORM_QK_WG, 1, 1],
                params_size: std::mem::size_of::<QkNormParams>() as u64,
                bindings: QK_NORM_BINDINGS,
            },
            ElementwisePipeline::Binary { op, inplace, vec } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![if vec { ELEM_VEC4 } else { ELEM_F32 }, OPS_WGSL, GLU_WGSL, if inplace { INPLACE_WGSL } else { BINARY_WGSL }]),
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
                source: ShaderSource::Wgsl(vec![if vec { ELEM_VEC4 } else { ELEM_F32 }, OPS_WGSL, GLU_WGSL, UNARY_WGSL]),
                entry: "main",
                constants: vec![("OP", op as u32 as f64)],
                workgroup_size: [BINARY_WG as u32, 1, 1],
                params_size: std::mem::size_of::<OpParams>() as u64,
                bindings: if vec { UNARY_VEC_BINDINGS } else { UNARY_BINDINGS },
            },
        }
    }
}

/// The workgroup sum (and entry point) of the row kernels for `variant`.
fn reduce_source(variant: Variant) -> &'static str {
    if variant == Variant::Subgroup {
        REDUCE_SUBGROUP
    } else {
        REDUCE_PORTABLE
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

/// One group of rows of [`rmsnorm_qk`]: `rows` rows of `x` normalised with the weight `w` into
/// `y` (`rows * n` values each).
#[derive(Clone, Copy)]
pub struct NormRows<'a> {
    pub x: &'a GpuBuffer<f32>,
    pub w: &'a GpuBuffer<f32>,
    pub y: &'a GpuBuffer<f32>,
    pub rows: usize,
}

/// [`rmsnorm`] of two groups of rows of length `n` in one dispatch, each group with its own
/// weight (`n` values) and output: the per-head q and k norms of an attention block (`q.rows`
/// = tokens x heads, `k.rows` = tokens x KV heads, `n` = head dim). Both groups need rows; the
/// outputs must be distinct buffers, and no input may share a buffer with an output (the inputs
/// may share one, e.g. views of one projection's output). `eps` finite and `>= 0`.
pub fn rmsnorm_qk(b: &mut Batch, q: NormRows, k: NormRows, n: usize, eps: f32) -> Result<()> {
    let ctx = b.context();
    let variant = ctx.variant_for(&RMSNORM_QK)?;
    ensure(q.rows > 0 && k.rows > 0 && n > 0, || Error::Shape(format!("q rows = {}, k rows = {}, n = {n}: all must be > 0", q.rows, k.rows)))?;
    ensure(eps.is_finite() && eps >= 0.0, || Error::Argument(format!("eps = {eps}: must be finite and >= 0")))?;
    for (g, names) in [(&q, ["xq", "wq", "yq"]), (&k, ["xk", "wk", "yk"])] {
        let total = g.rows.checked_mul(n).ok_or_else(|| Error::Shape("rows * n overflows".into()))?;
        check_len(total)?;
        g.x.require(names[0], total)?;
        g.w.require(names[1], n)?;
        g.y.require(names[2], total)?;
    }
    let rows = u32::try_from(q.rows + k.rows).map_err(|_| Error::Shape(format!("{} + {} rows exceed u32", q.rows, k.rows)))?;
    distinct("rmsnorm_qk (yq, yk)", q.y.raw(), k.y.raw())?;
    for input in [q.x, q.w, k.x, k.w] {
        distinct("rmsnorm_qk (yq)", input.raw(), q.y.raw())?;
        distinct("rmsnorm_qk (yk)", input.raw(), k.y.raw())?;
    }
    let params = QkNormParams { rows, n: n as u32, eps, rows_q: q.rows as u32 };
    let bufs = [q.x.raw(), q.w.raw(), q.y.raw(), k.x.raw(), k.w.raw(), k.y.raw()];
    b.dispatch(&ElementwisePipeline::RmsNormQk { variant }, &params, &bufs, ctx.grid(rows as u64)?)
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
    vec![
        crate::kernels::params_twin!(NormParams, of(&["RmsNorm"])),
        crate::kernels::params_twin!(QkNormParams, of(&["RmsNormQk"])),
        crate::kernels::params_twin!(OpParams, of(&["Binary", "Unary"])),
    ]
}

#[cfg(feature = "testkit")]
mod cases;

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
        let rows = |x, y, rows| NormRows { x, w: &w, y, rows };
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&b, &y, 1), 4, 1e-5), Err(Error::Argument(_))), "one output twice");
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&y, &b, 1), 4, 1e-5), Err(Error::Argument(_))), "k input is q's output");
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&y, &a, 1), 4, 1e-5), Err(Error::Argument(_))), "each output another's input");
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&b, &w, 1), 4, 1e-5), Err(Error::Argument(_))), "k output is a weight");
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 0), rows(&b, &b, 1), 4, 1e-5), Err(Error::Shape(_))));
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 3), rows(&a, &b, 1), 4, 1e-5), Err(Error::BufferTooSmall { name: "xq", .. })));
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&a, &b, 1), 8, 1e-5), Err(Error::BufferTooSmall { name: "wq", .. })));
        assert!(matches!(rmsnorm_qk(&mut bt, rows(&a, &y, 1), rows(&a, &b, 1), 4, f32::NAN), Err(Error::Argument(_))));
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

    /// A loop whose parameters change every batch (as a decode step's position does) keeps one
    /// bind group per (layout, uniform chunk, buffers): the parameter block's offset is dynamic.
    /// Evicted parameter slots are written again with new blocks, and the results stay right.
    #[test]
    fn bind_cache_changing_parameters_make_no_bind_groups() {
        let ctx = ctx();
        let cache = BindCache::new(16);
        let n = 300;
        let a_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let a = ctx.upload(&a_host).unwrap();
        let b = ctx.upload(&vec![0.25f32; n]).unwrap();
        let y = ctx.alloc::<f32>(n).unwrap();
        for step in 0..120 {
            let len = n - step;
            ctx.write(&y, &vec![-1f32; n]).unwrap();
            let mut bt = ctx.batch().with_cache(&cache);
            add(&mut bt, &a, &b, &y, len).unwrap();
            bt.run().unwrap();
            let out = ctx.read(&y).unwrap();
            for (i, v) in out.iter().enumerate() {
                let want = if i < len { a_host[i] + 0.25 } else { -1.0 };
                assert_eq!(*v, want, "step {step} [{i}]");
            }
            assert!(cache.len() <= 2, "step {step}: {} bind groups for one layout and one set of buffers", cache.len());
        }
    }
}
