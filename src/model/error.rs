//! The model runner's error type: what went wrong, naming the key, tensor or architecture.
//!
//! [`ModelError`] converts both ways with the crate's [`crate::Error`] (which holds it as
//! [`crate::Error::Model`]), and from [`FormatError`] and [`TokenizerError`], so `?` works in
//! either kind of function: on a tokenizer call inside a callback of
//! [`super::Session::decode_greedy`], or on [`super::Model::open`] in a function returning
//! [`crate::Result`].

use super::tokenizer::TokenizerError;
use crate::formats::FormatError;
use std::fmt;

/// Errors of [`crate::model`]: file contents the runner cannot use, sizes it cannot hold, and the
/// kernel errors ([`crate::Error`]) and file errors ([`FormatError`]) underneath.
#[derive(Debug)]
#[non_exhaustive]
pub enum ModelError {
    /// `general.architecture` names an architecture the runner does not implement.
    UnknownArchitecture(String),
    /// The file's architecture asks for something the runner does not implement (named).
    Unsupported { arch: String, what: String },
    /// A required metadata key is absent.
    MissingKey(String),
    /// A metadata key has an unusable type or value.
    BadKey { key: String, reason: String },
    /// A required tensor is absent.
    MissingTensor(String),
    /// A tensor has the wrong shape (or a type the runner cannot use for it).
    BadTensor { name: String, reason: String },
    /// More tokens than the context (or KV cache) holds.
    ContextFull { needed: usize, capacity: usize },
    /// A token id outside the vocabulary.
    BadToken { token: u32, vocab: usize },
    /// [`super::Session::truncate`] asked to keep more positions than the sequence has.
    TruncatePastEnd { keep: usize, len: usize },
    /// An invalid argument (sampling parameters, chunk size, ...).
    Argument(String),
    /// The GGUF container itself is malformed or truncated.
    Format(FormatError),
    /// The file at `path` is no valid GGUF file ([`super::Model::open`]; an I/O error names its
    /// path itself and comes as [`ModelError::Format`]).
    File { path: std::path::PathBuf, error: FormatError },
    /// A kernel or device error.
    Gpu(crate::Error),
    /// A tokenizer error (e.g. from a [`super::tokenizer::Decoder`] inside a decoding callback).
    Tokenizer(TokenizerError),
    /// A [`super::Session`] was given a [`super::Model`] other than the one it was made for.
    ForeignModel,
    /// The chat template does not parse or failed while rendering (the template engine's
    /// description, with the template's line; a `raise_exception` in the template gives its
    /// message).
    ChatTemplate(String),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::UnknownArchitecture(a) => write!(f, "unsupported model architecture {a:?} (supported: {})", super::arch::Arch::names().collect::<Vec<_>>().join(", ")),
            ModelError::Unsupported { arch, what } => write!(f, "architecture {arch:?}: {what} is not implemented"),
            ModelError::MissingKey(k) => write!(f, "missing metadata key {k:?}"),
            ModelError::BadKey { key, reason } => write!(f, "metadata key {key:?}: {reason}"),
            ModelError::MissingTensor(n) => write!(f, "missing tensor {n:?}"),
            ModelError::BadTensor { name, reason } => write!(f, "tensor {name:?}: {reason}"),
            ModelError::ContextFull { needed, capacity } => write!(f, "{needed} tokens do not fit a context of {capacity}"),
            ModelError::BadToken { token, vocab } => write!(f, "token id {token} outside the vocabulary of {vocab}"),
            ModelError::TruncatePastEnd { keep, len } => write!(f, "cannot keep {keep} positions of a sequence of {len}"),
            ModelError::Argument(s) => write!(f, "invalid argument: {s}"),
            ModelError::Format(e) => write!(f, "GGUF: {e}"),
            ModelError::File { path, error } => write!(f, "{}: {error}", path.display()),
            ModelError::Gpu(e) => write!(f, "{e}"),
            ModelError::Tokenizer(e) => write!(f, "{e}"),
            ModelError::ForeignModel => write!(f, "the session was made for another model (make a Session per Model)"),
            ModelError::ChatTemplate(e) => write!(f, "chat template: {e}"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Format(e) => Some(e),
            ModelError::File { error, .. } => std::error::Error::source(error),
            ModelError::Gpu(e) => Some(e),
            ModelError::Tokenizer(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<FormatError> for ModelError {
    fn from(e: FormatError) -> Self {
        ModelError::Format(e)
    }
}

impl From<TokenizerError> for ModelError {
    fn from(e: TokenizerError) -> Self {
        ModelError::Tokenizer(e)
    }
}

impl From<crate::Error> for ModelError {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::PositionOutOfRange { pos, capacity } => {
                ModelError::ContextFull { needed: usize::try_from(pos).unwrap_or(usize::MAX).saturating_add(1), capacity: usize::try_from(capacity).unwrap_or(usize::MAX) }
            }
            crate::Error::Tokenizer(t) => ModelError::Tokenizer(t),
            crate::Error::Model(m) => std::sync::Arc::try_unwrap(m.0).unwrap_or_else(|shared| ModelError::Gpu(crate::Error::Model(crate::error::Shared(shared)))),
            e => ModelError::Gpu(e),
        }
    }
}

impl From<ModelError> for crate::Error {
    /// A kernel error comes back as itself, a file error as [`crate::Error::FormatError`], a
    /// tokenizer error as [`crate::Error::Tokenizer`], the rest as [`crate::Error::Model`].
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Gpu(e) => e,
            ModelError::Format(f) => f.into(),
            ModelError::Tokenizer(t) => crate::Error::Tokenizer(t),
            e => crate::Error::Model(crate::error::Shared::new(e)),
        }
    }
}

/// Result of the model runner.
pub type Result<T> = std::result::Result<T, ModelError>;
