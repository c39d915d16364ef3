//! Int8 activations for the weight-matrix GEMVs and the int8 GEMM (the llama.cpp "q8_1" idea):
//! an OPT-IN path that quantises x once per decode step ([`quantize_activations`]; several rows:
//! [`quantize_rows`]; fused with the RMSNorm before it: [`rmsnorm_quantize`]) into a
//! [`Q8Activations`] buffer that any number of GEMVs of the same k then read
//! ([`crate::kernels::matmul::gemv_q8`], [`crate::kernels::matmul::gemm_q8`]). Formats with an
//! integer dot meet x through `dot4I8Packed` (4 int8 products summed per instruction), integer
//! sums per block and one f32 scaling per (row, x block); the others dequantise x and run their
//! f32 dot. Numerics differ from the f32-activation GEMVs (x is rounded to 8 bits per block of
//! 32: `|error| <= sum_c |w_c| * d_b(c) / 2`, see `reference::q8` in the test kit), so nothing
//! selects this path automatically. Non-finite activations propagate (the crate's data policy,
//! [`crate::error`]): a block of 32 holding a NaN or an infinity gets the scale NaN and codes 0, so
//! every GEMV output that reads it is NaN (an infinity gives NaN here, not ±inf).
//!
//! Where it is fast: Vulkan (and DX12) devices with DP4A; naga emits SPIR-V `OpSDot` when the
//! Vulkan device has `shaderIntegerDotProduct` (core in Vulkan 1.3). On Metal naga polyfills
//! `dot4I8Packed` with shifts and multiplies (Apple GPUs have no DP4A): correct, not faster.
//! The quantisation of x is one ~3-5 µs dispatch, shared by every GEMV of the same x
//! (docs/PERFORMANCE.md).
//!
//! GPU layout of [`Q8Activations`] (both written by one dispatch, 4 bytes per column in all):
//! `x4`, per 8-column word, `[i8x4 cols 0,2,4,6 | i8x4 cols 1,3,5,7 | d | fl(d * sum q)]`, and,
//! when `k % 256 == 0`, `xk`, the quad order (per 64-column quad: 4 vec4 of codes, the 8
//! sub-block scales and 8 partial sums; see `MmQx` in wgsl/mm_common.wgsl).
//! Source: wgsl/q8_quantize.wgsl.
//!
//! ```
//! use wgkernels::kernels::{matmul::{self, WeightMatrix}, q8};
//! use wgkernels::{formats::gguf::GgmlType, Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (n, k) = (256, 512);
//! let w = WeightMatrix::upload(&ctx, GgmlType::Q8_0, n, k, &vec![0u8; n * k / 32 * 34])?;
//! let (x, y) = (ctx.upload(&vec![1.0f32; k])?, ctx.alloc::<f32>(n)?);
//! let xq = q8::Q8Activations::alloc(&ctx, k)?;
//! let mut b = ctx.batch();
//! q8::quantize_activations(&mut b, &x, &xq)?; // once per activation vector...
//! matmul::gemv_q8(&mut b, &w, &xq, &y)?; // ...shared by every GEMV that reads it
//! b.run()?;
//! assert_eq!(ctx.read(&y)?, vec![0.0; n]); // all-zero blocks: zero weights
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::q4k::QK_K;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

/// Activations per Q8 block (one f32 scale each).
pub const QB: usize = 32;
pub const QUANTIZE: KernelInfo = KernelInfo::new("q8_quantize", &[Variant::Portable], None);
pub const NORM_QUANTIZE: KernelInfo = KernelInfo::new("q8_rmsnorm_quantize", &[Variant::Portable], None);

const QUANT_WGSL: &str = include_str!("../../../wgsl/q8_quantize.wgsl");

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
}

params_struct! {
    struct QuantParams {
        blocks: u32,
        quads: u32,
        has_q4k: u32,
        /// RMSNorm epsilon (NormQuantize only).
        eps: f32,
    }
}

const QUANT_BINDINGS: &[StorageBinding] = &[StorageBinding::read("x", "vec4<f32>"), StorageBinding::write("x4", "vec4<u32>"), StorageBinding::write("xk", "vec4<u32>")];
const NORM_QUANT_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("x", "vec4<f32>"),
    StorageBinding::write("x4", "vec4<u32>"),
    StorageBinding::write("xk", "vec4<u32>"),
    StorageBinding::read("nw", "vec4<f32>"),
    StorageBinding::write("xn", "vec4<f32>"),
];
/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Q8Pipeline {
    Quantize,
    NormQuantize,
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
        }
    }
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

#[cfg(feature = "testkit")]
mod cases;
#[cfg(feature = "testkit")]
pub use cases::kernels;

/// The quantisers' params and their WGSL pipelines (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twin() -> crate::kernels::ParamsTwin {
    let pipelines = crate::suite::describe_all([Q8Pipeline::Quantize, Q8Pipeline::NormQuantize]);
    crate::kernels::ParamsTwin { rust: "q8::QuantParams", size: std::mem::size_of::<QuantParams>(), fields: QuantParams::FIELDS, pipelines }
}
