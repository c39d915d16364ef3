//! GGML Q4_K weights on the GPU: fused dequantise + GEMV (m = 1, Portable and Subgroup), GEMM
//! (m > 1) and a bit-exact dequantiser to f32. Block semantics: [`crate::formats::q4k`]
//! (`w = d*sc*q - dmin*m`, 256 weights per 144-byte block, K a multiple of 256).
//!
//! GPU layout (owned by the library; the same bytes, rearranged per block on upload): for block `g`
//! (row-major, `k / 256` blocks per row), `heads[g]` = the block's first 16 bytes (f16 d, f16
//! dmin, 12 scale bytes) as one `vec4<u32>`, and `qs[8g .. 8g + 8]` = its 128 nibble bytes as
//! eight `vec4<u32>` with the 4 x 8 matrix of nibble words transposed: component `pp` of vec4
//! `wi` is word `8*pp + wi`, i.e. positions `4wi .. 4wi + 3` of sub-blocks `2pp` (low nibbles)
//! and `2pp + 1` (high). A GEMV lane loading vec4s `u` and `u + 4` then covers 4 + 4 positions
//! of every sub-block, and lanes on consecutive vec4s need consecutive x: weight and x loads
//! are both coalesced 16-byte loads. A full pass reads exactly 144 bytes per 256 weights.
//! Sources: wgsl/q4k_common.wgsl + q4k_rows.wgsl + q4k_gemv.wgsl (+ team_*.wgsl, gemv_rows_driver.wgsl), q4k_gemm.wgsl, q4k_dequant.wgsl.
//!
//! A Q4_K tensor of a GGUF file, multiplied by a vector:
//!
//! ```no_run
//! use wgkernels::formats::gguf::GgufFile;
//! use wgkernels::kernels::q4k::{self, Q4kMatrix};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let file = GgufFile::open("model.gguf").map_err(|e| wgkernels::Error::Format(e.to_string()))?;
//! let w = Q4kMatrix::from_gguf(&ctx, &file, "blk.0.ffn_down.weight")?;
//! let (x, y) = (ctx.upload(&vec![1.0f32; w.k()])?, ctx.alloc::<f32>(w.n())?);
//! let mut b = ctx.batch();
//! q4k::gemv(&mut b, &w, &x, &y)?;
//! b.run()?;
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::gguf::{GgmlType, GgufFile, TensorInfo};
use crate::formats::q4k::{BlockQ4K, BLOCK_BYTES, QK_K};
use crate::kernels::int4::{plan_grid, team_source, tuned_plan, GemvPlan, ROWS_DRIVER_WGSL};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};

pub const GEMV: KernelInfo = KernelInfo { name: "q4k_gemv", variants: &[Variant::Portable, Variant::Subgroup, Variant::Native], extra: None };
pub const GEMM: KernelInfo = KernelInfo { name: "q4k_gemm", variants: &[Variant::Portable], extra: None };
pub const DEQUANTIZE: KernelInfo = KernelInfo { name: "q4k_dequantize", variants: &[Variant::Portable], extra: None };

const COMMON_WGSL: &str = include_str!("../../../wgsl/q4k_common.wgsl");
const GEMV_WGSL: &str = include_str!("../../../wgsl/q4k_gemv.wgsl");
/// The row/slab loads shared by the Q4_K team GEMVs (q4k_gemv and q8's q4k_gemv_q8).
pub(crate) const ROWS_WGSL: &str = include_str!("../../../wgsl/q4k_rows.wgsl");
const GEMV_MSL: &str = include_str!("../../../msl/q4k_gemv.metal");
const GEMM_WGSL: &str = include_str!("../../../wgsl/q4k_gemm.wgsl");
const DEQUANT_WGSL: &str = include_str!("../../../wgsl/q4k_dequant.wgsl");

/// Header words (d, dmin, scales) per block in the GPU layout.
pub const HEAD_WORDS: usize = 4;
/// Nibble words per block in the GPU layout.
pub const QS_WORDS: usize = 32;

/// Check a Q4_K matrix shape: n, k > 0, k a multiple of 256, indices within u32.
pub fn check_shape(n: usize, k: usize) -> Result<()> {
    ensure(n > 0 && k > 0, || Error::Shape(format!("n = {n}, k = {k}: both must be > 0")))?;
    ensure(k % QK_K == 0, || Error::Shape(format!("Q4_K needs k % 256 == 0, got k = {k}")))?;
    ensure(n.checked_mul(k).is_some_and(|v| v <= u32::MAX as usize), || Error::Shape(format!("n * k = {n} * {k} exceeds 2^32")))
}

/// Q4_K weights `[n, k]` on the GPU (row r = blocks `r * k/256 ..`).
pub struct Q4kMatrix {
    n: usize,
    k: usize,
    heads: GpuBuffer<u32>,
    qs: GpuBuffer<u32>,
}

impl Q4kMatrix {
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// Blocks per row.
    pub fn blocks_per_row(&self) -> usize {
        self.k / QK_K
    }
    pub(crate) fn heads(&self) -> &GpuBuffer<u32> {
        &self.heads
    }
    pub(crate) fn qs(&self) -> &GpuBuffer<u32> {
        &self.qs
    }
    /// Bytes a full pass over the weights reads (144 per 256 weights).
    pub fn bytes(&self) -> u64 {
        (self.n * self.blocks_per_row() * BLOCK_BYTES) as u64
    }

    /// Upload `n * k / 256` blocks, row-major (validated first). Blocks are read in their
    /// in-memory layout, which is GGUF's on little-endian hosts.
    pub fn upload(ctx: &Context, n: usize, k: usize, blocks: &[BlockQ4K]) -> Result<Q4kMatrix> {
        Self::upload_bytes(ctx, n, k, bytemuck::cast_slice(blocks))
    }

    /// Upload raw little-endian block bytes as stored in GGUF (`n * k / 256 * 144` bytes).
    pub fn upload_bytes(ctx: &Context, n: usize, k: usize, bytes: &[u8]) -> Result<Q4kMatrix> {
        check_shape(n, k)?;
        let blocks = n * (k / QK_K);
        ensure(bytes.len() == blocks * BLOCK_BYTES, || Error::Argument(format!("Q4_K data: {} bytes, expected n * k / 256 * 144 = {}", bytes.len(), blocks * BLOCK_BYTES)))?;
        let mut heads = Vec::with_capacity(blocks * HEAD_WORDS);
        let mut qs = Vec::with_capacity(blocks * QS_WORDS);
        let word = |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        for (i, blk) in bytes.chunks_exact(BLOCK_BYTES).enumerate() {
            // Block scales are parameters: finite or a typed error (the crate's non-finite policy).
            let (d, dmin) = (half::f16::from_le_bytes([blk[0], blk[1]]), half::f16::from_le_bytes([blk[2], blk[3]]));
            ensure(d.is_finite() && dmin.is_finite(), || Error::Argument(format!("Q4_K block {i}: d = {d}, dmin = {dmin}: scales must be finite")))?;
            heads.extend(blk[..16].chunks_exact(4).map(word));
            qs.extend((0..QS_WORDS).map(|gw| word(&blk[16 + 4 * qs_word_source(gw)..])));
        }
        Ok(Q4kMatrix { n, k, heads: ctx.upload(&heads)?, qs: ctx.upload(&qs)? })
    }

    /// Upload the Q4_K tensor `name` of a GGUF file: k = ne0, n = the product of the other dims.
    pub fn from_gguf(ctx: &Context, file: &GgufFile, name: &str) -> Result<Q4kMatrix> {
        match GgufTensor::upload(ctx, file, name)? {
            GgufTensor::Q4K(m) => Ok(m),
            other => Err(Error::Format(format!("tensor {name:?} is {:?}, not Q4_K", other.ggml_type()))),
        }
    }

    /// Read back as blocks (row-major).
    pub fn download(&self, ctx: &Context) -> Result<Vec<BlockQ4K>> {
        let (heads, qs) = (ctx.read(&self.heads)?, ctx.read(&self.qs)?);
        let mut out = Vec::with_capacity(heads.len() / HEAD_WORDS);
        for (h, q) in heads.chunks_exact(HEAD_WORDS).zip(qs.chunks_exact(QS_WORDS)) {
            let mut bytes = [0u8; BLOCK_BYTES];
            for (i, w) in h.iter().enumerate() {
                bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
            }
            for (gw, w) in q.iter().enumerate() {
                let at = 16 + 4 * qs_word_source(gw);
                bytes[at..at + 4].copy_from_slice(&w.to_le_bytes());
            }
            out.push(BlockQ4K::from_le_bytes(&bytes));
        }
        Ok(out)
    }
}

/// The block's nibble word (4 bytes, 0..32) stored at GPU qs word `gw`: the 4 x 8 word matrix
/// (pair x word-in-pair) transposed, so GPU vec4 `wi` holds word `wi` of each pair.
fn qs_word_source(gw: usize) -> usize {
    8 * (gw % 4) + gw / 4
}

/// A GGUF tensor uploaded as a typed GPU matrix (F32, F16 and Q4_K only; for any weight format
/// use [`crate::kernels::matmul::WeightMatrix::from_gguf`]).
pub enum GgufTensor {
    Q4K(Q4kMatrix),
    /// Dims as in the file (ne0 first).
    F32 {
        dims: Vec<u64>,
        data: GpuBuffer<f32>,
    },
    F16 {
        dims: Vec<u64>,
        data: GpuBuffer<half::f16>,
    },
}

impl GgufTensor {
    pub fn ggml_type(&self) -> GgmlType {
        match self {
            GgufTensor::Q4K(_) => GgmlType::Q4_K,
            GgufTensor::F32 { .. } => GgmlType::F32,
            GgufTensor::F16 { .. } => GgmlType::F16,
        }
    }

    /// Upload tensor `name`; F32, F16 and Q4_K are supported, anything else is an error.
    pub fn upload(ctx: &Context, file: &GgufFile, name: &str) -> Result<GgufTensor> {
        let info = file.tensor(name).ok_or_else(|| Error::Argument(format!("no tensor named {name:?}")))?;
        Self::upload_info(ctx, file, info)
    }

    /// Upload the tensor described by `info` (from `file.tensors()`).
    pub fn upload_info(ctx: &Context, file: &GgufFile, info: &TensorInfo) -> Result<GgufTensor> {
        let bytes = file.tensor_data(info).map_err(|e| Error::Format(e.to_string()))?;
        match info.ggml_type {
            GgmlType::Q4_K => {
                let (n, k) = matrix_dims(info)?;
                Ok(GgufTensor::Q4K(Q4kMatrix::upload_bytes(ctx, n, k, bytes)?))
            }
            GgmlType::F32 => Ok(GgufTensor::F32 { dims: info.dims.clone(), data: ctx.upload(&bytemuck::pod_collect_to_vec::<u8, f32>(bytes))? }),
            GgmlType::F16 => Ok(GgufTensor::F16 { dims: info.dims.clone(), data: ctx.upload(&bytemuck::pod_collect_to_vec::<u8, half::f16>(bytes))? }),
            t => Err(Error::Format(format!("tensor {:?}: type {t:?} cannot be uploaded (F32, F16, Q4_K only)", info.name))),
        }
    }
}

/// (n, k) of a Q4_K GGUF tensor seen as a matrix ([`crate::formats::matrix_dims`], plus the
/// Q4_K shape check).
pub fn matrix_dims(info: &TensorInfo) -> Result<(usize, usize)> {
    let (n, k) = crate::formats::matrix_dims(info).map_err(|e| Error::Shape(e.to_string()))?;
    check_shape(n, k)?;
    Ok((n, k))
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GemvParams {
    n: u32,
    k: u32,
    nb: u32,
    _p: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GemmParams {
    m: u32,
    n: u32,
    k: u32,
    nb: u32,
    tiles_n: u32,
    sps: u32,
    splits: u32,
    _p: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DequantParams {
    chunks: u32,
    _p: [u32; 3],
}

const GEMV_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("heads", "vec4<u32>"), StorageBinding::read("qs", "vec4<u32>"), StorageBinding::read("x", "vec4<f32>"), StorageBinding::write("y", "f32")];
/// The GEMM binds what the GEMV binds.
const GEMM_BINDINGS: &[StorageBinding] = GEMV_BINDINGS;
const DEQUANT_BINDINGS: &[StorageBinding] = &[StorageBinding::read("heads", "vec4<u32>"), StorageBinding::read("qs", "vec4<u32>"), StorageBinding::write("out", "vec4<f32>")];

/// Rows per team the GEMV can plan with (see [`gemv_plan`]); at most 4 (one vec4 accumulator).
pub const GEMV_ROWS: [u32; 3] = [1, 2, 4];

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Q4kPipeline {
    Gemv { variant: Variant, plan: GemvPlan },
    Gemm,
    Dequant,
}

impl PipelineKey for Q4kPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            Q4kPipeline::Gemv { variant: Variant::Native, plan } => {
                let twin = Q4kPipeline::Gemv { variant: Variant::Subgroup, plan }.describe(_caps);
                PipelineDesc::native(GEMV_MSL, if plan.rows <= 2 { "q4k_gemv_r2" } else { "q4k_gemv_r4" }, twin)
            }
            Q4kPipeline::Gemv { variant, plan } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![team_source(variant), COMMON_WGSL, ROWS_WGSL, GEMV_WGSL, ROWS_DRIVER_WGSL]),
                entry: "main",
                constants: plan.constants(variant, &[]),
                workgroup_size: [plan.wg, 1, 1],
                params_size: std::mem::size_of::<GemvParams>() as u64,
                bindings: GEMV_BINDINGS,
            },
            Q4kPipeline::Gemm => PipelineDesc {
                source: ShaderSource::Wgsl(vec![COMMON_WGSL, GEMM_WGSL, super::splitk::TILE_WGSL]),
                entry: "main",
                constants: vec![],
                workgroup_size: [128, 1, 1],
                params_size: std::mem::size_of::<GemmParams>() as u64,
                bindings: GEMM_BINDINGS,
            },
            Q4kPipeline::Dequant => PipelineDesc {
                source: ShaderSource::Wgsl(vec![COMMON_WGSL, DEQUANT_WGSL]),
                entry: "main",
                constants: vec![],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<DequantParams>() as u64,
                bindings: DEQUANT_BINDINGS,
            },
        }
    }
}

/// Rows per team the Native (MSL) GEMV has entry points for.
pub const NATIVE_ROWS: [u32; 2] = [2, 4];

/// The Native (MSL) plan for `rows` (2 or 4) rows per threadgroup: one team per threadgroup of
/// 128 threads.
pub fn native_plan(rows: u32) -> GemvPlan {
    GemvPlan { wg: 128, rows, unroll: 1, team: 0 }
}

/// Plan and grid for an n-row GEMV. Defaults (fastest measured on an H200, 2026-11-22): 256
/// invocations per workgroup, teams of 32 lanes (Subgroup: one subgroup each) of 2 rows, 2 quads
/// per lane per iteration; Native: one team per threadgroup of 128 threads, 4 rows (2 when
/// n < 2048 so that small matrices still give enough threadgroups).
/// [`crate::Tuning::q4k_gemv`] overrides them, for tuning experiments.
pub fn gemv_plan(ctx: &Context, n: usize, variant: Variant) -> Result<(GemvPlan, [u32; 3])> {
    let plan = match variant {
        Variant::Native => native_plan(if n >= 2048 { 4 } else { 2 }),
        _ => tuned_plan(&ctx.caps().tuning.q4k_gemv, variant, GemvPlan { wg: 256, rows: 2, unroll: 2, team: if variant == Variant::Portable { 32 } else { 1 } }),
    };
    Ok((plan, plan_grid(ctx, &plan, n, variant)?))
}

/// `y[0..n] = W x` for one input vector (`x.len() >= k`, `y.len() >= n`).
pub fn gemv(b: &mut Batch, w: &Q4kMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    x.require("x", w.k)?;
    y.require("y", w.n)?;
    let params = GemvParams { n: w.n as u32, k: w.k as u32, nb: w.blocks_per_row() as u32, _p: 0 };
    let bufs = [w.heads.raw(), w.qs.raw(), x.raw(), y.raw()];
    ctx.with_native_fallback(&GEMV, |variant| {
        let (plan, grid) = gemv_plan(ctx, w.n, variant)?;
        b.dispatch(&Q4kPipeline::Gemv { variant, plan }, &params, &bufs, grid)
    })
}

/// `y[m, n] = x[m, k] W^T` (row-major x and y). Where the output tiles are few (small m), K is
/// split over more workgroups (`kernels::splitk`).
pub fn gemm(b: &mut Batch, w: &Q4kMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    let ctx = b.context();
    ensure(m > 0, || Error::Shape("m = 0".into()))?;
    ensure(m.checked_mul(w.k.max(w.n)).is_some_and(|v| v <= u32::MAX as usize), || Error::Shape(format!("m = {m} too large")))?;
    x.require("x", m * w.k)?;
    y.require("y", m * w.n)?;
    ctx.variant_for(&GEMM)?;
    let tiles_n = w.n.div_ceil(64);
    let tiles = m.div_ceil(32) * tiles_n;
    let (sps, splits) = super::splitk::plan(ctx.caps(), tiles, w.blocks_per_row() * 8);
    let nb = w.blocks_per_row() as u32;
    let params = GemmParams { m: m as u32, n: w.n as u32, k: w.k as u32, nb, tiles_n: tiles_n as u32, sps: sps as u32, splits: splits as u32, _p: 0 };
    let grid = ctx.grid((tiles * splits) as u64)?;
    super::splitk::run(b, y, m * w.n, splits, |b, out| b.dispatch(&Q4kPipeline::Gemm, &params, &[w.heads.raw(), w.qs.raw(), x.raw(), out], grid))
}

/// `y = x W^T` for `m` input rows: GEMV when `m == 1`, GEMM otherwise.
pub fn matmul(b: &mut Batch, w: &Q4kMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    if m == 1 {
        gemv(b, w, x, y)
    } else {
        gemm(b, w, x, y, m)
    }
}

/// Dequantise to a row-major f32 [n, k] buffer, bit-exactly as llama.cpp / gguf-py.
pub fn dequantize(b: &mut Batch, w: &Q4kMatrix, out: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    out.require("out", w.n * w.k)?;
    ctx.variant_for(&DEQUANTIZE)?;
    let chunks = w.n * w.blocks_per_row() * 8;
    let grid = ctx.grid(chunks.div_ceil(64) as u64)?;
    b.dispatch(&Q4kPipeline::Dequant, &DequantParams { chunks: chunks as u32, _p: [0; 3] }, &[w.heads.raw(), w.qs.raw(), out.raw()], grid)
}

/// Per weight, the magnitude of the operands the kernels combine, `|d*sc*q| + |dmin*m|`
/// (row-major like [`crate::formats::q4k::dequantize_row`]): the error scale for references.
pub fn operand_magnitudes(blocks: &[BlockQ4K]) -> Vec<f64> {
    let mut out = Vec::with_capacity(blocks.len() * QK_K);
    for b in blocks {
        let d = half::f16::from_bits(b.d).to_f64().abs();
        let dmin = half::f16::from_bits(b.dmin).to_f64().abs();
        for j in 0..8 {
            let (sc, m) = crate::formats::q4k::get_scale_min(j, &b.scales);
            for i in 0..32 {
                let q = (b.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15;
                out.push(d * sc as f64 * q as f64 + dmin * m as f64);
            }
        }
    }
    out
}

#[cfg(feature = "testkit")]
mod cases;
mod check;
/// The opt-in int8-activation GEMV (see [`crate::kernels::q8`]).
pub use crate::kernels::q8::q4k_gemv as gemv_q8;
#[cfg(feature = "testkit")]
pub use cases::{kernels, random_blocks};
pub(crate) use check::gemv_checks;
