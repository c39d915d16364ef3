//! CPU-side weight formats: GGML Q4_K blocks and the GGUF container.
//!
//! This module only depends on `std`, `half` and `bytemuck`. Every parser here returns a
//! [`FormatError`] on malformed input; none of them panics or allocates more than the input
//! could justify.

use std::fmt;

pub mod gguf;
pub mod q4k;

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
            BadMagic(m) => write!(f, "bad GGUF magic {m:02x?}"),
            UnsupportedVersion(v) => write!(f, "unsupported GGUF version {v} (need 2 or 3)"),
            Truncated { what, offset } => write!(f, "truncated input: {what} at byte {offset}"),
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
            TensorOutOfRange { name, start, len, available } => write!(f, "tensor {name:?}: bytes {start}..{start}+{len} exceed the {available} available"),
            UnknownTensorType { name, id } => {
                write!(f, "tensor {name:?}: ggml type {id} has no known size")
            }
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
