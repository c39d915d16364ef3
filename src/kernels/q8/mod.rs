//! Int8 activations for the INT4 and Q4_K GEMVs (the llama.cpp "q8_1" idea): an OPT-IN path that
//! quantises x once per decode step ([`quantize_activations`]) into a [`Q8Activations`] buffer
//! that any number of GEMVs of the same k then read ([`int4_gemv`] = `int4::gemv_q8`,
//! [`q4k_gemv`] = `q4k::gemv_q8`). The weights meet x through `dot4I8Packed` (4 int8 products
//! summed per instruction), integer sums per 8 (INT4) or 32 (Q4_K) columns and one f32 scaling per
//! (row, x block). Numerics differ from the f32-activation GEMVs (x is rounded to 8 bits per
//! block of 32: `|error| <= sum_c |w_c| * d_b(c) / 2`, see `reference::q8` in the test kit), so nothing
//! selects this path automatically. Non-finite activations propagate (the crate's data policy,
//! [`crate::error`]): a block of 32 holding a NaN or an infinity gets the scale NaN and codes 0, so
//! every GEMV output that reads it is NaN (an infinity gives NaN here, not ±inf).
//!
//! Where it is fast: Vulkan (and DX12) devices with DP4A; naga emits SPIR-V `OpSDot` when the
//! Vulkan device has `shaderIntegerDotProduct` (core in Vulkan 1.3). On Metal naga polyfills
//! `dot4I8Packed` with shifts and multiplies (Apple GPUs have no DP4A): correct, not faster.
//! There is no MSL (Native) twin for the same reason. Measured on an H200 (Vulkan, 2026-11-22,
//! single dispatch): INT4 n=4096 k=14336 g=32 16.4 µs against 30.0 µs for the f32-activation
//! GEMV, Q4_K 19.4 µs against 31.2 µs; the quantisation of x adds one ~3-5 µs dispatch, shared by
//! every GEMV of the same x (docs/PERFORMANCE.md).
//!
//! GPU layout of [`Q8Activations`] (both written by one dispatch, 4 bytes per column in all):
//! `x4`, per 8-column word, `[i8x4 cols 0,2,4,6 | i8x4 cols 1,3,5,7 | d | fl(d * sum q)]` (the
//! order of INT4 nibbles under the masks 0x0f0f0f0f / >> 4), and, when `k % 256 == 0`, `xk`, the
//! Q4_K order (per 64-column quad: 4 vec4 of codes, the 8 sub-block scales and 8 partial sums).
//! Sources: wgsl/q8_quantize.wgsl, int4_gemv_q8.wgsl, q4k_gemv_q8.wgsl (+ team_*.wgsl and the
//! shared row-block driver gemv_rows_driver.wgsl).
//!
//! ```no_run
//! use wgkernels::kernels::{int4, q8};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (n, k) = (256, 512);
//! let w = int4::Int4Matrix::alloc(&ctx, n, k, 32, int4::Int4Mode::Signed)?; // filled by int4::quantize
//! let (x, y) = (ctx.upload(&vec![1.0f32; k])?, ctx.alloc::<f32>(n)?);
//! let xq = q8::Q8Activations::alloc(&ctx, k)?;
//! let mut b = ctx.batch();
//! q8::quantize_activations(&mut b, &x, &xq)?; // once per activation vector...
//! int4::gemv_q8(&mut b, &w, &xq, &y)?; // ...shared by every GEMV that reads it
//! b.run()?;
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::q4k::QK_K;
use crate::kernels::int4::{group_mode, plan_grid, team_source, tuned_plan, GemvParams, GemvPlan, Int4Matrix, ROWS_DRIVER_WGSL};
use crate::kernels::interleave;
use crate::kernels::q4k::Q4kMatrix;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};

/// Activations per Q8 block (one f32 scale each).
pub const QB: usize = 32;
pub const QUANTIZE: KernelInfo = KernelInfo { name: "q8_quantize", variants: &[Variant::Portable], extra: None };
pub const NORM_QUANTIZE: KernelInfo = KernelInfo { name: "q8_rmsnorm_quantize", variants: &[Variant::Portable], extra: None };
pub const INT4_GEMV: KernelInfo = KernelInfo { name: "int4_gemv_q8", variants: &[Variant::Portable, Variant::Subgroup], extra: None };
pub const Q4K_GEMV: KernelInfo = KernelInfo { name: "q4k_gemv_q8", variants: &[Variant::Portable, Variant::Subgroup], extra: None };

const QUANT_WGSL: &str = include_str!("../../../wgsl/q8_quantize.wgsl");
const INT4_WGSL: &str = include_str!("../../../wgsl/int4_gemv_q8.wgsl");
const Q4K_WGSL: &str = include_str!("../../../wgsl/q4k_gemv_q8.wgsl");
const Q4K_COMMON_WGSL: &str = include_str!("../../../wgsl/q4k_common.wgsl");

/// u32 words of the Q4_K-order buffer per 64-column quad (8 vec4).
const XK_WORDS_PER_QUAD: usize = 32;

/// Quantised activations on the GPU: `rows` rows of length `k` (one row for a GEMV; up to
/// [`crate::kernels::matmul::GEMM_Q8_MAX_M`] for `matmul::gemm_q8`), see the module docs for the
/// layout. Rows follow each other as if they were one vector of `rows * k` columns (blocks and
/// Q4_K super-blocks never straddle rows since `k % 32 == 0`, and the Q4_K order exists only
/// when `k % 256 == 0`).
pub struct Q8Activations {
    k: usize,
    rows: usize,
    x4: GpuBuffer<u32>,
    /// Q4_K order; present when `k % 256 == 0`.
    xk: Option<GpuBuffer<u32>>,
}

impl Q8Activations {
    /// Storage for `k` activations (`k > 0`, `k % 32 == 0`): one row.
    pub fn alloc(ctx: &Context, k: usize) -> Result<Q8Activations> {
        Self::alloc_rows(ctx, k, 1)
    }

    /// Storage for `rows` rows of `k` activations each (`k > 0`, `k % 32 == 0`, `rows > 0`).
    pub fn alloc_rows(ctx: &Context, k: usize, rows: usize) -> Result<Q8Activations> {
        ensure(k > 0 && k % QB == 0, || Error::Shape(format!("q8 activations need k > 0 and k % 32 == 0, got k = {k}")))?;
        ensure(rows > 0, || Error::Shape("q8 activations need rows > 0".into()))?;
        let total = rows.checked_mul(k).filter(|&t| t <= u32::MAX as usize / 8).ok_or_else(|| Error::Shape(format!("{rows} rows of k = {k} too large")))?;
        Ok(Q8Activations { k, rows, x4: ctx.alloc(total / 2)?, xk: (k % QK_K == 0).then(|| ctx.alloc(total / 64 * XK_WORDS_PER_QUAD)).transpose()? })
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// Rows of `k` activations this buffer holds.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Quads (64 columns) of all rows: the stride between the record planes of the Q4_K order.
    pub fn quads(&self) -> usize {
        self.rows * self.k / 64
    }
    /// `Ok` when this holds one row (what the GEMVs read), else a shape error naming `op`.
    pub(crate) fn require_one_row(&self, op: &str) -> Result<()> {
        ensure(self.rows == 1, || Error::Shape(format!("{op} reads one row of q8 activations; these hold {} (matmul::gemm_q8 multiplies several)", self.rows)))
    }
    /// Whether the Q4_K order is present (`k % 256 == 0`).
    pub fn has_q4k(&self) -> bool {
        self.xk.is_some()
    }
    /// The INT4-order words (4 per 8 columns).
    pub fn int4_words(&self) -> &GpuBuffer<u32> {
        &self.x4
    }
    /// The Q4_K-order words (32 per 64 columns), when `k % 256 == 0`.
    pub fn q4k_words(&self) -> Option<&GpuBuffer<u32>> {
        self.xk.as_ref()
    }
    /// Bytes an INT4 GEMV reads of x (2 per column).
    pub fn int4_bytes(&self) -> u64 {
        self.k as u64 * 2
    }
    /// Bytes a Q4_K GEMV reads of x (2 per column).
    pub fn q4k_bytes(&self) -> u64 {
        self.k as u64 * 2
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct QuantParams {
    blocks: u32,
    quads: u32,
    has_q4k: u32,
    /// RMSNorm epsilon (NormQuantize only).
    eps: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Q4kParams {
    n: u32,
    k: u32,
    nb: u32,
    quads: u32,
}

const QUANT_BINDINGS: &[StorageBinding] = &[StorageBinding::read("x", "vec4<f32>"), StorageBinding::write("x4", "vec4<u32>"), StorageBinding::write("xk", "vec4<u32>")];
const NORM_QUANT_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("x", "vec4<f32>"),
    StorageBinding::write("x4", "vec4<u32>"),
    StorageBinding::write("xk", "vec4<u32>"),
    StorageBinding::read("nw", "vec4<f32>"),
    StorageBinding::write("xn", "vec4<f32>"),
];
const INT4_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("codes", "vec4<u32>"),
    StorageBinding::read("scales", "f32"),
    StorageBinding::read("zeros", "f32"),
    StorageBinding::read("x4", "vec4<u32>"),
    StorageBinding::write("y", "f32"),
];
const Q4K_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("heads", "vec4<u32>"), StorageBinding::read("qs", "vec4<u32>"), StorageBinding::read("xk", "vec4<u32>"), StorageBinding::write("y", "f32")];

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Q8Pipeline {
    Quantize,
    NormQuantize,
    Int4Gemv { variant: Variant, plan: GemvPlan, gshift: u32, zeros: bool },
    Q4kGemv { variant: Variant, plan: GemvPlan },
}

impl PipelineKey for Q8Pipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            Q8Pipeline::Quantize => PipelineDesc {
                source: ShaderSource::Wgsl(vec![QUANT_WGSL]),
                entry: "main",
                constants: vec![],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<QuantParams>() as u64,
                bindings: QUANT_BINDINGS,
            },
            Q8Pipeline::NormQuantize => PipelineDesc {
                source: ShaderSource::Wgsl(vec![QUANT_WGSL]),
                entry: "main_norm",
                constants: vec![],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<QuantParams>() as u64,
                bindings: NORM_QUANT_BINDINGS,
            },
            Q8Pipeline::Int4Gemv { variant, plan, gshift, zeros } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![team_source(variant), interleave::WGSL, INT4_WGSL, ROWS_DRIVER_WGSL]),
                entry: "main",
                constants: plan.constants(variant, &[("GSHIFT", gshift as f64), ("ZEROS", zeros as u32 as f64)]),
                workgroup_size: [plan.wg, 1, 1],
                params_size: std::mem::size_of::<GemvParams>() as u64,
                bindings: INT4_BINDINGS,
            },
            Q8Pipeline::Q4kGemv { variant, plan } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![team_source(variant), Q4K_COMMON_WGSL, crate::kernels::q4k::ROWS_WGSL, Q4K_WGSL, ROWS_DRIVER_WGSL]),
                entry: "main",
                constants: plan.constants(variant, &[]),
                workgroup_size: [plan.wg, 1, 1],
                params_size: std::mem::size_of::<Q4kParams>() as u64,
                bindings: Q4K_BINDINGS,
            },
        }
    }
}

/// Plan and grid of a q8 GEMV over `n` rows of `k` columns (`int4`: the INT4 kernel, else Q4_K).
/// Defaults, each the fastest configuration measured on an H200 (2026-11-22, env sweeps of the
/// same binary): teams of 32 lanes (Subgroup: one subgroup each) in workgroups of 256, 2 steps
/// per lane per iteration, 1 row per team when `n < 8192` (more teams in flight), else 2; for
/// INT4 with `n < 8192` and `k >= 8192` (few rows, long rows) whole-workgroup teams instead:
/// Subgroup 128 invocations x 2 rows, Portable 256 x 4 rows. `WGKERNELS_Q8_WG` / `_ROWS` /
/// `_UNROLL` / `_TEAM` / `_PLANES` override them (tuning experiments), as for the f32 GEMVs.
fn plan(ctx: &Context, n: usize, k: usize, int4: bool, variant: Variant) -> Result<(GemvPlan, [u32; 3])> {
    let portable = variant == Variant::Portable;
    let default = if int4 && n < 8192 && k >= 8192 {
        if portable {
            GemvPlan { wg: 256, rows: 4, unroll: 2, team: 256 }
        } else {
            GemvPlan { wg: 128, rows: 2, unroll: 2, team: 0 }
        }
    } else {
        GemvPlan { wg: 256, rows: if n < 8192 { 1 } else { 2 }, unroll: 2, team: if portable { 32 } else { 1 } }
    };
    let plan = tuned_plan(&ctx.caps().tuning.q8_gemv, variant, default);
    Ok((plan, plan_grid(ctx, &plan, n, variant)?))
}

/// Quantise `x[0..k]` (`k = xq.k()`; every row, `x[0..rows * k]`, when `xq` holds several) into
/// `xq`: int8 blocks of 32 with one f32 scale each, written in both GEMV orders. Record it once
/// per activation vector and reuse `xq` for every GEMV that multiplies it.
pub fn quantize_activations(b: &mut Batch, x: &GpuBuffer<f32>, xq: &Q8Activations) -> Result<()> {
    quantize_rows(b, x, xq, xq.rows)
}

/// Quantise the first `m` rows of `x` (row-major, `m * k` values, `k = xq.k()`) into the first
/// `m` rows of `xq` (`1 <= m <= xq.rows()`), each row exactly as [`quantize_activations`]
/// quantises one vector (spec: `reference::q8::quantize` of the row, in the test kit).
pub fn quantize_rows(b: &mut Batch, x: &GpuBuffer<f32>, xq: &Q8Activations, m: usize) -> Result<()> {
    b.context().variant_for(&QUANTIZE)?;
    record_quantize(b, x, xq, m)
}

/// [`quantize_rows`] whatever variant the context's policy asks for (the quantiser has one, and
/// runs on every adapter): for the harness cases that time it as the input stage of the kernel
/// under test (`matmul::gemm_q8`) under each of that kernel's variants.
pub(crate) fn record_quantize(b: &mut Batch, x: &GpuBuffer<f32>, xq: &Q8Activations, m: usize) -> Result<()> {
    let ctx = b.context();
    ensure(m >= 1 && m <= xq.rows, || Error::Shape(format!("quantise m = {m} rows into q8 activations of {} rows", xq.rows)))?;
    // m * k <= rows * k, which alloc_rows bounded.
    let cols = m * xq.k;
    x.require("x", cols)?;
    let params = QuantParams { blocks: (cols / QB) as u32, quads: xq.quads() as u32, has_q4k: xq.xk.is_some() as u32, eps: 0.0 };
    let xk = xq.xk.as_ref().map_or_else(|| ctx.dummy(), |b| b.raw());
    let grid = ctx.grid(cols.div_ceil(256) as u64)?; // 256 columns per workgroup
    b.dispatch(&Q8Pipeline::Quantize, &params, &[x.raw(), xq.x4.raw(), xk], grid)
}

/// RMSNorm and quantisation in one dispatch: `xn = x / sqrt(mean(x^2) + eps) * w` over the
/// `k = xq.k()` values of `x` (one row), written to `xn` (f32, as
/// [`crate::kernels::elementwise::rmsnorm`] computes it up to the order of the sum of squares)
/// and quantised into `xq` exactly as [`quantize_activations`] quantises `xn`. CPU references:
/// `elementwise::reference_rmsnorm`, then `reference::q8::quantize` (test kit)
/// of the `xn` written. One workgroup per 256 columns, each reducing the whole `x` (for a model's
/// hidden size; not meant for long rows).
pub fn rmsnorm_quantize(b: &mut Batch, x: &GpuBuffer<f32>, w: &GpuBuffer<f32>, eps: f32, xn: &GpuBuffer<f32>, xq: &Q8Activations) -> Result<()> {
    let ctx = b.context();
    xq.require_one_row("rmsnorm_quantize")?;
    ensure(eps.is_finite() && eps >= 0.0, || Error::Argument(format!("eps = {eps}: must be finite and >= 0")))?;
    x.require("x", xq.k)?;
    w.require("w", xq.k)?;
    xn.require("xn", xq.k)?;
    ctx.variant_for(&NORM_QUANTIZE)?;
    let params = QuantParams { blocks: (xq.k / QB) as u32, quads: (xq.k / 64) as u32, has_q4k: xq.xk.is_some() as u32, eps };
    let xk = xq.xk.as_ref().map_or_else(|| ctx.dummy(), |b| b.raw());
    let grid = ctx.grid(xq.k.div_ceil(256) as u64)?;
    b.dispatch(&Q8Pipeline::NormQuantize, &params, &[x.raw(), xq.x4.raw(), xk, w.raw(), xn.raw()], grid)
}

/// INT4 GEMV on quantised activations: `y[0..n] = W x_q8` (CPU reference: `reference::q8::int4_gemv` in the test kit).
/// Needs `k % 32 == 0`, `group_size % 32 == 0` and `xq.k() == w.k()`.
pub fn int4_gemv(b: &mut Batch, w: &Int4Matrix, xq: &Q8Activations, y: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    xq.require_one_row("int4 gemv_q8")?;
    ensure(w.k() % QB == 0, || Error::Shape(format!("int4 gemv_q8 needs k % 32 == 0, got k = {}", w.k())))?;
    ensure(w.group_size() % QB == 0, || Error::Argument(format!("int4 gemv_q8 needs group_size % 32 == 0, got {}", w.group_size())))?;
    ensure(xq.k == w.k(), || Error::Shape(format!("q8 activations have k = {}, the matrix k = {}", xq.k, w.k())))?;
    y.require("y", w.n())?;
    let variant = ctx.variant_for(&INT4_GEMV)?;
    // group_size % 32 == 0 (checked above): a word never straddles a group (GMODE 0).
    let (_, gshift) = group_mode(w.group_size());
    let zeros = w.zeros().is_some();
    let params = GemvParams::of(w);
    let zbuf = w.zeros().map_or_else(|| ctx.dummy(), |z| z.raw());
    let (plan, grid) = plan(ctx, w.n(), w.k(), true, variant)?;
    b.dispatch(&Q8Pipeline::Int4Gemv { variant, plan, gshift, zeros }, &params, &[w.codes().raw(), w.scales().raw(), zbuf, xq.x4.raw(), y.raw()], grid)
}

/// Q4_K GEMV on quantised activations: `y[0..n] = W x_q8` (CPU reference: `reference::q8::q4k_gemv` in the test kit).
/// Needs `xq.k() == w.k()`.
pub fn q4k_gemv(b: &mut Batch, w: &Q4kMatrix, xq: &Q8Activations, y: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    xq.require_one_row("q4k gemv_q8")?;
    ensure(xq.k == w.k(), || Error::Shape(format!("q8 activations have k = {}, the matrix k = {}", xq.k, w.k())))?;
    let xk = xq.xk.as_ref().ok_or_else(|| Error::Shape(format!("q8 activations of k = {} have no Q4_K order (k % 256 != 0)", xq.k)))?;
    y.require("y", w.n())?;
    let variant = ctx.variant_for(&Q4K_GEMV)?;
    let params = Q4kParams { n: w.n() as u32, k: w.k() as u32, nb: w.blocks_per_row() as u32, quads: (w.k() / 64) as u32 };
    let (plan, grid) = plan(ctx, w.n(), w.k(), false, variant)?;
    b.dispatch(&Q8Pipeline::Q4kGemv { variant, plan }, &params, &[w.heads().raw(), w.qs().raw(), xk.raw(), y.raw()], grid)
}

#[cfg(feature = "testkit")]
mod cases;
#[cfg(feature = "testkit")]
pub use cases::kernels;
