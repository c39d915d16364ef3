//! One error type for the whole crate. Every public function returns [`Result`].

use crate::caps::Variant;
use std::fmt;

/// Everything that can go wrong, typed so callers can match on it.
#[derive(Debug, Clone, PartialEq)]
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
    /// A file or block format error (GGUF, Q4_K, ...).
    Format(String),
    /// A position past the end of a fixed-capacity (global) KV cache.
    PositionOutOfRange { pos: u64, capacity: u64 },
    /// A ggml type that is no supported weight format (IQ*, TQ*, MXFP4, ...), with the tensor
    /// where one is involved.
    UnsupportedType { ggml_type: crate::formats::gguf::GgmlType, tensor: Option<String> },
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
            Error::Format(s) => write!(f, "format error: {s}"),
            Error::PositionOutOfRange { pos, capacity } => write!(f, "position {pos} is past the end of a cache of capacity {capacity}"),
            Error::UnsupportedType { ggml_type, tensor: Some(t) } => write!(f, "tensor {t:?}: ggml type {ggml_type:?} is not a supported weight format"),
            Error::UnsupportedType { ggml_type, tensor: None } => write!(f, "ggml type {ggml_type:?} is not a supported weight format"),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand used by validation code: `ensure(cond, || Error::Shape(..))?`.
pub(crate) fn ensure(cond: bool, err: impl FnOnce() -> Error) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(err())
    }
}
