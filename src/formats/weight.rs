//! The weight-format descriptor and the format-generic CPU helpers (see the module docs of
//! [`crate::formats`] for the GPU layout and the WGSL part contract).

use super::gguf::{GgmlType, GgufFile, TensorInfo};
use super::{FormatError, FORMATS};

/// One weight format: everything the matmul family needs to upload, multiply, dequantise,
/// validate and test matrices of it. Formats are `pub const FORMAT: WeightFormat` values listed
/// in [`FORMATS`].
#[derive(Debug)]
pub struct WeightFormat {
    /// Lower-case name: the WGSL part is `wgsl/fmt_<name>.wgsl`; kernel names end in it. Unique
    /// in [`FORMATS`]: it is the format's identity (pipeline keys compare formats by name).
    pub name: &'static str,
    /// The GGUF (ggml) type whose tensors are stored in this format, or `None` for a format of
    /// this library with no GGUF type ([`format_of`] and GGUF loading never pick it; upload it
    /// with `WeightMatrix::upload_format`).
    pub ggml_type: Option<GgmlType>,
    /// Weights per block (1 for the float formats).
    pub block_weights: usize,
    /// Bytes per block as stored (in GGUF, for the formats with a ggml type).
    pub block_bytes: usize,
    /// Weights of one row per GEMV item (a multiple of 4; see the module docs).
    pub item_weights: usize,
    /// u32 words of one GPU row of `k` weights (a multiple of 4). `k` is a multiple of
    /// `block_weights` (any `k >= 1` for the float formats, whose rows are zero-padded).
    pub gpu_row_words: fn(k: usize) -> usize,
    /// Re-lays one row: `src` = the row's block bytes (`k / block_weights` blocks, as in GGUF
    /// for the GGUF formats), `dst` = `gpu_row_words(k)` words, zero on entry.
    pub relayout_row: fn(src: &[u8], dst: &mut [u32]),
    /// Dequantises whole blocks (`out.len() == src.len() / block_bytes * block_weights`),
    /// bit-exactly as gguf-py's `gguf.quants.dequantize`.
    pub dequantize: fn(src: &[u8], out: &mut [f32]),
    /// Per weight, a bound on the magnitude of the f32 operands the kernels combine into it
    /// (e.g. `|d*sc*q| + |dmin*m|`): GEMV/GEMM errors are normalised by `sum |x| * magnitude`.
    pub magnitudes: fn(src: &[u8], out: &mut [f64]),
    /// The first block (index within `src`) whose scales are NaN or infinite; `None` when every
    /// block is valid. Float formats have no scales (non-finite weights are data): always `None`.
    pub first_invalid_block: fn(src: &[u8]) -> Option<usize>,
    /// `count` random valid blocks (finite scales, any codes), for tests (public with the
    /// `testkit` feature; the Native self-check uses it in every build).
    #[cfg(feature = "testkit")]
    pub random_blocks: fn(rng: &mut fastrand::Rng, count: usize) -> Vec<u8>,
    #[cfg(not(feature = "testkit"))]
    pub(crate) random_blocks: fn(rng: &mut fastrand::Rng, count: usize) -> Vec<u8>,
    /// The WGSL part (`include_str!("../../wgsl/fmt_<name>.wgsl")`).
    pub wgsl: &'static str,
    /// The format's hand-written MSL GEMV, if it has one: the Native variant of `mm_gemv_<name>`.
    pub native: Option<NativeGemv>,
    /// The format's hand-written MSL GEMV on int8 activations in quad order (its integer dot), if
    /// it has one: the Native variant of `mm_gemv_q8_<name>`.
    pub native_q8: Option<NativeGemv>,
    /// The format's hand-written MSL GEMM, if it has one: the Native variant of `mm_gemm_<name>`.
    pub native_gemm: Option<NativeGemm>,
}

/// A format's hand-written MSL GEMV, the Native variant of the matmul family's `mm_gemv_<name>`
/// (f32 activations, the descriptor's `native`) or `mm_gemv_q8_<name>` (int8 activations in quad
/// order through the format's integer dot, `native_q8`); see [`crate::kernels::matmul`].
///
/// Its **twin** is implied: the family's Subgroup GEMV of the same format and activations
/// (team_subgroup.wgsl + mm_common.wgsl + mm_gemv.wgsl, the format part, mm_items.wgsl,
/// mm_gemv_acc.wgsl, glu.wgsl and mm_rows.wgsl; on int8 activations mm_gemv_qk.wgsl in place of
/// mm_gemv.wgsl and mm_items.wgsl) with the plan `WG = 128, ROWS = rows, UNROLL = 1, TEAM_SG = 0`
/// (a team is the threadgroup), as [`crate::kernels::matmul::native_plan`] builds it, and the
/// entry's epilogue as `EPI`. Each entry point takes the family's `Params` at `buffer(0)`,
/// `device const uint4* wq [[buffer(1)]]`, the activations at `buffer(2)` (`device const float4*
/// x`, or `device const uint4* xk` on int8 activations) and `device float* y [[buffer(3)]]`, and
/// its program records its twin's fingerprint (`twin fnv1a64 ...`; tests/msl_bindings.rs). Nothing
/// else needs an edit: the kernel info, pipelines, plan, fallback, self-check and every MSL test
/// come from this descriptor.
#[derive(Debug)]
pub struct NativeGemv {
    /// The MSL program: a file (`include_str!("../../msl/<file>.metal")`), or the f32-activation
    /// GEMVs' program assembled from the shared driver and the format's decode part
    /// (`native_gemv!` in [`crate::formats`]).
    pub msl: &'static str,
    /// Entry points `(rows, epilogue, entry)`: rows per threadgroup in 1..=4, ascending, and the
    /// epilogue the entry point applies, the family's `Epilogue` as a number (0: store, 1:
    /// accumulate (the residual add), 2: SwiGLU and 3: GeGLU of (gate, up) row pairs, even rows
    /// only). The formats of this crate write the usual table (2 and 4 rows, each epilogue, named
    /// `<prefix>_r<rows>`, `..._acc`, `..._swiglu`, `..._geglu`) with the module's
    /// `native_gemv_entries!`.
    pub entries: &'static [(u32, u32, &'static str)],
}

/// A format's hand-written MSL GEMM (f32 activations, m > 1), the Native variant of the matmul
/// family's `mm_gemm_<name>` (see [`crate::kernels::matmul`]): simdgroup 8x8 matrices with f16
/// inputs and f32 sums, the numerics of the Matrix GEMM.
///
/// Its **twin** is implied: the family's Portable GEMM of the same format (mm_common.wgsl + the
/// format part + mm_gemm.wgsl + splitk_tile.wgsl), whose plan it shares (128 threads, one
/// 32 x 64 output tile per threadgroup, K in 32-column slices, the same split-K partials). The
/// entry point takes the family's `Params` at `buffer(0)`, `device const uint4* wq [[buffer(1)]]`,
/// `device const float4* x [[buffer(2)]]` and `device float* y [[buffer(3)]]`, and records its
/// twin's fingerprint (`twin fnv1a64 ...`; tests/msl_bindings.rs). The kernel info, pipelines,
/// plan, fallback, self-check and every MSL test come from this descriptor.
#[derive(Debug)]
pub struct NativeGemm {
    /// The MSL file (`include_str!("../../msl/<file>.metal")`).
    pub msl: &'static str,
    /// The entry point of this format.
    pub entry: &'static str,
}

impl WeightFormat {
    /// Block bytes of `weights` weights (a multiple of the block), checked.
    pub fn bytes_for(&self, weights: usize) -> Option<usize> {
        (weights % self.block_weights == 0).then(|| (weights / self.block_weights).checked_mul(self.block_bytes)).flatten()
    }

    /// Validates `bytes` as whole blocks: length and finite scales.
    pub fn validate(&self, bytes: &[u8]) -> Result<(), FormatError> {
        if bytes.len() % self.block_bytes != 0 {
            return Err(FormatError::NotBlockMultiple { what: "weight data bytes", len: bytes.len() as u64, block: self.block_bytes as u64 });
        }
        match (self.first_invalid_block)(bytes) {
            Some(block) => Err(FormatError::NonFiniteScale { block }),
            None => Ok(()),
        }
    }
}

/// The format of a ggml type, or `UnsupportedType` (never a format without a ggml type).
pub fn format_of(ggml_type: GgmlType) -> Result<&'static WeightFormat, FormatError> {
    FORMATS.iter().copied().find(|f| f.ggml_type == Some(ggml_type)).ok_or(FormatError::UnsupportedType { ggml_type, tensor: None })
}

/// The format named `name` (see [`WeightFormat::name`]), if registered.
pub fn format_named(name: &str) -> Option<&'static WeightFormat> {
    FORMATS.iter().copied().find(|f| f.name == name)
}

/// Dequantises `bytes` (whole blocks of `ggml_type`) into `out` (`out.len()` = the weights the
/// bytes hold), bit-exactly as gguf-py's `gguf.quants.dequantize`.
pub fn dequantize(ggml_type: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), FormatError> {
    dequantize_format(format_of(ggml_type)?, bytes, out)
}

/// [`dequantize`] for a format given by its descriptor (any format, with or without a ggml
/// type): length checks, then [`WeightFormat::dequantize`].
pub fn dequantize_format(f: &WeightFormat, bytes: &[u8], out: &mut [f32]) -> Result<(), FormatError> {
    if bytes.len() % f.block_bytes != 0 {
        return Err(FormatError::NotBlockMultiple { what: "weight data bytes", len: bytes.len() as u64, block: f.block_bytes as u64 });
    }
    let weights = (bytes.len() / f.block_bytes) as u64 * f.block_weights as u64;
    if out.len() as u64 != weights {
        return Err(FormatError::WrongLength { what: "dequantize output (f32 values)", len: out.len() as u64, expected: weights });
    }
    (f.dequantize)(bytes, out);
    Ok(())
}

/// (n, k) of a GGUF tensor seen as a matrix: k = ne0, n = the product of the other dims.
/// Errors name the tensor.
pub fn matrix_dims(info: &TensorInfo) -> Result<(usize, usize), FormatError> {
    let k = info.dims.first().copied().unwrap_or(1);
    let n = info.dims.iter().skip(1).try_fold(1u64, |a, &d| a.checked_mul(d));
    let big = || FormatError::ShapeOverflow { name: info.name.clone() };
    let n = n.ok_or_else(big)?;
    Ok((usize::try_from(n).map_err(|_| big())?, usize::try_from(k).map_err(|_| big())?))
}

/// Dequantises rows `rows` of the matrix tensor `info` of `file` (row = `ne0` values) into
/// `out` (`rows.len() * ne0` values, row after row), reading only those rows' bytes: for
/// embedding lookups without uploading the table. Errors name the tensor.
pub fn dequantize_rows(file: &GgufFile, info: &TensorInfo, rows: &[usize], out: &mut [f32]) -> Result<(), FormatError> {
    let f = format_of(info.ggml_type).map_err(|_| FormatError::UnsupportedType { ggml_type: info.ggml_type, tensor: Some(info.name.clone()) })?;
    let (n, k) = matrix_dims(info)?;
    let row_bytes = f.bytes_for(k).ok_or_else(|| FormatError::BadTensorShape { name: info.name.clone(), ne0: k as u64, block: f.block_weights as u64 })?;
    let want = rows.len().checked_mul(k).ok_or_else(|| FormatError::ShapeOverflow { name: info.name.clone() })?;
    if out.len() != want {
        return Err(FormatError::WrongLength { what: "dequantize_rows output (f32 values)", len: out.len() as u64, expected: want as u64 });
    }
    let data = file.tensor_data(info)?;
    let total = n.checked_mul(row_bytes).ok_or_else(|| FormatError::ShapeOverflow { name: info.name.clone() })?;
    if data.len() != total {
        return Err(FormatError::WrongLength { what: "tensor data", len: data.len() as u64, expected: total as u64 });
    }
    for (i, &r) in rows.iter().enumerate() {
        if r >= n {
            return Err(FormatError::TensorOutOfRange { name: info.name.clone(), start: r as u64, len: 1, available: n as u64 });
        }
        let src = &data[r * row_bytes..(r + 1) * row_bytes];
        if let Some(b) = (f.first_invalid_block)(src) {
            return Err(FormatError::NonFiniteScale { block: r * (k / f.block_weights) + b });
        }
        (f.dequantize)(src, &mut out[i * k..(i + 1) * k]);
    }
    Ok(())
}

crate::testkit_pub! {
    /// A random finite f16 (bits): mostly a realistic positive scale, sometimes any finite value
    /// (negative, subnormal, zero, large). For the formats' random block generators.
    pub fn random_f16_scale(rng: &mut fastrand::Rng) -> u16 {
        if rng.u32(0..8) != 0 {
            return half::f16::from_f32(1e-4 + rng.f32() * 5e-2).to_bits();
        }
        let b = rng.u16(..);
        if b & 0x7c00 == 0x7c00 {
            b & 0x83ff // inf/NaN -> same mantissa, exponent 0 (a subnormal)
        } else {
            b
        }
    }
}

/// Little-endian u16 at byte `i`.
#[inline]
pub(crate) fn le16(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

/// Little-endian u32 at byte `i`.
#[inline]
pub(crate) fn le32(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Little-endian f16 at byte `at`, as f32 (the block scales of the quantised formats).
#[inline]
pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(le16(b, at)).to_f32()
}

/// The first block of `src` (blocks of `block_bytes`) with a NaN or infinite f16 at any of the
/// byte offsets `scales` (its scales): a format's [`WeightFormat::first_invalid_block`].
pub(crate) fn first_nonfinite_f16(src: &[u8], block_bytes: usize, scales: &[usize]) -> Option<usize> {
    src.chunks_exact(block_bytes).position(|b| !scales.iter().all(|&at| f16_at(b, at).is_finite()))
}

/// Packs bytes (length a multiple of 4) into little-endian words.
pub(crate) fn pack_words(src: &[u8], dst: &mut [u32]) {
    for (d, c) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

/// Packs bytes of any length into little-endian words (the last word zero-padded).
pub(crate) fn pack_bytes(src: &[u8], dst: &mut [u32]) {
    for (d, c) in dst.iter_mut().zip(src.chunks(4)) {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        *d = u32::from_le_bytes(w);
    }
}

/// Runs a format's per-block dequantiser over whole blocks (`out.len()` = blocks * `W`).
pub(crate) fn dequantize_blocks<const B: usize, const W: usize>(src: &[u8], out: &mut [f32], block: fn(&[u8; B], &mut [f32; W])) {
    for (b, o) in src.chunks_exact(B).zip(out.chunks_exact_mut(W)) {
        block(b.try_into().expect("whole block"), o.try_into().expect("whole block"));
    }
}

/// Runs a format's per-block magnitudes (f32) over whole blocks, into f64.
pub(crate) fn magnitudes_blocks<const B: usize, const W: usize>(src: &[u8], out: &mut [f64], block: fn(&[u8; B], &mut [f32; W])) {
    let mut m = [0f32; W];
    for (b, o) in src.chunks_exact(B).zip(out.chunks_exact_mut(W)) {
        block(b.try_into().expect("whole block"), &mut m);
        for (o, m) in o.iter_mut().zip(&m) {
            *o = f64::from(*m);
        }
    }
}

/// The validation and length checks every quantised format with f16 scales must pass: those of
/// [`check_invalid_scales`], with an infinite and a NaN f16 at each of `scale_offsets` (bytes
/// within a block).
#[cfg(test)]
pub(crate) fn check_validation_and_lengths(f: &WeightFormat, scale_offsets: &[usize]) {
    let bad: Vec<(usize, [u8; 2])> = scale_offsets.iter().flat_map(|&at| [0x7c00u16, 0xfe00].map(|bits| (at, bits.to_le_bytes()))).collect();
    check_invalid_scales(f, &bad);
}

/// Random blocks validate and dequantise; a wrong output length and a partial block are errors;
/// each `(offset, bytes)` of `bad` (an invalid scale written at that byte of a block) in the
/// second block is reported as that block.
#[cfg(test)]
pub(crate) fn check_invalid_scales<const N: usize>(f: &WeightFormat, bad: &[(usize, [u8; N])]) {
    let mut rng = fastrand::Rng::with_seed(1);
    let bytes = (f.random_blocks)(&mut rng, 3);
    let mut out = vec![0f32; 3 * f.block_weights];
    f.validate(&bytes).unwrap();
    dequantize_format(f, &bytes, &mut out).unwrap();
    assert!(matches!(dequantize_format(f, &bytes, &mut out[1..]), Err(FormatError::WrongLength { .. })), "{}", f.name);
    assert!(matches!(f.validate(&bytes[1..]), Err(FormatError::NotBlockMultiple { .. })), "{}", f.name);
    assert!(!bad.is_empty());
    for (at, value) in bad {
        let mut m = bytes.clone();
        m[f.block_bytes + at..f.block_bytes + at + N].copy_from_slice(value);
        assert!(matches!(f.validate(&m), Err(FormatError::NonFiniteScale { block: 1 })), "{} {at} {value:?}", f.name);
    }
    f.validate(&[]).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique (they are the formats' identity), so are the ggml types of the formats
    /// that have one, and `format_of` finds exactly those.
    #[test]
    fn identities_are_unique() {
        for (i, f) in FORMATS.iter().enumerate() {
            assert!(FORMATS[..i].iter().all(|g| g.name != f.name), "{}", f.name);
            assert_eq!(format_named(f.name).map(|g| g.name), Some(f.name));
            if let Some(t) = f.ggml_type {
                assert!(FORMATS[..i].iter().all(|g| g.ggml_type != Some(t)), "{}", f.name);
                assert_eq!(format_of(t).map(|g| g.name).ok(), Some(f.name));
            }
        }
        assert!(format_named("nope").is_none());
    }

    /// Every format's magnitudes bound its dequantised values (up to the f32 rounding of the
    /// dequantiser, relative 1e-6), on random valid blocks.
    #[test]
    fn magnitudes_bound_values() {
        let mut rng = fastrand::Rng::with_seed(2);
        for f in FORMATS {
            let bytes = (f.random_blocks)(&mut rng, 64);
            let weights = bytes.len() / f.block_bytes * f.block_weights;
            let (mut w, mut m) = (vec![0f32; weights], vec![0f64; weights]);
            (f.dequantize)(&bytes, &mut w);
            (f.magnitudes)(&bytes, &mut m);
            assert!(w.iter().zip(&m).all(|(w, m)| w.is_finite() && f64::from(w.abs()) <= *m * (1.0 + 1e-6)), "{}", f.name);
        }
    }
}
