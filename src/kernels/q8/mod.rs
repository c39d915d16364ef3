//! Int8 activations for the weight-matrix GEMVs and the int8 GEMM (the llama.cpp "q8_1" idea):
//! an OPT-IN path that quantises x once per decode step ([`quantize_activations`]; several rows:
//! [`quantize_rows`]; fused with the RMSNorm before it: [`rmsnorm_quantize`]; with a post-norm's
//! residual add and the RMSNorm after it: [`post_norm`]; with split-K decode attention's merge:
//! [`merge_quantize`]) into a
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
use crate::suite::{guard_damage, guarded_u32, POISON_U32};

/// Activations per Q8 block (one f32 scale each).
pub const QB: usize = 32;
pub const QUANTIZE: KernelInfo = KernelInfo::new("q8_quantize", &[Variant::Portable], None);
pub const NORM_QUANTIZE: KernelInfo = KernelInfo::new("q8_rmsnorm_quantize", &[Variant::Portable], None);
pub const POST_NORM: KernelInfo = KernelInfo::new("q8_post_norm", &[Variant::Portable], None);
pub const MERGE_QUANTIZE: KernelInfo = KernelInfo::new("q8_merge_quantize", &[Variant::Portable], None);

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
        /// RMSNorm epsilon (NormQuantize and PostNorm only).
        eps: f32,
        /// Chunks per head and head size (MergeQuantize only).
        nchunks: u32,
        d: u32,
        _p0: u32,
        _p1: u32,
    }
}

impl QuantParams {
    /// The params of `cols` columns (checked to fit 32 bits by the caller), `quads` Q4_K quads.
    fn new(cols: usize, quads: usize, has_q4k: bool, eps: f32) -> QuantParams {
        QuantParams { blocks: (cols / QB) as u32, quads: quads as u32, has_q4k: has_q4k as u32, eps, nchunks: 0, d: 0, _p0: 0, _p1: 0 }
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
const POST_NORM_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("x", "vec4<f32>"),
    StorageBinding::write("x4", "vec4<u32>"),
    StorageBinding::write("xk", "vec4<u32>"),
    StorageBinding::read("nw", "vec4<f32>"),
    StorageBinding::write("xn", "vec4<f32>"),
    StorageBinding::read("pa", "vec4<f32>"),
    StorageBinding::read("pw", "vec4<f32>"),
    StorageBinding::write("xo", "vec4<f32>"),
];

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Q8Pipeline {
    Quantize,
    NormQuantize,
    /// [`post_norm`]; `quantize`: with the int8 output.
    PostNorm {
        quantize: bool,
    },
    /// [`merge_quantize`].
    MergeQuantize,
}

impl PipelineKey for Q8Pipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let (entry, constants, bindings) = match *self {
            Q8Pipeline::Quantize => ("main", vec![], QUANT_BINDINGS),
            Q8Pipeline::NormQuantize => ("main_norm", vec![], NORM_QUANT_BINDINGS),
            Q8Pipeline::PostNorm { quantize } => ("main_post", vec![("QUANT", quantize as u32 as f64)], POST_NORM_BINDINGS),
            // The merge reads the partial rows as `x` and their (m, l) pairs as `nw`, and
            // writes the merged output as `xn`.
            Q8Pipeline::MergeQuantize => ("main_merge", vec![], NORM_QUANT_BINDINGS),
        };
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![QUANT_WGSL]),
            entry,
            constants,
            workgroup_size: [64, 1, 1],
            params_size: std::mem::size_of::<QuantParams>() as u64,
            bindings,
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
    let params = QuantParams::new(cols, xq.quads(), xq.xk.is_some(), 0.0);
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
    let params = QuantParams::new(xq.k, xq.k / 64, xq.xk.is_some(), eps);
    let xk = xq.xk.as_ref().map_or_else(|| ctx.dummy(), |b| b.raw());
    let grid = ctx.grid(xq.k.div_ceil(256) as u64)?;
    b.dispatch(&Q8Pipeline::NormQuantize, &params, &[x.raw(), xq.x4.raw(), xk, w.raw(), xn.raw()], grid)
}

/// The buffers of [`post_norm`]: rows of `k` f32 values (`k = xn.len()` or more; see there).
pub struct PostNorm<'a> {
    /// The residual stream before the add (read only).
    pub x: &'a GpuBuffer<f32>,
    /// The block's output the post-norm normalises, and the post-norm's weight.
    pub a: &'a GpuBuffer<f32>,
    pub post: &'a GpuBuffer<f32>,
    /// The residual stream after the add (written; another buffer than `x`).
    pub x_out: &'a GpuBuffer<f32>,
    /// The next RMSNorm's weight, and its output.
    pub norm: &'a GpuBuffer<f32>,
    pub xn: &'a GpuBuffer<f32>,
    /// Values per row (`k > 0`, `k % 32 == 0`).
    pub k: usize,
    /// Both RMSNorms' epsilon (finite, `>= 0`).
    pub eps: f32,
}

/// A post-norm's residual add and the RMSNorm after it in one dispatch (Gemma's blocks end with a
/// post-norm added into the residual, and the next block starts with the RMSNorm of that
/// residual): over one row of `k` values,
/// `x_out = x + a / sqrt(mean(a^2) + eps) * post` ([`crate::kernels::elementwise::rmsnorm_add`]'s
/// arithmetic, up to the order of the sum of squares) and `xn = x_out / sqrt(mean(x_out^2) +
/// eps) * norm` ([`rmsnorm_quantize`]'s), and with `xq` (one row of `k`) the quantisation of
/// `xn` as [`quantize_activations`] quantises it. The new residual goes to another buffer than
/// the old one (every workgroup reads the whole row): a caller alternates two. Every output
/// must be a buffer no other argument uses; `x`, `a` and the weights may share buffers. CPU
/// references: `elementwise::reference_rmsnorm` for both norms, `reference::q8::quantize` of the
/// `xn` written (test kit). One workgroup per 256 columns, each reducing the whole row (for a
/// model's hidden size; not meant for long rows).
pub fn post_norm(b: &mut Batch, p: &PostNorm, xq: Option<&Q8Activations>) -> Result<()> {
    let ctx = b.context();
    let k = p.k;
    ensure(k > 0 && k % QB == 0, || Error::Shape(format!("post_norm needs k > 0 and k % 32 == 0, got k = {k}")))?;
    ensure(k <= u32::MAX as usize / 8, || Error::Shape(format!("post_norm row of k = {k} too long")))?;
    ensure(p.eps.is_finite() && p.eps >= 0.0, || Error::Argument(format!("eps = {}: must be finite and >= 0", p.eps)))?;
    for (buf, name) in [(p.x, "x"), (p.a, "a"), (p.post, "post"), (p.x_out, "x_out"), (p.norm, "norm"), (p.xn, "xn")] {
        buf.require(name, k)?;
    }
    if let Some(xq) = xq {
        xq.require_one_row("post_norm")?;
        ensure(xq.k == k, || Error::Shape(format!("post_norm of k = {k} into q8 activations of k = {}", xq.k)))?;
    }
    let mut outputs = vec![("x_out", p.x_out.raw()), ("xn", p.xn.raw())];
    if let Some(xq) = xq {
        outputs.push(("q8 activations", xq.x4.raw()));
        outputs.extend(xq.xk.as_ref().map(|xk| ("q8 activations", xk.raw())));
    }
    let inputs = [p.x.raw(), p.a.raw(), p.post.raw(), p.norm.raw()];
    for (i, &(name, out)) in outputs.iter().enumerate() {
        let clash = inputs.iter().chain(outputs[..i].iter().map(|o| &o.1)).any(|other| other.buffer == out.buffer);
        ensure(!clash, || Error::Argument(format!("post_norm: {name} shares a buffer with another argument")))?;
    }
    ctx.variant_for(&POST_NORM)?;
    let params = QuantParams::new(k, k / 64, xq.is_some_and(|xq| xq.xk.is_some()), p.eps);
    let (x4, xk) = match xq {
        Some(xq) => (xq.x4.raw(), xq.xk.as_ref().map_or_else(|| ctx.dummy(), |b| b.raw())),
        None => (ctx.dummy(), ctx.dummy()),
    };
    let bufs = [p.x.raw(), x4, xk, p.norm.raw(), p.xn.raw(), p.a.raw(), p.post.raw(), p.x_out.raw()];
    b.dispatch(&Q8Pipeline::PostNorm { quantize: xq.is_some() }, &params, &bufs, ctx.grid(k.div_ceil(256) as u64)?)
}

/// The partials of a split-K decode attention ([`crate::kernels::attention::decode`]'s split
/// pass) that [`merge_quantize`] merges: per head and chunk, the unnormalised output row `o_c`
/// (`part_o [heads * nchunks, d]`) and the running max and sum `(m_c, l_c)` in the log2 domain
/// (`part_ml [heads * nchunks]`, rounded up to an even count: the kernel reads two at a time).
pub struct MergeParts<'a> {
    pub part_o: &'a GpuBuffer<f32>,
    pub part_ml: &'a GpuBuffer<[f32; 2]>,
    pub heads: usize,
    pub nchunks: usize,
    /// Head size, a multiple of 32 (so a block of 32 never straddles two heads).
    pub d: usize,
}

/// The log-sum-exp merge of split-K decode attention's partials and the quantisation of its
/// output in one dispatch: per head, `M = max m_c`, `L = sum l_c 2^(m_c - M)`,
/// `out = sum_c o_c 2^(m_c - M) / L` (`[heads * d]`; 8 partial sums over every 8th chunk, then
/// added), and `xq` (one row of `k = heads * d`) the quantisation of the `out` written, exactly as
/// [`quantize_activations`] quantises it. CPU references: the merge in f64 within f32 rounding,
/// `reference::q8::quantize` of the `out` written (test kit). One workgroup per 256 columns.
pub fn merge_quantize(b: &mut Batch, parts: &MergeParts, out: &GpuBuffer<f32>, xq: &Q8Activations) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&MERGE_QUANTIZE)?;
    record_merge_quantize(b, parts, out, xq)
}

/// [`merge_quantize`] without the variant check (the decode attention records it under its own
/// kernel's variant, whatever the context's policy asks of this one).
pub(crate) fn record_merge_quantize(b: &mut Batch, parts: &MergeParts, out: &GpuBuffer<f32>, xq: &Q8Activations) -> Result<()> {
    let ctx = b.context();
    let MergeParts { part_o, part_ml, heads, nchunks, d } = *parts;
    ensure(heads > 0 && nchunks > 0 && d > 0 && d % QB == 0, || Error::Shape(format!("merge of heads = {heads}, nchunks = {nchunks}, d = {d}: all > 0, d % 32 == 0")))?;
    xq.require_one_row("merge_quantize")?;
    let k = heads.checked_mul(d).ok_or_else(|| Error::Shape("heads * d overflows".into()))?;
    ensure(xq.k == k, || Error::Shape(format!("merge of heads * d = {k} into q8 activations of k = {}", xq.k)))?;
    let rows = heads.checked_mul(nchunks).ok_or_else(|| Error::Shape("heads * nchunks overflows".into()))?;
    let o_len = rows.checked_mul(d).filter(|&n| n <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("{rows} partial rows of d = {d} exceed 32-bit indexing")))?;
    part_o.require("part_o", o_len)?;
    // The kernel reads the pairs two at a time.
    part_ml.require("part_ml", rows.next_multiple_of(2))?;
    out.require("out", k)?;
    let params = QuantParams { nchunks: nchunks as u32, d: d as u32, ..QuantParams::new(k, k / 64, xq.xk.is_some(), 0.0) };
    let xk = xq.xk.as_ref().map_or_else(|| ctx.dummy(), |b| b.raw());
    let bufs = [part_o.raw(), xq.x4.raw(), xk, part_ml.raw(), out.raw()];
    b.dispatch(&Q8Pipeline::MergeQuantize, &params, &bufs, ctx.grid(k.div_ceil(256) as u64)?)
}

// ---------------------------------------------------------------------------------------------
// Checks of int8 outputs against the CPU quantiser (the test kit's cases and the decode
// attention's, whose self-check is built in every build).

pub(crate) fn word_diff(got: &[u32], expect: &[u32], what: &str) -> (String, usize) {
    let n = expect.len();
    let differ = got.iter().zip(expect).filter(|(a, b)| a != b).count();
    let note = match got.iter().zip(expect).position(|(a, b)| a != b) {
        Some(i) => format!("{what}: {differ} words differ from the CPU quantiser, first at {i}: {:#010x} vs {:#010x}", got[i], expect[i]),
        None => String::new(),
    };
    (note, guard_damage(got, n, POISON_U32))
}

/// Both int8 layouts of `out` against the CPU quantiser's of `xn[..k]`, bit for bit: the notes
/// of the words that differ and the guard words overwritten.
pub(crate) fn q8_diff(ctx: &Context, xn: &[f32], out: &Q8Activations) -> Result<(String, usize)> {
    let expect = crate::reference::q8::quantize(&xn[..out.k]);
    let (mut note, mut guard) = word_diff(&ctx.read(&out.x4)?, &crate::reference::q8::pack_int4(&expect), "int4 order");
    if let Some(xk) = &out.xk {
        let (n2, g2) = word_diff(&ctx.read(xk)?, &crate::reference::q8::pack_q4k(&expect), "q4k order");
        guard += g2;
        if !n2.is_empty() {
            note = if note.is_empty() { n2 } else { format!("{note}; {n2}") };
        }
    }
    Ok((note, guard))
}

/// One row of int8 activations of `k` in poisoned, guarded buffers.
pub(crate) fn guarded_q8(ctx: &Context, k: usize) -> Result<Q8Activations> {
    Ok(Q8Activations { k, rows: 1, x4: guarded_u32(ctx, k / 2)?, xk: (k % QK_K == 0).then(|| guarded_u32(ctx, k / 64 * XK_WORDS_PER_QUAD)).transpose()? })
}

#[cfg(feature = "testkit")]
mod cases;
#[cfg(feature = "testkit")]
pub use cases::kernels;

/// The quantisers' params and their WGSL pipelines (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twin() -> crate::kernels::ParamsTwin {
    let pipelines = crate::suite::describe_all([
        Q8Pipeline::Quantize,
        Q8Pipeline::NormQuantize,
        Q8Pipeline::PostNorm { quantize: false },
        Q8Pipeline::PostNorm { quantize: true },
        Q8Pipeline::MergeQuantize,
    ]);
    crate::kernels::ParamsTwin { rust: "q8::QuantParams", size: std::mem::size_of::<QuantParams>(), fields: QuantParams::FIELDS, pipelines }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ContextOptions;

    /// [`post_norm`]'s bad arguments are typed errors that record nothing; a good call runs.
    #[test]
    fn post_norm_bad_inputs_are_typed_errors() {
        let ctx = Context::new_blocking(ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        let k = 64;
        let [x, a, post, x_out, norm, xn] = [0; 6].map(|_| ctx.upload(&vec![1f32; k]).unwrap());
        let short = ctx.upload(&vec![1f32; k - 4]).unwrap();
        let ok = PostNorm { x: &x, a: &a, post: &post, x_out: &x_out, norm: &norm, xn: &xn, k, eps: 1e-5 };
        let (xq, xq_128, xq_rows) = (Q8Activations::alloc(&ctx, k).unwrap(), Q8Activations::alloc(&ctx, 128).unwrap(), Q8Activations::alloc_rows(&ctx, k, 2).unwrap());
        let mut b = ctx.batch();
        for bad in [PostNorm { k: 0, ..ok }, PostNorm { k: 48, ..ok }] {
            assert!(matches!(post_norm(&mut b, &bad, None), Err(Error::Shape(_))), "k = {}", bad.k);
        }
        assert!(matches!(post_norm(&mut b, &PostNorm { x: &short, ..ok }, None), Err(Error::BufferTooSmall { name: "x", .. })));
        assert!(matches!(post_norm(&mut b, &PostNorm { xn: &short, ..ok }, None), Err(Error::BufferTooSmall { name: "xn", .. })));
        for eps in [f32::NAN, f32::INFINITY, -1.0] {
            assert!(matches!(post_norm(&mut b, &PostNorm { eps, ..ok }, None), Err(Error::Argument(_))), "eps {eps}");
        }
        // An output sharing a buffer with an input or another output.
        for bad in [PostNorm { x_out: &x, ..ok }, PostNorm { xn: &a, ..ok }, PostNorm { xn: &x_out, ..ok }, PostNorm { x_out: &norm, ..ok }, PostNorm { xn: &post, ..ok }] {
            assert!(matches!(post_norm(&mut b, &bad, Some(&xq)), Err(Error::Argument(_))));
        }
        assert!(matches!(post_norm(&mut b, &ok, Some(&xq_128)), Err(Error::Shape(_))), "k mismatch");
        assert!(matches!(post_norm(&mut b, &ok, Some(&xq_rows)), Err(Error::Shape(_))), "several rows");
        assert!(b.is_empty(), "a rejected call recorded a dispatch");
        // Inputs may share buffers (read only): x_out = 1 + rmsnorm(1) * 1 = 2, xn = rmsnorm(2) = 1.
        post_norm(&mut b, &PostNorm { a: &x, post: &x, norm: &x, ..ok }, Some(&xq)).unwrap();
        b.run().unwrap();
        assert!(ctx.read(&x_out).unwrap().iter().all(|v| (v - 2.0).abs() < 1e-4));
        assert!(ctx.read(&xn).unwrap().iter().all(|v| (v - 1.0).abs() < 1e-4));
    }
}
