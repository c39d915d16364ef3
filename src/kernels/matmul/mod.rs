//! The weight-matrix family: one [`WeightMatrix`] type for every weight format of
//! [`crate::formats::FORMATS`] (F32, F16, BF16, Q8_0, Q4_K, ..., and int4 and int8, which have
//! no GGUF type), with GEMV (m = 1; Portable and Subgroup, f32 or int8 activations; Native MSL
//! for the formats that carry a [`crate::formats::NativeGemv`]: `native` on f32 activations,
//! `native_q8` on int8 ones through the integer dot, every epilogue), GEMM (m > 1) and a bit-exact
//! dequantiser, all generated from the format's descriptor and WGSL part (contract:
//! [`crate::formats`]). The format is a field of the pipeline key, as a dtype.
//!
//! Matrices larger than the device's storage binding limit are split into row chunks on upload
//! (rows are independent in every format's GPU layout); each kernel dispatches once per chunk.
//! Sources: wgsl/mm_common.wgsl; the GEMVs: mm_gemv.wgsl / mm_gemv_q8.wgsl / mm_gemv_qk.wgsl +
//! mm_gemv_acc.wgsl (+ glu.wgsl) + mm_rows.wgsl (the row driver, shared with the int8 GEMM's mm_gemm_q8.wgsl;
//! plans: [`GemvPlan`], [`gemv_plan`], [`gemm_q8_plan`]) + team_*.wgsl; mm_gemm.wgsl (+
//! splitk_tile.wgsl), mm_gemm_matrix.wgsl (the Matrix GEMM: [`matrix`]), mm_widen_x.wgsl,
//! mm_widen.wgsl and mm_gemm_wide.wgsl (its two-pass form for prompts: [`wide`]),
//! mm_dequant.wgsl, and the format's `wgsl/fmt_<name>.wgsl`.
//!
//! GEMM variants: Portable (f32 throughout), Matrix (cooperative matrices, f16 inputs, f32
//! sums; see [`matrix`] for its numerics and when `Auto` picks it) and, for the formats that
//! carry a [`crate::formats::NativeGemm`] (Q4_K, Q6_K, Q8_0), Native (MSL on Apple's simdgroup
//! 8x8 matrices: the Portable GEMM's plan and outputs with the Matrix GEMM's f16-input
//! numerics; its twin is the Portable GEMM).

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::gguf::{GgmlType, GgufFile, TensorInfo};
use crate::formats::{self, WeightFormat, FORMATS};
use crate::kernels::q8::Q8Activations;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::Zeroable;
use std::sync::OnceLock;

#[cfg(feature = "testkit")]
mod cases;
pub(crate) mod check;
mod gemm_q8;
pub mod matrix;
mod plan;
pub mod wide;
#[cfg(feature = "testkit")]
pub use cases::kernels;
pub use gemm_q8::{gemm_q8, gemm_q8_slots, GEMM_Q8_MAX_M};
pub use plan::{default_plan, gemm_q8_plan, gemv_plan, native_plan, GemvPlan};
pub(crate) use plan::{plan_grid, team_source};
pub use wide::{gemm_staged, GemmScratch};

const COMMON_WGSL: &str = include_str!("../../../wgsl/mm_common.wgsl");
const GEMV_WGSL: &str = include_str!("../../../wgsl/mm_gemv.wgsl");
const GEMV_Q8_WGSL: &str = include_str!("../../../wgsl/mm_gemv_q8.wgsl");
const GEMV_QK_WGSL: &str = include_str!("../../../wgsl/mm_gemv_qk.wgsl");
const ITEMS_WGSL: &str = include_str!("../../../wgsl/mm_items.wgsl");
const GEMV_ACC_WGSL: &str = include_str!("../../../wgsl/mm_gemv_acc.wgsl");
const ROWS_WGSL: &str = include_str!("../../../wgsl/mm_rows.wgsl");
const GEMM_WGSL: &str = include_str!("../../../wgsl/mm_gemm.wgsl");
const DEQUANT_WGSL: &str = include_str!("../../../wgsl/mm_dequant.wgsl");
const GATHER_WGSL: &str = include_str!("../../../wgsl/mm_gather.wgsl");

/// The kernels of one format (names `mm_gemv_<format>`, `mm_gemv_q8_<format>`, `mm_gemm_<format>`,
/// `mm_gemm_q8_<format>`, `mm_dequant_<format>`).
pub struct FormatKernels {
    pub gemv: KernelInfo,
    pub gemv_q8: KernelInfo,
    pub gemm: KernelInfo,
    /// The GEMM of a few rows on int8 activations ([`gemm_q8`]); only formats with an integer
    /// dot run it (`integer_dot`).
    pub gemm_q8: KernelInfo,
    pub dequant: KernelInfo,
    /// Whether the format's WGSL part defines the integer dot ([`has_integer_dot`]).
    pub integer_dot: bool,
    /// Whether the format's WGSL part defines the run hook of the Matrix GEMM's weight staging
    /// (`fmt_run_load` / `fmt_run`, contract in [`crate::formats`]); without it the GEMM stages
    /// runs through `fmt_w4`.
    pub runs: bool,
}

/// The [`KernelInfo`]s of `f` (built once per process).
pub fn kernel_infos(f: &'static WeightFormat) -> &'static FormatKernels {
    static ALL: OnceLock<Vec<FormatKernels>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let name = |op: &str, f: &WeightFormat| -> &'static str { Box::leak(format!("mm_{op}_{}", f.name).into_boxed_str()) };
        const GEMV_VARIANTS: &[Variant] = &[Variant::Portable, Variant::Subgroup];
        const GEMV_NATIVE: &[Variant] = &[Variant::Portable, Variant::Subgroup, Variant::Native];
        const PORTABLE: &[Variant] = &[Variant::Portable];
        const GEMM_VARIANTS: &[Variant] = &[Variant::Portable, Variant::Matrix];
        const GEMM_NATIVE: &[Variant] = &[Variant::Portable, Variant::Matrix, Variant::Native];
        FORMATS
            .iter()
            .map(|f| FormatKernels {
                gemv: match f.native {
                    Some(_) => KernelInfo::new(name("gemv", f), GEMV_NATIVE, None).checked(check::gemv_checks),
                    None => KernelInfo::new(name("gemv", f), GEMV_VARIANTS, None),
                },
                gemv_q8: match f.native_q8 {
                    Some(_) => KernelInfo::new(name("gemv_q8", f), GEMV_NATIVE, None).checked(check::gemv_checks),
                    None => KernelInfo::new(name("gemv_q8", f), GEMV_VARIANTS, None),
                },
                gemm: match f.native_gemm {
                    Some(_) => KernelInfo::new(name("gemm", f), GEMM_NATIVE, Some(matrix::gemm_extra)).checked(check::gemm_checks),
                    None => KernelInfo::new(name("gemm", f), GEMM_VARIANTS, Some(matrix::gemm_extra)),
                },
                gemm_q8: KernelInfo::new(name("gemm_q8", f), GEMV_VARIANTS, None),
                dequant: KernelInfo::new(name("dequant", f), PORTABLE, None),
                integer_dot: f.wgsl.contains("fn fmt_qdot("),
                runs: f.wgsl.contains("fn fmt_run_load("),
            })
            .collect()
    });
    let i = FORMATS.iter().position(|g| std::ptr::eq(*g, f) || g.name == f.name).unwrap_or(0);
    &all[i]
}

/// The [`KernelInfo`]s of every format's kernels (for the probe report; `mm_gemm_q8_<format>`
/// for the formats with an integer dot).
pub fn infos() -> Vec<&'static KernelInfo> {
    FORMATS
        .iter()
        .flat_map(|f| {
            let k = kernel_infos(f);
            [Some(&k.gemv), Some(&k.gemv_q8), Some(&k.gemm), k.integer_dot.then_some(&k.gemm_q8), Some(&k.dequant)].into_iter().flatten()
        })
        .collect()
}

/// One row chunk of a matrix on the GPU.
struct Chunk {
    row0: usize,
    rows: usize,
    data: GpuBuffer<u32>,
}

/// A weight matrix `[n, k]` of any supported format on the GPU (row r = output r).
pub struct WeightMatrix {
    format: &'static WeightFormat,
    n: usize,
    k: usize,
    row_words: usize,
    chunks: Vec<Chunk>,
}

/// The format of `ggml_type` as a family error (`UnsupportedType`, naming `tensor`).
fn format_for(ggml_type: GgmlType, tensor: Option<&str>) -> Result<&'static WeightFormat> {
    formats::format_of(ggml_type).map_err(|_| Error::UnsupportedType { ggml_type, tensor: tensor.map(str::to_string) })
}

/// Where an upload's bytes come from, for error messages.
fn what(tensor: Option<&str>) -> String {
    tensor.map_or_else(|| "weights".to_string(), |t| format!("tensor {t:?}"))
}

impl WeightMatrix {
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// The GGUF type of the weights' format (`None` for a format without one).
    pub fn ggml_type(&self) -> Option<GgmlType> {
        self.format.ggml_type
    }
    pub fn format(&self) -> &'static WeightFormat {
        self.format
    }
    /// Row chunks the matrix is split into (1 unless it exceeds the storage binding limit).
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }
    /// Bytes a full pass over the weights reads in the GPU layout.
    pub fn bytes(&self) -> u64 {
        self.n as u64 * self.row_words as u64 * 4
    }

    /// Upload `n` rows of `k` weights of `ggml_type` from their GGUF bytes (blocks row-major,
    /// `n * k / block * block_bytes` bytes), validated first: unsupported type, shape, length and
    /// block scales are checked before anything is uploaded.
    pub fn upload(ctx: &Context, ggml_type: GgmlType, n: usize, k: usize, bytes: &[u8]) -> Result<WeightMatrix> {
        Self::upload_format(ctx, format_for(ggml_type, None)?, n, k, bytes)
    }

    /// [`WeightMatrix::upload`] of a format given by its descriptor (one of
    /// [`crate::formats::FORMATS`], with or without a ggml type): `n * k / block * block_bytes`
    /// bytes of its blocks, row-major, validated first.
    pub fn upload_format(ctx: &Context, format: &'static WeightFormat, n: usize, k: usize, bytes: &[u8]) -> Result<WeightMatrix> {
        Self::upload_limited(ctx, format, n, k, bytes, None, u64::MAX)
    }

    /// Upload the tensor `name` of a GGUF file (k = ne0, n = the product of the other dims)
    /// straight from the file's bytes. Errors name the tensor.
    pub fn from_gguf(ctx: &Context, file: &GgufFile, name: &str) -> Result<WeightMatrix> {
        let info = file.tensor(name).ok_or_else(|| Error::Argument(format!("no tensor named {name:?}")))?;
        Self::from_gguf_info(ctx, file, info)
    }

    /// Upload the tensor `info` (from `file.tensors()`); see [`WeightMatrix::from_gguf`].
    pub fn from_gguf_info(ctx: &Context, file: &GgufFile, info: &TensorInfo) -> Result<WeightMatrix> {
        let name = info.name.as_str();
        let f = format_for(info.ggml_type, Some(name))?;
        let (n, k) = formats::matrix_dims(info).map_err(|e| Error::Shape(e.to_string()))?;
        let bytes = file.tensor_data(info).map_err(|e| Error::InvalidData(format!("tensor {name:?}: {e}")))?;
        Self::upload_limited(ctx, f, n, k, bytes, Some(name), u64::MAX)
    }

    /// Upload two matrices `a`, `b` of one type and shape `[n, k]` (GGUF bytes as in
    /// [`WeightMatrix::upload`]) as one `[2n, k]` matrix whose rows alternate: row `2i` = row `i`
    /// of `a`, row `2i + 1` = row `i` of `b`. The layout [`Epilogue::SwiGlu`] reads (gate, up).
    pub fn upload_interleaved(ctx: &Context, ggml_type: GgmlType, n: usize, k: usize, a: &[u8], b: &[u8]) -> Result<WeightMatrix> {
        Self::interleaved(ctx, format_for(ggml_type, None)?, n, k, a, b, None)
    }

    /// [`WeightMatrix::upload_interleaved`] from two tensors of a GGUF file (same type and
    /// dims, else an error naming both).
    pub fn from_gguf_interleaved(ctx: &Context, file: &GgufFile, a: &str, b: &str) -> Result<WeightMatrix> {
        let ta = file.tensor(a).ok_or_else(|| Error::Argument(format!("no tensor named {a:?}")))?;
        let tb = file.tensor(b).ok_or_else(|| Error::Argument(format!("no tensor named {b:?}")))?;
        ensure(ta.ggml_type == tb.ggml_type && ta.dims == tb.dims, || {
            Error::Shape(format!("tensors {a:?} ({:?} {:?}) and {b:?} ({:?} {:?}) differ in type or shape", ta.ggml_type, ta.dims, tb.ggml_type, tb.dims))
        })?;
        let f = format_for(ta.ggml_type, Some(a))?;
        let (n, k) = formats::matrix_dims(ta).map_err(|e| Error::Shape(e.to_string()))?;
        let bytes = |t: &TensorInfo| file.tensor_data(t).map_err(|e| Error::InvalidData(format!("tensor {:?}: {e}", t.name)));
        Self::interleaved(ctx, f, n, k, bytes(ta)?, bytes(tb)?, Some(&format!("{a} + {b}")))
    }

    /// Upload tensors of a GGUF file of one type and row length as one matrix whose rows are
    /// theirs, in order: `[n_0 + n_1 + ..., k]` (e.g. the q, k and v projections, so one GEMV
    /// computes all three). Errors name the tensors.
    pub fn from_gguf_concat(ctx: &Context, file: &GgufFile, names: &[&str]) -> Result<WeightMatrix> {
        let label = names.join(" + ");
        let first = names.first().ok_or_else(|| Error::Argument("no tensors to concatenate".into()))?;
        let info = |name: &str| file.tensor(name).ok_or_else(|| Error::Argument(format!("no tensor named {name:?}")));
        let t0 = info(first)?;
        let f = format_for(t0.ggml_type, Some(first))?;
        let (_, k) = formats::matrix_dims(t0).map_err(|e| Error::Shape(e.to_string()))?;
        let row_bytes = f.bytes_for(k).filter(|_| k > 0).ok_or_else(|| Error::Shape(format!("tensor {first:?}: row length k = {k} is not a whole number of {} blocks", f.name)))?;
        let (mut n, mut parts) = (0usize, Vec::with_capacity(names.len()));
        for name in names {
            let t = info(name)?;
            let (nt, kt) = formats::matrix_dims(t).map_err(|e| Error::Shape(e.to_string()))?;
            ensure(t.ggml_type == t0.ggml_type && kt == k, || {
                Error::Shape(format!("tensors {first:?} ({:?}, k = {k}) and {name:?} ({:?}, k = {kt}) differ in type or row length", t0.ggml_type, t.ggml_type))
            })?;
            let data = file.tensor_data(t).map_err(|e| Error::InvalidData(format!("tensor {name:?}: {e}")))?;
            let want = nt.checked_mul(row_bytes).ok_or_else(|| Error::Shape(format!("tensor {name:?}: {nt} rows of {row_bytes} bytes overflow")))?;
            ensure(data.len() == want, || Error::InvalidData(format!("tensor {name:?}: {} bytes, expected {want} for {nt} x {k} {}", data.len(), f.name)))?;
            n = n.checked_add(nt).ok_or_else(|| Error::Shape(format!("{label}: rows overflow")))?;
            parts.push(data);
        }
        // The parts are in the file: their total fits memory.
        Self::upload_limited(ctx, f, n, k, &parts.concat(), Some(&label), u64::MAX)
    }

    fn interleaved(ctx: &Context, f: &'static WeightFormat, n: usize, k: usize, a: &[u8], b: &[u8], tensor: Option<&str>) -> Result<WeightMatrix> {
        let w = what(tensor);
        let fname = f.name;
        let row_bytes = f.bytes_for(k).filter(|_| k > 0).ok_or_else(|| Error::Shape(format!("{w}: row length k = {k} is not a whole number of {fname} blocks")))?;
        let total = n.checked_mul(row_bytes).ok_or_else(|| Error::Shape(format!("{w}: n = {n} rows of {row_bytes} bytes overflow")))?;
        ensure(a.len() == total && b.len() == total, || Error::InvalidData(format!("{w}: {} and {} bytes, expected {total} each for {n} x {k} {fname}", a.len(), b.len())))?;
        let n2 = n.checked_mul(2).ok_or_else(|| Error::Shape(format!("{w}: 2 x {n} rows overflow")))?;
        let mut both = Vec::with_capacity(2 * total);
        for (ra, rb) in a.chunks_exact(row_bytes).zip(b.chunks_exact(row_bytes)) {
            both.extend_from_slice(ra);
            both.extend_from_slice(rb);
        }
        Self::upload_chunked(ctx, f, n2, k, &both, tensor, u64::MAX, 2)
    }

    /// [`WeightMatrix::upload`] with chunks of at most `max_chunk_bytes` (besides the device's
    /// binding limit): lets tests exercise the row-chunk path on small matrices.
    pub(crate) fn upload_limited(ctx: &Context, f: &'static WeightFormat, n: usize, k: usize, bytes: &[u8], tensor: Option<&str>, max_chunk_bytes: u64) -> Result<WeightMatrix> {
        Self::upload_chunked(ctx, f, n, k, bytes, tensor, max_chunk_bytes, 1)
    }

    /// The upload, with chunks a multiple of `row_multiple` rows where there are several.
    #[allow(clippy::too_many_arguments)]
    fn upload_chunked(
        ctx: &Context,
        f: &'static WeightFormat,
        n: usize,
        k: usize,
        bytes: &[u8],
        tensor: Option<&str>,
        max_chunk_bytes: u64,
        row_multiple: usize,
    ) -> Result<WeightMatrix> {
        let w = what(tensor);
        let fname = f.name;
        // A format that is not registered has no kernels.
        ensure(formats::format_named(fname).is_some(), || Error::Argument(format!("{w}: format {fname:?} is not one of formats::FORMATS")))?;
        ensure(n > 0 && k > 0, || Error::Shape(format!("{w}: n = {n}, k = {k}: both must be > 0")))?;
        ensure(k % f.block_weights == 0, || Error::Shape(format!("{w}: row length k = {k} is not a multiple of {} ({fname} block)", f.block_weights)))?;
        ensure(u32::try_from(n).is_ok() && u32::try_from(k).is_ok(), || Error::Shape(format!("{w}: n = {n}, k = {k} exceed u32")))?;
        let row_bytes = f.bytes_for(k).ok_or_else(|| Error::Shape(format!("{w}: k = {k} too large")))?;
        let total = n.checked_mul(row_bytes).ok_or_else(|| Error::Shape(format!("{w}: n = {n} rows of {row_bytes} bytes overflow")))?;
        ensure(bytes.len() == total, || Error::InvalidData(format!("{w}: {} bytes, expected {total} for {n} x {k} {fname}", bytes.len())))?;
        f.validate(bytes).map_err(|e| Error::InvalidData(format!("{w}: {e}")))?;
        let row_words = (f.gpu_row_words)(k);
        let row_gpu_bytes = row_words as u64 * 4;
        let limits = &ctx.caps().limits;
        let limit = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let cap = limit.min(max_chunk_bytes);
        // Per chunk the kernels index vec4s, rows * k4 outputs and rows * row_words words in u32.
        let idx_cap = (u32::MAX as u64 / (k as u64).div_ceil(4).max(row_words as u64)).max(1);
        let per_chunk = (cap / row_gpu_bytes).min(idx_cap).min(n as u64) as usize;
        // Interleaved matrices keep their row pairs in one chunk (Epilogue::SwiGlu).
        let per_chunk = if per_chunk < n && per_chunk >= row_multiple { per_chunk - per_chunk % row_multiple } else { per_chunk };
        ensure(per_chunk > 0, || Error::BindingTooLarge { name: "weights row", bytes: row_gpu_bytes, limit: cap })?;
        let mut chunks = Vec::with_capacity(n.div_ceil(per_chunk));
        let mut words = Vec::new();
        for row0 in (0..n).step_by(per_chunk) {
            let rows = per_chunk.min(n - row0);
            words.clear();
            words.resize(rows * row_words, 0u32);
            for (r, dst) in words.chunks_exact_mut(row_words).enumerate() {
                let at = (row0 + r) * row_bytes;
                (f.relayout_row)(&bytes[at..at + row_bytes], dst);
            }
            chunks.push(Chunk { row0, rows, data: ctx.upload(&words)? });
        }
        Ok(WeightMatrix { format: f, n, k, row_words, chunks })
    }

    fn params(&self, c: &Chunk) -> Params {
        Params {
            n: c.rows as u32,
            k: self.k as u32,
            k4: self.k.div_ceil(4) as u32,
            items: self.k.div_ceil(self.format.item_weights) as u32,
            row_vec4s: (self.row_words / 4) as u32,
            y_off: c.row0 as u32,
            ldy: self.n as u32,
            ..Params::zeroed()
        }
    }
}

params_struct! {
    /// The params block of every kernel of the family (wgsl/mm_common.wgsl).
    struct Params {
        n: u32,
        k: u32,
        k4: u32,
        items: u32,
        row_vec4s: u32,
        y_off: u32,
        m: u32,
        ldy: u32,
        tiles_n: u32,
        sps: u32,
        splits: u32,
        /// q8 GEMM: the stride of the activation records' planes (quads of the whole buffer).
        xs: u32,
    }
}

const GEMV_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::read("x", "vec4<f32>"), StorageBinding::write("y", "f32")];
const GEMV_Q8_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::read("xq", "vec4<u32>"), StorageBinding::write("y", "f32")];
const GEMV_QK_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::read("xk", "vec4<u32>"), StorageBinding::write("y", "f32")];
const DEQUANT_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::write("out", "vec4<f32>")];
const GATHER_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::read("idx", "u32"), StorageBinding::write("out", "vec4<f32>")];

/// A format as a pipeline-key field (compared and hashed by its name, unique among
/// [`FORMATS`]).
#[derive(Clone, Copy)]
pub struct Fmt(pub &'static WeightFormat);

impl PartialEq for Fmt {
    fn eq(&self, o: &Fmt) -> bool {
        self.0.name == o.0.name
    }
}
impl Eq for Fmt {}
impl std::hash::Hash for Fmt {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.name.hash(h)
    }
}
impl std::fmt::Debug for Fmt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

/// The activations a GEMV pipeline reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activations {
    /// f32 vectors.
    F32,
    /// int8 ([`Q8Activations`]), dequantised and multiplied by the format's f32 dot.
    Q8,
    /// int8 in quad order, multiplied by the format's integer dot (`fmt_qdot`).
    Q8Int,
}

impl Activations {
    /// The int8 path `f` takes: its integer dot where its WGSL part defines one and the
    /// activations hold the quad order, else the dequantising path.
    pub fn q8_for(f: &'static WeightFormat, xq_has_quads: bool) -> Activations {
        if has_integer_dot(f) && xq_has_quads {
            Activations::Q8Int
        } else {
            Activations::Q8
        }
    }
}

/// Whether the format's WGSL part defines the integer dot on quad-order int8 activations
/// (`fmt_qload` and `fmt_qdot`, contract in wgsl/mm_common.wgsl); read from the part once per
/// process, as the format's kernel infos are built.
pub fn has_integer_dot(f: &'static WeightFormat) -> bool {
    kernel_infos(f).integer_dot
}

/// What a GEMV does with each output `dot_r` (the row's dot product).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `y[r] = dot_r`.
    #[default]
    Store = 0,
    /// `y[r] += dot_r` (a residual add fused into the projection).
    Accumulate = 1,
    /// The matrix holds (gate, up) row pairs (rows `2i`, `2i + 1`; see
    /// [`WeightMatrix::upload_interleaved`]): `y[i] = silu(dot_2i) * dot_2i+1` with
    /// `silu(g) = g / (1 + exp(-g))`, `n / 2` outputs (SwiGLU fused into the projection).
    SwiGlu = 2,
    /// As [`Epilogue::SwiGlu`] with GELU's tanh approximation for the gate (GeGLU, Gemma):
    /// `y[i] = gelu_tanh(dot_2i) * dot_2i+1`, `gelu_tanh(g) = g / 2 * (1 + tanh(u))`,
    /// `u = sqrt(2 / pi) * (g + 0.044715 g^3)`.
    GeGlu = 3,
}

impl Epilogue {
    /// Whether the matrix is read as (gate, up) row pairs, `n / 2` outputs.
    pub fn pairs(self) -> bool {
        matches!(self, Epilogue::SwiGlu | Epilogue::GeGlu)
    }

    /// The epilogue of number `code` (its discriminant: [`crate::formats::NativeGemv::entries`]).
    pub(crate) fn of(code: u32) -> Option<Epilogue> {
        [Epilogue::Store, Epilogue::Accumulate, Epilogue::SwiGlu, Epilogue::GeGlu].get(code as usize).copied()
    }
}

/// The input vector of a GEMV.
#[derive(Clone, Copy)]
pub enum GemvInput<'a> {
    /// f32 activations (`len >= k`).
    F32(&'a GpuBuffer<f32>),
    /// int8 activations (`k() == k`): see [`gemv_q8`].
    Q8(&'a Q8Activations),
}

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MmPipeline {
    Gemv {
        format: Fmt,
        variant: Variant,
        plan: GemvPlan,
        act: Activations,
        epi: Epilogue,
    },
    Gemm {
        format: Fmt,
    },
    /// The Native GEMM (the format's [`crate::formats::NativeGemm`]): the Portable GEMM's plan,
    /// simdgroup 8x8 matrices with f16 inputs and f32 sums (the Matrix GEMM's numerics).
    GemmNative {
        format: Fmt,
    },
    /// The GEMM of up to `slots` rows on int8 activations ([`gemm_q8`]): the integer GEMV's
    /// teams, `slots` accumulators per output ([`gemm_q8_slots`]).
    GemmQ8 {
        format: Fmt,
        variant: Variant,
        plan: GemvPlan,
        slots: u32,
    },
    /// The Matrix GEMM ([`matrix`]) built for subgroup size `sg`.
    GemmMatrix {
        format: Fmt,
        sg: u32,
        tile: matrix::MatrixTile,
    },
    /// The two-pass Matrix GEMM's second pass ([`wide`]) built for subgroup size `sg`: f16
    /// operands, any format.
    GemmWide {
        sg: u32,
        tile: matrix::MatrixTile,
    },
    /// The two-pass Matrix GEMM's first pass over a weight chunk of `format`.
    Widen {
        format: Fmt,
    },
    /// The two-pass Matrix GEMM's first pass over the activations.
    WidenX,
    Dequant {
        format: Fmt,
    },
    /// One row, chosen by an index on the GPU ([`gather_row`]).
    Gather {
        format: Fmt,
    },
}

impl PipelineKey for MmPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let params_size = std::mem::size_of::<Params>() as u64;
        match *self {
            MmPipeline::Gemv { format, variant: Variant::Native, plan, act, epi } => {
                let twin = MmPipeline::Gemv { format, variant: Variant::Subgroup, plan, act, epi }.describe(_caps);
                match native_gemv(format.0, act).and_then(|n| Some((n.msl, native_entry(n, plan, epi)?))) {
                    Some((msl, entry)) => PipelineDesc::native(msl, entry, twin),
                    // No MSL for this key (the dequantising int8 path, or never planned): the
                    // twin stands in, so such a key still computes the right result.
                    None => twin,
                }
            }
            MmPipeline::Gemv { format, variant, plan, act, epi } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![
                    team_source(variant),
                    COMMON_WGSL,
                    match act {
                        Activations::F32 => GEMV_WGSL,
                        Activations::Q8 => GEMV_Q8_WGSL,
                        Activations::Q8Int => GEMV_QK_WGSL,
                    },
                    format.0.wgsl,
                    if act == Activations::Q8Int { "" } else { ITEMS_WGSL },
                    GEMV_ACC_WGSL,
                    crate::kernels::elementwise::ELEM_F32,
                    crate::kernels::elementwise::GLU_WGSL,
                    ROWS_WGSL,
                ]),
                entry: "main",
                constants: plan.constants(variant, &[("EPI", epi as u32 as f64)]),
                workgroup_size: [plan.wg, 1, 1],
                params_size,
                bindings: match act {
                    Activations::F32 => GEMV_BINDINGS,
                    Activations::Q8 => GEMV_Q8_BINDINGS,
                    Activations::Q8Int => GEMV_QK_BINDINGS,
                },
            },
            MmPipeline::Gemm { format } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![COMMON_WGSL, format.0.wgsl, GEMM_WGSL, super::splitk::TILE_WGSL]),
                entry: "main",
                constants: vec![],
                workgroup_size: [128, 1, 1],
                params_size,
                bindings: GEMV_BINDINGS,
            },
            MmPipeline::GemmNative { format } => {
                let twin = MmPipeline::Gemm { format }.describe(_caps);
                match &format.0.native_gemm {
                    Some(g) => PipelineDesc::native(g.msl, g.entry, twin),
                    // No MSL GEMM for this format: the twin stands in.
                    None => twin,
                }
            }
            MmPipeline::GemmMatrix { format, sg, tile } => matrix::matrix_desc(format, sg, tile),
            MmPipeline::GemmWide { sg, tile } => wide::wide_desc(sg, tile),
            MmPipeline::Widen { format } => wide::widen_desc(format),
            MmPipeline::WidenX => wide::widen_x_desc(),
            MmPipeline::GemmQ8 { format, variant, plan, slots } => gemm_q8::desc(format, variant, plan, slots, params_size),
            MmPipeline::Dequant { format } | MmPipeline::Gather { format } => {
                let (text, bindings) = if matches!(self, MmPipeline::Dequant { .. }) { (DEQUANT_WGSL, DEQUANT_BINDINGS) } else { (GATHER_WGSL, GATHER_BINDINGS) };
                PipelineDesc {
                    source: ShaderSource::Wgsl(vec![COMMON_WGSL, format.0.wgsl, text]),
                    entry: "main",
                    constants: vec![],
                    workgroup_size: [64, 1, 1],
                    params_size,
                    bindings,
                }
            }
        }
    }
}

/// The MSL GEMV of `f` on activations `act`: `native` for f32, `native_q8` for the integer dot
/// (none for the dequantising int8 path).
pub(crate) fn native_gemv(f: &'static WeightFormat, act: Activations) -> Option<&'static formats::NativeGemv> {
    match act {
        Activations::F32 => f.native.as_ref(),
        Activations::Q8Int => f.native_q8.as_ref(),
        Activations::Q8 => None,
    }
}

/// The entry point of the Native GEMV `n` for `plan` and `epi`, if it has one.
fn native_entry(n: &formats::NativeGemv, plan: GemvPlan, epi: Epilogue) -> Option<&'static str> {
    n.entries.iter().find(|&&(rows, e, _)| native_plan(rows) == plan && e == epi as u32).map(|&(_, _, entry)| entry)
}

/// The Native plan of `f` on activations `act` for an `n`-row matrix: the most rows per
/// threadgroup from n = 2048 up, the fewest below (so that small matrices still give enough
/// threadgroups), as the Q4_K GEMV's. The dequantising int8 path takes the integer dot's plan
/// (and runs its twin: it has no MSL).
fn native_plan_for(f: &'static WeightFormat, act: Activations, n: usize) -> Result<GemvPlan> {
    let native = if act == Activations::F32 { f.native.as_ref() } else { f.native_q8.as_ref() };
    let entries = native.map_or(&[][..], |n| n.entries);
    let pick = if n >= 2048 { entries.iter().map(|e| e.0).max() } else { entries.iter().map(|e| e.0).min() };
    let info = kernel_infos(f);
    let kernel = if act == Activations::F32 { info.gemv.name } else { info.gemv_q8.name };
    pick.map(native_plan).ok_or_else(|| Error::Unsupported { kernel, variant: Variant::Native, reason: format!("format {} has no MSL GEMV on these activations", f.name) })
}

fn gemv_any(b: &mut Batch, w: &WeightMatrix, x: crate::buffer::BufRef, y: &GpuBuffer<f32>, act: Activations, epi: Epilogue) -> Result<()> {
    let ctx = b.context();
    if epi.pairs() {
        ensure(w.n % 2 == 0 && w.chunks.iter().all(|c| c.row0 % 2 == 0), || Error::Shape(format!("{epi:?} GEMV needs (gate, up) row pairs: n = {} rows", w.n)))?;
        y.require("y", w.n / 2)?;
    } else {
        y.require("y", w.n)?;
    }
    let infos = kernel_infos(w.format);
    ctx.with_native_fallback(if act == Activations::F32 { &infos.gemv } else { &infos.gemv_q8 }, |variant| {
        let mut plan = if variant == Variant::Native { native_plan_for(w.format, act, w.n)? } else { gemv_plan(ctx.caps(), variant) };
        if epi.pairs() && plan.rows % 2 == 1 {
            plan.rows = 2; // a team must hold whole (gate, up) pairs
        }
        let key = MmPipeline::Gemv { format: Fmt(w.format), variant, plan, act, epi };
        for c in &w.chunks {
            let grid = plan_grid(ctx, &plan, c.rows, variant)?;
            let mut params = w.params(c);
            if act == Activations::Q8Int {
                params.items = (w.k / 64) as u32; // the integer GEMV steps over quads
            }
            b.dispatch(&key, &params, &[c.data.raw(), x, y.raw()], grid)?;
        }
        Ok(())
    })
}

/// `y[0..n] = W x` for one input vector (`x.len() >= k`, `y.len() >= n`).
pub fn gemv(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>) -> Result<()> {
    gemv_with(b, w, GemvInput::F32(x), y, Epilogue::Store)
}

/// A GEMV with an [`Epilogue`]: `y = W x`, `y += W x`, or the SwiGLU / GeGLU of (gate, up) row
/// pairs.
pub fn gemv_with(b: &mut Batch, w: &WeightMatrix, x: GemvInput, y: &GpuBuffer<f32>, epi: Epilogue) -> Result<()> {
    match x {
        GemvInput::F32(x) => {
            x.require("x", w.k)?;
            gemv_any(b, w, x.raw(), y, Activations::F32, epi)
        }
        GemvInput::Q8(xq) => {
            xq.require_one_row("gemv_q8")?;
            ensure(xq.k() == w.k, || Error::Shape(format!("q8 activations have k = {}, the matrix k = {}", xq.k(), w.k)))?;
            match (Activations::q8_for(w.format, xq.has_q4k()), xq.q4k_words()) {
                (Activations::Q8Int, Some(xk)) => gemv_any(b, w, xk.raw(), y, Activations::Q8Int, epi),
                _ => gemv_any(b, w, xq.int4_words().raw(), y, Activations::Q8, epi),
            }
        }
    }
}

/// `y[0..n] = W x_q8` on int8 activations (quantised by [`crate::kernels::q8::quantize_activations`];
/// `xq.k() == k`): numerics of `reference::q8` (testkit) (x rounded to 8 bits per block of 32).
/// Formats with an integer dot ([`has_integer_dot`]: Q4_K, Q6_K, Q8_0, Q4_0) multiply the int8 codes directly
/// when `k % 256 == 0`; the others dequantise the activations and run their f32 dot.
pub fn gemv_q8(b: &mut Batch, w: &WeightMatrix, xq: &Q8Activations, y: &GpuBuffer<f32>) -> Result<()> {
    gemv_with(b, w, GemvInput::Q8(xq), y, Epilogue::Store)
}

/// `y[m, n] = x[m, k] W^T` (row-major x and y). With a single chunk and few output tiles, K
/// is split over more workgroups (`kernels::splitk`). Runs as Portable or, from
/// [`matrix::MATRIX_MIN_M`] rows on where the adapter has cooperative matrices, as Matrix (f16
/// inputs: see [`matrix`]); on Metal, for formats with an MSL GEMM
/// ([`crate::formats::NativeGemm`]), as Native (the Portable plan on simdgroup matrices, f16
/// inputs as Matrix), falling back to the best other variant if its pipeline fails to build or
/// its self-check fails.
pub fn gemm(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    let ctx = b.context();
    let mn = check_gemm(w, x, y, m)?;
    ctx.with_native_fallback(&kernel_infos(w.format).gemm, |variant| {
        // Native and Portable share the plan (32 x 64 tiles, 32-column steps, the Portable
        // split-K target).
        let (key, tm, tn, tk, target) = match gemm_key(ctx, w.format, variant, m, w.k)? {
            Some(key @ MmPipeline::GemmMatrix { tile, .. }) => (key, tile.tm(), tile.tn(), tile.tk(), ctx.options().tuning.gemm_workgroups.unwrap_or(tile.split_target())),
            Some(key @ MmPipeline::GemmNative { .. }) => (key, 32, 64, 32, super::splitk::TARGET),
            _ => (MmPipeline::Gemm { format: Fmt(w.format) }, 32, 64, 32, super::splitk::TARGET),
        };
        let steps = w.k.div_ceil(tk);
        for c in &w.chunks {
            let tiles_n = c.rows.div_ceil(tn);
            let tiles = m.div_ceil(tm) * tiles_n;
            let (mut sps, mut splits) = if w.chunks.len() == 1 { matrix::split_plan(ctx.caps(), tiles, w.k, tk, target) } else { (steps, 1) };
            // The kernels index the split partials in u32.
            if splits.checked_mul(mn).is_none_or(|v| v > u32::MAX as usize) {
                (sps, splits) = (steps, 1);
            }
            let params = Params { m: m as u32, tiles_n: tiles_n as u32, sps: sps as u32, splits: splits as u32, ..w.params(c) };
            let grid = ctx.grid(crate::error::dims::prod("GEMM workgroups", &[tiles, splits])? as u64)?;
            super::splitk::run(b, y, mn, splits, |b, out| b.dispatch(&key, &params, &[c.data.raw(), x.raw(), out], grid))?;
        }
        Ok(())
    })
}

/// The size checks of a GEMM of `m` rows of `x` by `w` into `y` (u32 indices, buffer lengths):
/// returns the outputs `m n`.
fn check_gemm(w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<usize> {
    ensure(m > 0, || Error::Shape("m = 0".into()))?;
    let mk = m.checked_mul(w.k).filter(|&v| v <= u32::MAX as usize);
    let mn = m.checked_mul(w.n).filter(|&v| v <= u32::MAX as usize);
    let (mk, mn) = mk.zip(mn).ok_or_else(|| Error::Shape(format!("m = {m} too large for n = {}, k = {}", w.n, w.k)))?;
    x.require("x", mk)?;
    y.require("y", mn)?;
    Ok(mn)
}

/// The GEMM pipeline `gemm` records for `m` rows of `format` with row length `k` in `ctx` under
/// its policy: `None` for the Portable kernel, else the Native one (where the policy selects
/// Native) or the Matrix one ([`matrix`] has the rules; it needs `k % 4 == 0`); both round their
/// inputs to f16. Errors as `gemm` would for the variant: [`Error::Unsupported`] under `Require`
/// of a variant it can't run.
pub fn gemm_pipeline(ctx: &Context, format: &'static WeightFormat, m: usize, k: usize) -> Result<Option<MmPipeline>> {
    gemm_key(ctx, format, ctx.variant_for(&kernel_infos(format).gemm)?, m, k)
}

/// [`gemm_pipeline`] for the selected `variant`.
fn gemm_key(ctx: &Context, format: &'static WeightFormat, variant: Variant, m: usize, k: usize) -> Result<Option<MmPipeline>> {
    if variant == Variant::Native {
        return Ok(format.native_gemm.is_some().then_some(MmPipeline::GemmNative { format: Fmt(format) }));
    }
    matrix::gemm_choice(ctx, Fmt(format), &kernel_infos(format).gemm, variant, m, k)
}

/// `y = x W^T` for `m` input rows: GEMV when `m == 1`, GEMM otherwise.
pub fn matmul(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    if m == 1 {
        gemv(b, w, x, y)
    } else {
        gemm(b, w, x, y, m)
    }
}

/// Dequantise to a row-major f32 `[n, k]` buffer, bit-exactly as [`crate::formats::dequantize`].
pub fn dequantize(b: &mut Batch, w: &WeightMatrix, out: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    let total = w.n.checked_mul(w.k).filter(|&v| v <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("n * k = {} * {} values exceed u32 indices", w.n, w.k)))?;
    out.require("out", total)?;
    ctx.variant_for(&kernel_infos(w.format).dequant)?;
    let key = MmPipeline::Dequant { format: Fmt(w.format) };
    for c in &w.chunks {
        // Output vec4s the chunk touches (rows start on a vec4 only when k % 4 == 0).
        let (e0, e1) = (c.row0 * w.k, (c.row0 + c.rows) * w.k);
        let vec4s = if w.k % 4 == 0 { (e1 - e0) / 4 } else { e1.div_ceil(4) - e0 / 4 };
        let grid = ctx.grid((vec4s as u64).div_ceil(64))?;
        b.dispatch(&key, &w.params(c), &[c.data.raw(), out.raw()], grid)?;
    }
    Ok(())
}

/// `out[0..k]` = row `idx[0]` of `w`, dequantised bit-exactly as [`dequantize`]: a row lookup
/// whose index the GPU wrote (the embedding of a token chosen on the GPU). An index `>= n`
/// writes nothing. Needs `k % 4 == 0`.
pub fn gather_row(b: &mut Batch, w: &WeightMatrix, idx: &GpuBuffer<u32>, out: &GpuBuffer<f32>) -> Result<()> {
    gather_rows(b, w, idx, 1, out)
}

/// `out[i k..(i + 1) k]` = row `idx[i]` of `w` for `i < m`, as [`gather_row`] (a prompt's
/// embedding rows, looked up on the GPU).
pub fn gather_rows(b: &mut Batch, w: &WeightMatrix, idx: &GpuBuffer<u32>, m: usize, out: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    ensure(w.k % 4 == 0, || Error::Shape(format!("gather_rows needs k % 4 == 0, k = {}", w.k)))?;
    let total = m.checked_mul(w.k).filter(|&v| v <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("{m} rows of {} values exceed u32 indices", w.k)))?;
    idx.require("idx", m)?;
    out.require("out", total)?;
    ctx.variant_for(&kernel_infos(w.format).dequant)?;
    let key = MmPipeline::Gather { format: Fmt(w.format) };
    let grid = ctx.grid(((total / 4) as u64).div_ceil(64))?;
    for c in &w.chunks {
        let p = Params { m: m as u32, ..w.params(c) };
        b.dispatch(&key, &p, &[c.data.raw(), idx.raw(), out.raw()], grid)?;
    }
    Ok(())
}

/// The family's params and its WGSL pipelines, every format's (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let pipelines = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let mut v = wide::params_twins(&crate::suite::describe_all(wide::shared_pipelines()));
    v.push(crate::kernels::ParamsTwin { rust: "matmul::Params", size: std::mem::size_of::<Params>(), fields: Params::FIELDS, pipelines });
    v
}
