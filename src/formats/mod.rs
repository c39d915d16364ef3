//! CPU-side weight formats and the format registry of the weight-matrix family
//! ([`crate::kernels::matmul`]), plus the GGUF container ([`gguf`]).
//!
//! This module only depends on `std`, `half`, `bytemuck` and `fastrand`. Every parser here
//! returns a [`FormatError`] on malformed input; none of them panics or allocates more than the
//! input could justify.
//!
//! # Weight formats
//!
//! A format is one Rust module here (a `pub const FORMAT:` [`WeightFormat`]) plus one WGSL part
//! `wgsl/fmt_<name>.wgsl`, registered with one line in [`FORMATS`]. Everything else - upload,
//! GGUF loading, GEMV (Portable and Subgroup, f32 and int8 activations), GEMM, dequantise, the
//! harness and bench cases - is generic over the descriptor and needs no edit.
//!
//! A format's identity is its [`WeightFormat::name`] (pipeline keys, kernel names). Most formats
//! are GGUF types ([`WeightFormat::ggml_type`]); a format of this library with no GGUF type
//! (`ggml_type: None`: [`int4`], [`int8`]) is never chosen by [`format_of`] or GGUF loading and
//! is uploaded with `WeightMatrix::upload_format` from its own block bytes.
//!
//! ## GPU layout
//!
//! A matrix of `n` rows and `k` columns is uploaded as one `array<vec4<u32>>` (`wq`): row `r`
//! starts at vec4 `r * row_vec4s` where `row_vec4s = (gpu_row_words)(k) / 4`; what lies inside a
//! row is the format's choice ([`WeightFormat::relayout_row`] writes it from the row's block
//! bytes, on a zero-filled row, so padding is zero). Rows are independent, which lets the family
//! split a matrix larger than the device's storage binding limit into row chunks. An **item** is
//! [`WeightFormat::item_weights`] weights of one row (a multiple of 4): the unit a GEMV lane
//! loads and multiplies per step; a row has `items = ceil(k / item_weights)` items.
//!
//! ## WGSL part contract (`wgsl/fmt_<name>.wgsl`)
//!
//! The part is concatenated with the family's generic parts (wgsl/mm_*.wgsl, and the team file
//! for GEMVs); declaration order does not matter in WGSL. Every module-scope name the part
//! declares must start with `fmt_` or `Fmt` (the generic parts use `mm_`, `Mm`, `team_`, `Team`,
//! `p`, `wq`, `x`, `xq`, `y`, `out`, `main`). The generic parts provide:
//!
//! - `wq: array<vec4<u32>>` - the matrix (read only);
//! - `p.k` (columns), `p.k4` (`ceil(k / 4)`), `p.row_vec4s`, `p.items` (items per row);
//! - `fn mm_x4(c4: u32) -> vec4<f32>` - activations of columns `4c4 .. 4c4 + 3` (zero at
//!   columns `>= p.k`; in the int8-activation GEMV, the dequantised int8 values). Use it only
//!   from `fmt_x` (other kernels define it as zeros);
//! - helpers in wgsl/mm_common.wgsl: `mm_f16x2(w) -> vec2<f32>` (both halves of `w`, exactly:
//!   subnormals, infinities and NaN included), `mm_bf16x2(w)`, `mm_i8x4(w) -> vec4<f32>` (the
//!   four bytes as signed integers), `mm_u8x4(w)`, `mm_u4x8(w) -> array<vec4<f32>, 2>`
//!   (nibbles, byte order, low nibble first).
//!
//! The part must define:
//!
//! - `struct FmtRow` and `fn fmt_load(base: u32, item: u32) -> FmtRow`: everything one row needs
//!   at one item (`base` = the row's first vec4 in `wq`, `item < p.items`). Loads only: the
//!   GEMV issues the loads of several rows and items before any arithmetic. Prefer 16-byte
//!   loads at vec4 indices that are consecutive for consecutive items (lanes take consecutive
//!   items, so those loads coalesce);
//! - `struct FmtX` and `fn fmt_x(item: u32) -> FmtX`: the activations of one item, loaded
//!   through `mm_x4` (plus any sums the dot wants), shared by the ROWS rows a team computes;
//! - `fn fmt_dot(w: FmtRow, x: FmtX) -> f32`: the row's partial dot over the item. It may
//!   factor the block scales out (`d * sum q x - dmin * sum m sx`) instead of dequantising;
//! - `fn fmt_w4(base: u32, c4: u32) -> vec4<f32>`: the weights of columns `4c4 .. 4c4 + 3` of
//!   the row at `base` (`c4 < p.k4`), **bit-exact** with [`WeightFormat::dequantize`] (used by the
//!   dequantise kernel and staged by the GEMM). Columns `>= k` of the last vec4 (float formats
//!   with `k % 4 != 0`) read the row's zero padding; the kernels never use them.
//!
//! ## Row length
//!
//! `k` must be a multiple of [`WeightFormat::block_weights`], nothing more: the float formats
//! take any `k >= 1` (the GEMV masks x past `k`, the GEMM reads x rows that do not start on a
//! vec4 value by value, the dequantiser writes values one by one when `k % 4 != 0`).
//!
//! ## Native (MSL) GEMV
//!
//! A format may add a hand-written MSL GEMV (`native:` a [`NativeGemv`]), which becomes the
//! Native variant of `mm_gemv_<name>` with no other edit (binding, clang, CPU-execution and SPIR-V
//! twin tests all find it through the kernel registry). Every format has one: F32, F16, BF16,
//! Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, INT4 and INT8. They share one MSL
//! driver: `native_gemv!("<name>")` assembles msl/gemv/head.metal (params, team, sums, decode
//! helpers, epilogue), the format's decode part `msl/gemv/fmt_<name>.metal` (`FmtRow`, `fmt_load`,
//! `FmtX`, `fmt_x`, `fmt_dot`: the contract of the WGSL part above, in MSL, mirroring the format's
//! Subgroup GEMV), msl/gemv/rows.metal (the row driver) and the usual entry points, one thin
//! `kernel void` each. Likewise `native_q8:` for the integer-dot GEMV on int8 activations
//! (`mm_gemv_q8_<name>`, the model's decode step): Q4_K, Q6_K, Q8_0 and Q4_0 share
//! msl/mm_gemv_q8.metal, their entry points named by the format. Each entry point serves one
//! rows-per-threadgroup count and one epilogue (store, residual add, SwiGLU, GeGLU).
//!
//! Optionally, for the integer-dot GEMV on int8 activations (Q4_K, Q6_K, Q8_0 and Q4_0 define it): a
//! `struct FmtQRow` (or an alias), `fn fmt_qload(base: u32, quad: u32) -> FmtQRow` (loads only)
//! and `fn fmt_qdot(w: FmtQRow, x: MmQx) -> f32`, where a quad is 64 columns of a 256-column
//! block (positions `4u .. 4u + 3` and `4u + 16 .. 4u + 19` of its eight 32-column sub-blocks,
//! `u = quad % 4`) and `MmQx` (wgsl/mm_common.wgsl) holds the quad's int8 activation codes,
//! scales and scaled code sums. `dot4I8Packed` multiplies four codes at once (DP4A where the
//! device has integer dot products). Parts without `fmt_qdot` run their f32 dot on dequantised
//! int8 activations instead.
//!
//! Optionally, for the Matrix GEMM's weight staging (every quantised format defines it), the
//! *run hook*: a `struct FmtRun` (or an alias),
//! `fn fmt_run_load(base: u32, run: u32) -> FmtRun` (loads only: the GEMM issues them one K step
//! ahead and keeps the result in registers) and `fn fmt_run(r: FmtRun) -> array<vec4<f32>, 8>`:
//! the 32 weights of columns `32 run .. 32 run + 31` of the row at `base`, vec4 `t` = columns
//! `32 run + 4t ..`, **bit-exact** with `fmt_w4` (decoding the block's scales once per run, not
//! once per vec4). Only formats whose blocks are a multiple of 32 weights may define it (so
//! `k % 32 == 0` and a run never leaves its block); it is called only for `run < k / 32`. Parts
//! without it are staged through eight `fmt_w4` calls per run (wgsl/mm_run_w4.wgsl). Whether a
//! part has the hook is read from its text once (`FormatKernels::runs`); a test compares every
//! run with the CPU dequantiser on any adapter.
//!
//! ## Native (MSL) GEMM
//!
//! A format may also add a hand-written MSL GEMM (`native_gemm:` a [`NativeGemm`]): one entry
//! point mirroring the family's Portable GEMM of the format (same plan and outputs, f16 inputs
//! on simdgroup matrices), which becomes the Native variant of `mm_gemm_<name>`. Q4_K, Q6_K and
//! Q8_0 share msl/mm_gemm_quant.metal, one entry point each.
//!
//! Reading outside the row (`base .. base + row_vec4s`) is a bug: shader bounds checks are off.

use std::fmt;

/// Calls `$then!(args; (rows, epilogue, suffix) ...)` with the usual entry-point table of a
/// Native GEMV: for 2 and 4 rows per threadgroup, the plain store `_r<rows>`, the residual add
/// `_r<rows>_acc`, the SwiGLU `_r<rows>_swiglu` and the GeGLU `_r<rows>_geglu`.
macro_rules! native_gemv_table {
    ($then:ident!($($arg:expr),*)) => {
        $then!($($arg),*; (2, 0, "_r2") (2, 1, "_r2_acc") (2, 2, "_r2_swiglu") (2, 3, "_r2_geglu")
            (4, 0, "_r4") (4, 1, "_r4_acc") (4, 2, "_r4_swiglu") (4, 3, "_r4_geglu"))
    };
}

/// The entry points of a Native GEMV ([`NativeGemv::entries`]) named `<prefix>` + the suffixes of
/// `native_gemv_table!`.
macro_rules! native_gemv_entries {
    ($prefix:expr) => {
        native_gemv_table!(native_gemv_entry_list!($prefix))
    };
}

macro_rules! native_gemv_entry_list {
    ($prefix:expr; $(($rows:literal, $epi:literal, $suffix:literal))*) => {
        &[$(($rows, $epi, concat!($prefix, $suffix))),*]
    };
}

/// The MSL kernels of the entry points `<prefix>` + suffix: each one thin `kernel void` that runs
/// the shared driver's `gemv_rows<rows, epilogue>` (msl/gemv/rows.metal).
macro_rules! native_gemv_kernels {
    ($prefix:expr; $(($rows:literal, $epi:literal, $suffix:literal))*) => {
        concat!($(
            "\nkernel void ", $prefix, $suffix, "(constant MmParams& p [[buffer(0)]], device const uint4* wq [[buffer(1)]],\n",
            "    device const float4* x [[buffer(2)]], device float* y [[buffer(3)]], uint3 tg [[threadgroup_position_in_grid]],\n",
            "    uint3 ntg [[threadgroups_per_grid]], uint tid [[thread_index_in_threadgroup]], uint3 tptg [[threads_per_threadgroup]],\n",
            "    uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]]) {\n",
            "    threadgroup float4 scratch[MAX_SIMDGROUPS];\n",
            "    gemv_rows<", $rows, "u, ", $epi, "u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));\n",
            "}\n"
        ),*)
    };
}

/// The Native f32-activation GEMV of format `$name` on the shared MSL driver: msl/gemv/head.metal,
/// the format's decode part `msl/gemv/fmt_<name>.metal`, msl/gemv/rows.metal and the usual entry
/// points `mm_gemv_<name>_r2` .. (`native_gemv_table!`), assembled into one program.
macro_rules! native_gemv {
    ($name:literal) => {
        Some(super::NativeGemv {
            msl: concat!(
                include_str!("../../msl/gemv/head.metal"),
                include_str!(concat!("../../msl/gemv/fmt_", $name, ".metal")),
                include_str!("../../msl/gemv/rows.metal"),
                native_gemv_table!(native_gemv_kernels!(concat!("mm_gemv_", $name)))
            ),
            entries: native_gemv_entries!(concat!("mm_gemv_", $name)),
        })
    };
}

mod blocks;
pub mod gguf;
mod weight;
pub use weight::*;

/// Declares the format modules and [`FORMATS`], in order: adding a format = its name here.
macro_rules! weight_formats {
    ($($m:ident),* $(,)?) => {
        $(pub mod $m;)*
        /// Every weight format of the matmul family (one line per format: its module).
        pub static FORMATS: &[&WeightFormat] = &[$(&$m::FORMAT),*];
    };
}

weight_formats![f32, f16, bf16, q8_0, q4k, q4_0, q4_1, q5_0, q5_1, q5_k, q6_k, q2_k, q3_k, int4, int8];

/// Errors from the quantisation helpers and the GGUF reader/writer.
#[derive(Debug)]
#[non_exhaustive]
pub enum FormatError {
    /// A length that must be a multiple of a block size is not (e.g. K % 256 != 0).
    NotBlockMultiple { what: &'static str, len: u64, block: u64 },
    /// A quantiser input is NaN or infinite.
    NonFinite { index: usize },
    /// The file does not start with `GGUF`.
    BadMagic([u8; 4]),
    /// GGUF version other than 2 or 3.
    UnsupportedVersion(u32),
    /// A fixed-size field runs past the end of the input.
    Truncated { what: &'static str, offset: u64 },
    /// A length or count needs more bytes than remain in the input.
    LengthExceedsFile { what: &'static str, len: u64, remaining: u64 },
    /// A metadata value type id outside 0..=12.
    UnknownValueType(u32),
    /// A bool byte other than 0 or 1.
    InvalidBool(u8),
    /// A string that is not UTF-8.
    InvalidUtf8 { offset: u64 },
    /// Arrays nested deeper than the reader allows.
    NestingTooDeep { depth: usize },
    /// The same metadata key appears twice.
    DuplicateKey(String),
    /// The same tensor name appears twice.
    DuplicateTensor(String),
    /// A metadata key has a type the reader cannot use (e.g. a string `general.alignment`).
    WrongMetadataType { key: String, expected: &'static str },
    /// `general.alignment` is zero or not a power of two.
    BadAlignment(u64),
    /// A tensor has more than 4 dimensions.
    TooManyDims { name: String, n_dims: u32 },
    /// The element count or byte size of a tensor overflows u64.
    ShapeOverflow { name: String },
    /// A tensor's first dimension is not a multiple of its type's block size.
    BadTensorShape { name: String, ne0: u64, block: u64 },
    /// A tensor offset is not a multiple of the file's alignment.
    MisalignedTensor { name: String, offset: u64, alignment: u64 },
    /// A tensor's bytes lie (partly) outside the data section.
    TensorOutOfRange { name: String, start: u64, len: u64, available: u64 },
    /// The tensor's ggml type has no known block size, so its bytes cannot be located.
    UnknownTensorType { name: String, id: u32 },
    /// A tensor or buffer of a ggml type the weight formats do not support (IQ*, TQ*, MXFP4, ...).
    UnsupportedType { ggml_type: gguf::GgmlType, tensor: Option<String> },
    /// A block scale is NaN or infinite (block index within the data).
    NonFiniteScale { block: usize },
    /// Data of the wrong length for its shape.
    WrongLength { what: &'static str, len: u64, expected: u64 },
    /// Parsing would hold more memory than the file's size allows (see `gguf`'s module docs):
    /// `bytes` more were needed with `left` left in the budget.
    MetadataTooLarge { bytes: u64, left: u64 },
    /// I/O error while reading a file.
    Io(std::io::Error),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FormatError::*;
        match self {
            NotBlockMultiple { what, len, block } => {
                write!(f, "{what}: length {len} is not a multiple of {block}")
            }
            NonFinite { index } => write!(f, "non-finite input value at index {index}"),
            BadMagic(m) if m.iter().all(|b| b.is_ascii_graphic() || *b == b' ') => write!(f, "not a GGUF file: magic {:?}, expected \"GGUF\"", String::from_utf8_lossy(m)),
            BadMagic(m) => write!(f, "not a GGUF file: magic bytes {m:02x?}, expected \"GGUF\""),
            UnsupportedVersion(v) => write!(f, "unsupported GGUF version {v} (need 2 or 3)"),
            Truncated { what, offset } => write!(f, "truncated file: {what} at byte {offset} runs past the end"),
            LengthExceedsFile { what, len, remaining } => {
                write!(f, "{what} {len} needs more than the {remaining} bytes left")
            }
            UnknownValueType(t) => write!(f, "unknown GGUF metadata value type {t}"),
            InvalidBool(b) => write!(f, "invalid bool byte {b}"),
            InvalidUtf8 { offset } => write!(f, "string at byte {offset} is not UTF-8"),
            NestingTooDeep { depth } => write!(f, "arrays nested deeper than {depth}"),
            DuplicateKey(k) => write!(f, "duplicate metadata key {k:?}"),
            DuplicateTensor(n) => write!(f, "duplicate tensor name {n:?}"),
            WrongMetadataType { key, expected } => {
                write!(f, "metadata key {key:?} should be {expected}")
            }
            BadAlignment(a) => write!(f, "alignment {a} is not a non-zero power of two"),
            TooManyDims { name, n_dims } => {
                write!(f, "tensor {name:?} has {n_dims} dimensions (max 4)")
            }
            ShapeOverflow { name } => write!(f, "tensor {name:?}: size overflows"),
            BadTensorShape { name, ne0, block } => {
                write!(f, "tensor {name:?}: ne0 = {ne0} is not a multiple of block size {block}")
            }
            MisalignedTensor { name, offset, alignment } => {
                write!(f, "tensor {name:?}: offset {offset} is not a multiple of {alignment}")
            }
            TensorOutOfRange { name, start, len, available } => {
                write!(f, "tensor {name:?}: bytes {start}..{} run past the end of the data ({available} bytes): truncated or corrupt", start.saturating_add(*len))
            }
            UnknownTensorType { name, id } => {
                write!(f, "tensor {name:?}: ggml type {id} has no known size")
            }
            UnsupportedType { ggml_type, tensor: Some(t) } => write!(f, "tensor {t:?}: ggml type {ggml_type:?} is not a supported weight format"),
            UnsupportedType { ggml_type, tensor: None } => write!(f, "ggml type {ggml_type:?} is not a supported weight format"),
            NonFiniteScale { block } => write!(f, "block {block} has a NaN or infinite scale"),
            WrongLength { what, len, expected } => write!(f, "{what}: {len} bytes, expected {expected}"),
            MetadataTooLarge { bytes, left } => write!(f, "metadata needs {bytes} more bytes of memory, {left} left of the budget (file size + slack)"),
            Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for FormatError {
    fn from(e: std::io::Error) -> Self {
        FormatError::Io(e)
    }
}
