//! INT4 group quantisation on the GPU (f32/f16 -> INT4) and the plain host layout of INT4
//! weights. Semantics: `w = (q - zero[r, g]) * scale[r, g]`, `g = c / group_size`; signed codes
//! are two's-complement nibbles (-8..7), asymmetric codes unsigned (0..15). The matrix products
//! run on the weight-matrix family: [`HostInt4::to_int4_blocks`] converts signed, zero-less
//! weights with groups of a multiple of 32 into the `int4` format
//! ([`crate::formats::int4`], uploaded as a [`crate::kernels::matmul::WeightMatrix`]).
//!
//! GPU layout (owned by the library): codes row-major, 8 per u32 (even column in the low
//! nibble, as in the plain byte layout), each row padded to a multiple of 16 bytes so kernels load
//! `vec4<u32>`s, words of a row in the [`crate::kernels::interleave`] order; scales (and zeros)
//! f32 `[n, ceil(k / group_size)]`.
//! Sources: wgsl/int4_quant.wgsl (+ int4_quant_subgroup.wgsl), msl/int4_quantize.metal.
//!
//! ```
//! use wgkernels::{kernels::int4, Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (n, k) = (256, 512);
//! let w = int4::Int4Matrix::alloc(&ctx, n, k, 32, int4::Int4Mode::Signed)?;
//! let src = ctx.upload(&vec![0.5f32; n * k])?;
//! let mut b = ctx.batch();
//! int4::quantize(&mut b, &src, &w)?; // f32 -> INT4 groups of 32, on the GPU
//! b.run()?;
//! assert_eq!(w.download(&ctx)?.scales.len(), n * k / 32);
//! # Ok(()) }
//! ```

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::kernels::interleave;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::Pod;

/// Variants are listed least preferred first: the Subgroup quantiser measured 0.69x the Portable
/// one on an H200 (and slower on lavapipe), so Auto picks Portable unless Native is available.
pub const QUANTIZE: KernelInfo = KernelInfo::new("int4_quantize", &[Variant::Subgroup, Variant::Portable, Variant::Native], None).checked(|_| quantize_checks());

const QUANT_WGSL: &str = include_str!("../../../wgsl/int4_quant.wgsl");
const QUANT_SG_WGSL: &str = include_str!("../../../wgsl/int4_quant_subgroup.wgsl");
const QUANT_MSL: &str = include_str!("../../../msl/int4_quantize.metal");

/// How codes are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Int4Mode {
    /// Two's-complement nibble, q in -8..=7.
    Signed,
    /// Unsigned nibble, q in 0..=15, with a zero point.
    Asymmetric,
}

/// INT4 weights in the plain host layout: codes row-major, `ceil(k / 2)` bytes per row, even
/// column in the low nibble; scales/zeros `[n, ceil(k / group_size)]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInt4 {
    pub n: usize,
    pub k: usize,
    pub group_size: usize,
    pub mode: Int4Mode,
    pub codes: Vec<u8>,
    pub scales: Vec<f32>,
    pub zeros: Option<Vec<f32>>,
}

impl HostInt4 {
    pub fn num_groups(&self) -> usize {
        self.k.div_ceil(self.group_size.max(1))
    }

    pub fn row_bytes(&self) -> usize {
        self.k.div_ceil(2)
    }

    pub fn validate(&self) -> Result<()> {
        check_shape(self.n, self.k, self.group_size)?;
        let ng = self.num_groups();
        ensure(self.codes.len() == self.n * self.row_bytes(), || {
            Error::Argument(format!("codes: {} bytes, expected n * ceil(k/2) = {}", self.codes.len(), self.n * self.row_bytes()))
        })?;
        ensure(self.scales.len() == self.n * ng, || Error::Argument(format!("scales: {} values, expected n * groups = {}", self.scales.len(), self.n * ng)))?;
        if let Some(z) = &self.zeros {
            ensure(z.len() == self.n * ng, || Error::Argument(format!("zeros: {} values, expected n * groups = {}", z.len(), self.n * ng)))?;
        }
        Ok(())
    }

    /// The code at (r, c) as stored (0..15).
    pub fn code(&self, r: usize, c: usize) -> u8 {
        (self.codes[r * self.row_bytes() + c / 2] >> (4 * (c % 2))) & 15
    }

    /// The integer value q at (r, c) after applying the mode.
    pub fn q(&self, r: usize, c: usize) -> i32 {
        let code = self.code(r, c) as i32;
        match self.mode {
            Int4Mode::Signed if code >= 8 => code - 16,
            _ => code,
        }
    }

    /// Operand magnitude of the weight at (r, c) as the kernels compute it in f32,
    /// `(|q| + |zero| + 8) * scale` (the 8 is the signed-code offset): the error scale.
    pub fn magnitude(&self, r: usize, c: usize) -> f64 {
        let gi = r * self.num_groups() + c / self.group_size;
        let z = self.zeros.as_ref().map_or(0.0, |z| z[gi].abs() as f64);
        (self.q(r, c).abs() as f64 + z + 8.0) * self.scales[gi].abs() as f64
    }

    /// The weight at (r, c) per the spec, in f64.
    pub fn value(&self, r: usize, c: usize) -> f64 {
        let gi = r * self.num_groups() + c / self.group_size;
        let z = self.zeros.as_ref().map_or(0.0, |z| z[gi] as f64);
        (self.q(r, c) as f64 - z) * self.scales[gi] as f64
    }

    /// The matrix in the `int4` weight format ([`crate::formats::int4`]; upload with
    /// [`crate::kernels::matmul::WeightMatrix::upload_format`]): blocks of 32 weights, row
    /// after row, each the group's f32 scale and the row's 16 code bytes of the block,
    /// unchanged. Lossless: every dequantised weight equals [`HostInt4::value`] rounded to f32.
    ///
    /// Needs [`Int4Mode::Signed`], no zero points (or only zeros of 0), `k` and `group_size`
    /// multiples of 32, and scales that are finite and normal or zero; anything else is an
    /// error (the format cannot hold it).
    pub fn to_int4_blocks(&self) -> Result<Vec<u8>> {
        use crate::formats::int4;
        self.validate()?;
        ensure(self.mode == Int4Mode::Signed, || Error::Argument("int4 blocks hold signed codes only (mode is Asymmetric)".into()))?;
        ensure(self.zeros.as_ref().is_none_or(|z| z.iter().all(|&z| z == 0.0)), || Error::Argument("int4 blocks have no zero points (zeros are not all 0)".into()))?;
        ensure(self.k % int4::BLOCK_WEIGHTS == 0 && self.group_size % int4::BLOCK_WEIGHTS == 0, || {
            Error::Shape(format!("int4 blocks: k = {} and group_size = {} must be multiples of 32", self.k, self.group_size))
        })?;
        if let Some(i) = self.scales.iter().position(|&d| !int4::valid_scale(d)) {
            return Err(Error::InvalidData(format!("int4 blocks: scale {i} = {:e} is not finite and normal or zero", self.scales[i])));
        }
        let nb = self.k / int4::BLOCK_WEIGHTS;
        let total =
            self.n.checked_mul(nb).and_then(|b| b.checked_mul(int4::BLOCK_BYTES)).ok_or_else(|| Error::Shape(format!("n = {}, k = {}: int4 blocks overflow", self.n, self.k)))?;
        let (rb, ng) = (self.row_bytes(), self.num_groups());
        let mut out = Vec::with_capacity(total);
        for r in 0..self.n {
            for b in 0..nb {
                let codes: &[u8; 16] = self.codes[r * rb + 16 * b..r * rb + 16 * b + 16].try_into().map_err(|_| Error::Argument("codes: short row".into()))?;
                out.extend_from_slice(&int4::block(self.scales[r * ng + 32 * b / self.group_size], codes));
            }
        }
        Ok(out)
    }
}

pub(crate) fn check_shape(n: usize, k: usize, group_size: usize) -> Result<()> {
    ensure(n > 0 && k > 0, || Error::Shape(format!("n = {n}, k = {k}: both must be > 0")))?;
    ensure(group_size > 0, || Error::Argument("group_size = 0".into()))?;
    ensure(n <= u32::MAX as usize / 8 && k <= u32::MAX as usize / 8, || Error::Shape(format!("n = {n}, k = {k} too large")))?;
    ensure(n.checked_mul(k).is_some_and(|v| v < u32::MAX as usize), || Error::Shape(format!("n * k = {n} * {k} exceeds 2^32")))
}

/// INT4 weights on the GPU.
pub struct Int4Matrix {
    n: usize,
    k: usize,
    group_size: usize,
    mode: Int4Mode,
    codes: GpuBuffer<u32>,
    scales: GpuBuffer<f32>,
    zeros: Option<GpuBuffer<f32>>,
}

impl Int4Matrix {
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn group_size(&self) -> usize {
        self.group_size
    }
    pub fn mode(&self) -> Int4Mode {
        self.mode
    }
    pub fn num_groups(&self) -> usize {
        self.k.div_ceil(self.group_size)
    }
    /// Row stride in u32 words (multiple of 4).
    pub fn row_words(&self) -> usize {
        self.k.div_ceil(32) * 4
    }
    /// Bytes a full pass over the weights reads (codes incl. padding, scales, zeros).
    pub fn bytes(&self) -> u64 {
        let sz = (self.n * self.num_groups() * 4) as u64;
        (self.n * self.row_words() * 4) as u64 + sz + if self.zeros.is_some() { sz } else { 0 }
    }
    pub fn codes(&self) -> &GpuBuffer<u32> {
        &self.codes
    }

    /// Upload weights from the plain host layout (validated first).
    pub fn upload(ctx: &Context, h: &HostInt4) -> Result<Int4Matrix> {
        h.validate()?;
        let rw = h.k.div_ceil(32) * 4;
        let rb = h.row_bytes();
        let mut words = vec![0u32; h.n * rw];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for r in 0..h.n {
            bytes[r * rw * 4..r * rw * 4 + rb].copy_from_slice(&h.codes[r * rb..(r + 1) * rb]);
            if h.k % 2 == 1 {
                bytes[r * rw * 4 + rb - 1] &= 0x0f; // the unused high nibble of an odd row
            }
        }
        let words = interleave::interleave(&words, rw);
        Ok(Int4Matrix {
            n: h.n,
            k: h.k,
            group_size: h.group_size,
            mode: h.mode,
            codes: ctx.upload(&words)?,
            scales: ctx.upload(&h.scales)?,
            zeros: h.zeros.as_ref().map(|z| ctx.upload(z)).transpose()?,
        })
    }

    /// Uninitialised storage to quantise into (zeros allocated for [`Int4Mode::Asymmetric`]).
    pub fn alloc(ctx: &Context, n: usize, k: usize, group_size: usize, mode: Int4Mode) -> Result<Int4Matrix> {
        check_shape(n, k, group_size)?;
        let ng = k.div_ceil(group_size);
        Ok(Int4Matrix {
            n,
            k,
            group_size,
            mode,
            codes: ctx.alloc(n * k.div_ceil(32) * 4)?,
            scales: ctx.alloc(n * ng)?,
            zeros: (mode == Int4Mode::Asymmetric).then(|| ctx.alloc(n * ng)).transpose()?,
        })
    }

    /// After a [`quantize`] ran: [`crate::formats::FormatError::NonFiniteScale`] (the first
    /// group, counted row-major) when a source group held a NaN or an infinity. Reads the
    /// scales back (4 bytes per group).
    pub fn check_finite(&self, ctx: &Context) -> Result<()> {
        match ctx.read(&self.scales)?.iter().position(|s| !s.is_finite()) {
            Some(block) => Err(crate::formats::FormatError::NonFiniteScale { block }.into()),
            None => Ok(()),
        }
    }

    /// Read back into the plain host layout.
    pub fn download(&self, ctx: &Context) -> Result<HostInt4> {
        let raw = ctx.read(&self.codes)?;
        let words = interleave::deinterleave(&raw[..self.n * self.row_words()], self.row_words());
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let (rw, rb) = (self.row_words() * 4, self.k.div_ceil(2));
        let mut codes = Vec::with_capacity(self.n * rb);
        for r in 0..self.n {
            codes.extend_from_slice(&bytes[r * rw..r * rw + rb]);
        }
        Ok(HostInt4 {
            n: self.n,
            k: self.k,
            group_size: self.group_size,
            mode: self.mode,
            codes,
            scales: ctx.read(&self.scales)?,
            zeros: self.zeros.as_ref().map(|z| ctx.read(z)).transpose()?,
        })
    }

    fn zeros_raw<'a>(&'a self, ctx: &'a Context) -> crate::buffer::BufRef<'a> {
        self.zeros.as_ref().map_or_else(|| ctx.dummy(), |z| z.raw())
    }
}

params_struct! {
    struct QuantParams {
        n: u32,
        k: u32,
        group_size: u32,
        num_groups: u32,
        row_words: u32,
        asym: u32,
        _p0: u32,
        _p1: u32,
    }
}

const QUANT_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("src", "u32"), StorageBinding::write("codes", "u32"), StorageBinding::write("scales", "f32"), StorageBinding::write("zeros", "f32")];
/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Int4Pipeline {
    /// Portable: one thread per group; Subgroup/Native: one workgroup per group.
    Scales {
        f16: bool,
        variant: Variant,
    },
    Codes {
        f16: bool,
        variant: Variant,
    },
}

impl PipelineKey for Int4Pipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let size = |n: usize| n as u64;
        match *self {
            Int4Pipeline::Scales { f16, variant: Variant::Native } => {
                let twin = Int4Pipeline::Scales { f16, variant: Variant::Subgroup }.describe(_caps);
                PipelineDesc::native(QUANT_MSL, if f16 { "int4_quant_scales_f16" } else { "int4_quant_scales_f32" }, twin)
            }
            Int4Pipeline::Codes { f16, variant: Variant::Native } => {
                let twin = Int4Pipeline::Codes { f16, variant: Variant::Subgroup }.describe(_caps);
                PipelineDesc::native(QUANT_MSL, if f16 { "int4_quant_codes_f16" } else { "int4_quant_codes_f32" }, twin)
            }
            Int4Pipeline::Scales { f16, variant: Variant::Subgroup } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![interleave::WGSL, QUANT_WGSL, QUANT_SG_WGSL]),
                entry: "scales_subgroup",
                constants: vec![("SRC_F16", if f16 { 1.0 } else { 0.0 })],
                workgroup_size: [crate::native::NATIVE_TG, 1, 1],
                params_size: size(std::mem::size_of::<QuantParams>()),
                bindings: QUANT_BINDINGS,
            },
            Int4Pipeline::Scales { f16, .. } | Int4Pipeline::Codes { f16, .. } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![interleave::WGSL, QUANT_WGSL]),
                entry: if matches!(self, Int4Pipeline::Scales { .. }) { "scales_main" } else { "codes_main" },
                constants: vec![("SRC_F16", if f16 { 1.0 } else { 0.0 })],
                workgroup_size: [64, 1, 1],
                params_size: size(std::mem::size_of::<QuantParams>()),
                bindings: QUANT_BINDINGS,
            },
        }
    }
}

/// Source element types the quantiser accepts.
pub trait QuantSource: Pod {
    const F16: bool;
}
impl QuantSource for f32 {
    const F16: bool = false;
}
impl QuantSource for half::f16 {
    const F16: bool = true;
}

/// Quantise a row-major [n, k] f32 or f16 matrix into `dst` (shape, group size and mode are
/// taken from `dst`). Two dispatches: per-group scales/zeros, then codes.
///
/// A group holding a NaN or an infinity gets the scale NaN (the Portable and Subgroup variants),
/// so its values dequantise to NaN and every GEMV output reading it is NaN; the CPU quantiser
/// rejects such input instead. [`Int4Matrix::check_finite`] turns that into a typed error
/// on the host after the batch ran.
pub fn quantize<T: QuantSource>(b: &mut Batch, src: &GpuBuffer<T>, dst: &Int4Matrix) -> Result<()> {
    let ctx = b.context();
    src.require("src", dst.n * dst.k)?;
    let params = QuantParams {
        n: dst.n as u32,
        k: dst.k as u32,
        group_size: dst.group_size as u32,
        num_groups: dst.num_groups() as u32,
        row_words: dst.row_words() as u32,
        asym: (dst.mode == Int4Mode::Asymmetric) as u32,
        _p0: 0,
        _p1: 0,
    };
    let bufs = [src.raw(), dst.codes.raw(), dst.scales.raw(), dst.zeros_raw(ctx)];
    let groups = (dst.n * dst.num_groups()) as u64;
    let g2 = ctx.grid((dst.n * dst.row_words()).div_ceil(64) as u64)?;
    ctx.with_native_fallback(&QUANTIZE, |variant| {
        // Portable: one thread per group; Subgroup/Native: one workgroup per group.
        let g1 = ctx.grid(if variant == Variant::Portable { groups.div_ceil(64) } else { groups })?;
        b.dispatch(&Int4Pipeline::Scales { f16: T::F16, variant }, &params, &bufs, g1)?;
        b.dispatch(&Int4Pipeline::Codes { f16: T::F16, variant }, &params, &bufs, g2)
    })
}

#[cfg(feature = "testkit")]
mod cases;
mod check;
#[cfg(feature = "testkit")]
pub use cases::{kernels, random_host};
pub(crate) use check::quantize_checks;

/// The quantiser's params and its WGSL pipelines (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twin() -> crate::kernels::ParamsTwin {
    let keys = [false, true]
        .into_iter()
        .flat_map(|f16| [Variant::Portable, Variant::Subgroup].into_iter().flat_map(move |variant| [Int4Pipeline::Scales { f16, variant }, Int4Pipeline::Codes { f16, variant }]));
    crate::kernels::ParamsTwin { rust: "int4::QuantParams", size: std::mem::size_of::<QuantParams>(), fields: QuantParams::FIELDS, pipelines: crate::suite::describe_all(keys) }
}
