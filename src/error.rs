//! One error type for the whole crate. Every public function returns [`Result`].
//!
//! # What is checked on the host
//!
//! Shaders run without runtime bounds checks by default ([`crate::ContextOptions::bounds_checks`]),
//! so the host-side checks are the guard: every size, offset and position a kernel receives is
//! combined with checked arithmetic ([`dims`]) and compared against the buffers it will touch
//! before anything is recorded. A wrapped or oversized value is an [`Error::Shape`] (or another
//! typed error), in release builds as in debug builds. [`crate::Batch::dispatch`] further rejects,
//! for every kernel, a buffer made by another context ([`Error::ForeignBuffer`]) and a writable
//! binding that is also bound elsewhere in the same dispatch ([`Error::Aliased`]).
//!
//! # Non-finite values
//!
//! One policy for every kernel and variant:
//! * **parameters** — softmax `scale` (attention, TurboQuant), RoPE base and scaling factors,
//!   rmsnorm `eps`, and the scale fields of quantised blocks when they are uploaded — must be
//!   finite (and in their documented range); anything else is [`Error::Argument`] (or a
//!   [`crate::formats::FormatError`]) before a dispatch is recorded;
//! * **data** — activations, K/V, f32/f16 weights — are not inspected: NaN and infinities
//!   propagate as IEEE arithmetic makes them, as they do in the CPU reference (`crate::reference`).
//!   Where data is quantised on the GPU — int8 activations ([`crate::kernels::q8`]) and INT4
//!   weights ([`crate::kernels::int4::quantize`]) — a block or group holding a NaN or an infinity
//!   gets the scale NaN, so everything computed from it is NaN (an infinity gives NaN there, not
//!   ±inf); [`crate::kernels::int4::Int4Matrix::check_finite`] reports such a group as a typed
//!   error, as the CPU quantisers do for their input.

use crate::caps::Variant;
use crate::formats::FormatError;
use crate::model::tokenizer::TokenizerError;
use crate::model::ModelError;
use std::fmt;
use std::sync::Arc;

/// An error of another type held by an [`Error`] and shared by its clones (`Error` is `Clone`;
/// [`FormatError`] and [`ModelError`] are not). Equal when it is the same error or says the same.
#[derive(Debug)]
pub struct Shared<E>(pub Arc<E>);

impl<E> Shared<E> {
    /// Wrap `e`.
    pub fn new(e: E) -> Self {
        Shared(Arc::new(e))
    }
}

impl<E> Clone for Shared<E> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<E: fmt::Display> PartialEq for Shared<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl<E> std::ops::Deref for Shared<E> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.0
    }
}

/// The [`FormatError`] of [`Error::FormatError`] (also its `source()`).
pub type FormatCause = Shared<FormatError>;
/// The [`ModelError`] of [`Error::Model`].
pub type ModelCause = Shared<ModelError>;

/// Everything that can go wrong, typed so callers can match on it. New variants may be added
/// (`#[non_exhaustive]`): match with a `_` arm.
///
/// The crate's other error types convert into it, so `?` works on any of the crate's calls in a
/// function returning [`Result`]: [`FormatError`] (as [`Error::FormatError`]),
/// [`ModelError`] (as itself for a kernel error, else [`Error::Model`]) and
/// [`TokenizerError`] (as [`Error::Tokenizer`]). [`ModelError`] also converts from each of
/// them, for the model runner's callbacks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// No adapter matched the request (or none exists, e.g. no Vulkan driver installed).
    NoAdapter(String),
    /// The adapter refused the device request.
    Device(String),
    /// A shape parameter is invalid (zero size, K not a multiple of a block, ...).
    Shape(String),
    /// Some other argument is invalid (group size, mode, scales of the wrong length, ...).
    Argument(String),
    /// A buffer is shorter than the kernel needs.
    BufferTooSmall { name: &'static str, needed: u64, got: u64 },
    /// A buffer binding exceeds the device's binding limit.
    BindingTooLarge { name: &'static str, bytes: u64, limit: u64 },
    /// A dispatch exceeds another device limit (workgroups, bindings per stage, ...).
    Limit(String),
    /// The requested variant of a kernel cannot run on this adapter.
    Unsupported { kernel: &'static str, variant: Variant, reason: String },
    /// Shader module or pipeline creation failed.
    Pipeline(String),
    /// Reading a buffer back failed.
    Readback(String),
    /// A block, tensor or buffer whose contents fail an upload's or a kernel's validation, in
    /// text naming it (a malformed file as such is [`Error::FormatError`]).
    InvalidData(String),
    /// A position past the end of a fixed-capacity (global) KV cache.
    PositionOutOfRange { pos: u64, capacity: u64 },
    /// A ggml type that is no supported weight format (IQ*, TQ*, MXFP4, ...), with the tensor
    /// where one is involved.
    UnsupportedType { ggml_type: crate::formats::gguf::GgmlType, tensor: Option<String> },
    /// A malformed file or block ([`FormatError`], also the error's `source()`).
    FormatError(FormatCause),
    /// A buffer (or a matrix, cache or table holding buffers) made by another context was
    /// passed to this context's batch or readback. Contexts made with
    /// [`crate::Context::with_options`] share their device and may share buffers.
    ForeignBuffer { name: &'static str },
    /// A writable binding of a dispatch is bound to the same buffer as another binding.
    Aliased { first: &'static str, second: &'static str },
    /// A model runner error ([`ModelError`], also the error's `source()`'s origin).
    Model(ModelCause),
    /// A tokenizer error.
    Tokenizer(TokenizerError),
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        Error::FormatError(Shared::new(e))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoAdapter(s) => write!(f, "no suitable GPU adapter: {s}"),
            Error::Device(s) => write!(f, "device request failed: {s}"),
            Error::Shape(s) => write!(f, "invalid shape: {s}"),
            Error::Argument(s) => write!(f, "invalid argument: {s}"),
            Error::BufferTooSmall { name, needed, got } => {
                write!(f, "buffer `{name}` too small: needs {needed} elements, has {got}")
            }
            Error::BindingTooLarge { name, bytes, limit } => {
                write!(f, "buffer `{name}` is {bytes} bytes, over the binding limit of {limit}")
            }
            Error::Limit(s) => write!(f, "device limit exceeded: {s}"),
            Error::Unsupported { kernel, variant, reason } => {
                write!(f, "{kernel}: variant {variant:?} unsupported: {reason}")
            }
            Error::Pipeline(s) => write!(f, "pipeline creation failed: {s}"),
            Error::Readback(s) => write!(f, "readback failed: {s}"),
            Error::InvalidData(s) => write!(f, "invalid data: {s}"),
            Error::PositionOutOfRange { pos, capacity } => write!(f, "position {pos} is past the end of a cache of capacity {capacity}"),
            Error::UnsupportedType { ggml_type, tensor: Some(t) } => write!(f, "tensor {t:?}: ggml type {ggml_type:?} is not a supported weight format"),
            Error::UnsupportedType { ggml_type, tensor: None } => write!(f, "ggml type {ggml_type:?} is not a supported weight format"),
            Error::FormatError(e) => write!(f, "format error: {}", e.0),
            Error::ForeignBuffer { name } => write!(f, "buffer `{name}` belongs to another context"),
            Error::Aliased { first, second } => write!(f, "bindings `{first}` and `{second}` are the same buffer and one of them is written"),
            Error::Model(e) => write!(f, "{}", e.0),
            Error::Tokenizer(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::FormatError(e) => Some(&*e.0),
            Error::Model(e) => std::error::Error::source(&*e.0),
            Error::Tokenizer(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

/// Checked size arithmetic for host code: every product, sum and narrowing of a size, offset or
/// position goes through these, so no check can be passed by a value that wraps.
pub mod dims {
    use super::{Error, Result};

    /// The product of `dims`, or [`Error::Shape`] naming `what` when it overflows `usize`.
    pub fn prod(what: &str, dims: &[usize]) -> Result<usize> {
        dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| Error::Shape(format!("{what}: {dims:?} overflows")))
    }

    /// `a + b`, or [`Error::Shape`] naming `what` when it overflows.
    pub fn add(what: &str, a: usize, b: usize) -> Result<usize> {
        a.checked_add(b).ok_or_else(|| Error::Shape(format!("{what}: {a} + {b} overflows")))
    }

    /// `v` as `u32` (the shaders' index type), or [`Error::Shape`] naming `what`.
    pub fn u32_of(what: &str, v: usize) -> Result<u32> {
        u32::try_from(v).map_err(|_| Error::Shape(format!("{what} = {v} does not fit in 32 bits")))
    }

    /// The product of `dims` when it is at most `u32::MAX` (a tensor the shaders can index).
    pub fn elems_u32(what: &str, dims: &[usize]) -> Result<usize> {
        let n = prod(what, dims)?;
        u32_of(what, n)?;
        Ok(n)
    }

    /// `v` must be finite (the parameter policy of the crate docs), else [`Error::Argument`].
    pub fn finite(what: &str, v: f32) -> Result<f32> {
        if v.is_finite() {
            Ok(v)
        } else {
            Err(Error::Argument(format!("{what} = {v}: must be finite")))
        }
    }
}

/// Shorthand used by validation code: `ensure(cond, || Error::Shape(..))?`.
pub(crate) fn ensure(cond: bool, err: impl FnOnce() -> Error) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(err())
    }
}
