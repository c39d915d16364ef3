//! A tokenizer built from a GGUF file's own vocabulary (the `tokenizer.ggml.*` keys), matching
//! llama.cpp's tokenisation.
//!
//! Two vocabulary models are supported, named by `tokenizer.ggml.model`:
//! * `llama` — SentencePiece: spaces become `▁` (U+2581), a space is prefixed to text that starts
//!   the input or follows a special token (`tokenizer.ggml.add_space_prefix`, default on), pieces
//!   merge pairwise by the score of the token they form, and characters no token covers fall back
//!   to byte tokens `<0xNN>`.
//! * `gpt2` — byte-level BPE: the text is split into words by the pre-tokenizer that
//!   `tokenizer.ggml.pre` names ([`PreTokenizer`]), each word's bytes are mapped to printable
//!   characters, and merges apply in the order of `tokenizer.ggml.merges`.
//!
//! Special tokens: control and unknown tokens are matched as whole tokens in the text only when
//! asked ([`Tokenizer::encode_with`] with `parse_special`); user-defined tokens always are. BOS/EOS
//! are added as the file says (`tokenizer.ggml.add_bos_token` / `add_eos_token`, with the
//! model's default when absent).
//!
//! Detokenisation: [`Tokenizer::piece`] gives a token's bytes, which need not be valid UTF-8 on
//! their own (byte tokens, split characters); a [`Decoder`] buffers them and yields only complete
//! UTF-8 text, for streaming.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use wgkernels::formats::gguf::GgufFile;
//! use wgkernels::model::tokenizer::Tokenizer;
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models/llama-tiny-q8_0.gguf");
//! let file = GgufFile::open(path)?;
//! let tok = Tokenizer::from_gguf(&file)?;
//! let ids = tok.encode("Hello world", true)?;
//! let mut dec = tok.decoder(false);
//! let mut text = String::new();
//! for &id in &ids {
//!     text += &dec.push(id)?; // whole characters only, as they complete
//! }
//! text += &dec.finish();
//! assert_eq!(text.trim_start(), "Hello world");
//! # Ok(()) }
//! ```

mod bpe;
mod merge;
mod pretok;
mod spm;
mod unicode_tables;
mod vocab;

pub use pretok::PreTokenizer;
pub use vocab::TokenType;

use crate::formats::gguf::GgufFile;
use std::fmt;

/// What can go wrong building a tokenizer or using it.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenizerError {
    /// A key the vocabulary needs is absent.
    MissingKey(&'static str),
    /// A key is present but unusable (wrong type, bad length, id out of range, ...).
    BadKey { key: &'static str, reason: String },
    /// `tokenizer.ggml.model` names a vocabulary model this crate does not implement.
    UnknownModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    UnknownPreTokenizer(String),
    /// Two tokens have the same text.
    DuplicateToken { id: u32, text: String },
    /// A token id at or past the vocabulary size.
    TokenOutOfRange { id: u32, n_vocab: usize },
    /// SentencePiece byte fallback needs a byte token the vocabulary lacks.
    MissingByteToken(u8),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::MissingKey(k) => write!(f, "tokenizer: missing key `{k}`"),
            TokenizerError::BadKey { key, reason } => write!(f, "tokenizer: key `{key}`: {reason}"),
            TokenizerError::UnknownModel(m) => write!(f, "tokenizer: unsupported tokenizer model `{m}` (supported: llama, gpt2)"),
            TokenizerError::UnknownPreTokenizer(p) => write!(f, "tokenizer: unsupported pre-tokenizer `{p}` (supported: the llama3 and qwen2 families)"),
            TokenizerError::DuplicateToken { id, text } => write!(f, "tokenizer: token {id} repeats the text {text:?}"),
            TokenizerError::TokenOutOfRange { id, n_vocab } => write!(f, "tokenizer: token id {id} is out of range for a vocabulary of {n_vocab}"),
            TokenizerError::MissingByteToken(b) => write!(f, "tokenizer: the vocabulary has no token for byte 0x{b:02X}"),
        }
    }
}

impl std::error::Error for TokenizerError {}

impl From<TokenizerError> for crate::Error {
    fn from(e: TokenizerError) -> Self {
        crate::Error::Tokenizer(e)
    }
}

/// The vocabulary model.
#[derive(Clone, Debug)]
pub enum TokenizerKind {
    /// `tokenizer.ggml.model = llama`.
    SentencePiece,
    /// `tokenizer.ggml.model = gpt2`, with its pre-tokenizer.
    ByteLevelBpe(PreTokenizer),
}

/// A tokenizer loaded from a GGUF file. Cheap to share by reference; encoding takes `&self`.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    vocab: vocab::Vocab,
    kind: TokenizerKind,
    merges: Option<bpe::Merges>,
}

/// A piece of input after special-token matching.
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

impl Tokenizer {
    /// Builds the tokenizer from the file's `tokenizer.ggml.*` keys.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, TokenizerError> {
        let model = vocab::get_str(file, "tokenizer.ggml.model")?.ok_or(TokenizerError::MissingKey("tokenizer.ggml.model"))?;
        let kind = match model {
            "llama" => TokenizerKind::SentencePiece,
            "gpt2" => {
                let pre = vocab::get_str(file, "tokenizer.ggml.pre")?.ok_or(TokenizerError::MissingKey("tokenizer.ggml.pre"))?;
                TokenizerKind::ByteLevelBpe(PreTokenizer::from_name(pre).ok_or_else(|| TokenizerError::UnknownPreTokenizer(pre.to_string()))?)
            }
            other => return Err(TokenizerError::UnknownModel(other.to_string())),
        };
        let vocab = vocab::Vocab::from_gguf(file, &kind)?;
        let merges = match kind {
            TokenizerKind::ByteLevelBpe(_) => Some(bpe::Merges::from_gguf(file)?),
            TokenizerKind::SentencePiece => None,
        };
        Ok(Tokenizer { vocab, kind, merges })
    }

    /// The vocabulary model.
    pub fn kind(&self) -> &TokenizerKind {
        &self.kind
    }

    /// Number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// Beginning-of-sequence token, if the vocabulary has one.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.bos
    }

    /// End-of-sequence token, if the vocabulary has one.
    pub fn eos(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// Whether `encode(.., add_special = true)` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// Whether generation should stop at this token (EOS, end-of-turn and the like).
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.contains(&id)
    }

    /// Every end-of-generation token, ascending, as llama.cpp marks them: the file's
    /// `tokenizer.ggml.eos_token_id`, `eot_token_id` and `eom_token_id`, the vocabulary's
    /// end-of-turn tokens named by their text (`<|eot_id|>`, `<|im_end|>`, `<|end|>`,
    /// `<end_of_turn>`, `<|endoftext|>`, `</s>`, ...), and its fill-in-the-middle pad, repository
    /// and file-separator tokens (`tokenizer.ggml.fim_pad_token_id` etc., or by their text); the
    /// named ones are control tokens.
    pub fn eog_tokens(&self) -> &[u32] {
        &self.vocab.eog
    }

    /// The token's text as stored in the vocabulary (`▁` for spaces, byte-level characters, ...).
    pub fn token_text(&self, id: u32) -> Result<&str, TokenizerError> {
        Ok(&self.vocab.token(id)?.text)
    }

    /// The token's type.
    pub fn token_type(&self, id: u32) -> Result<TokenType, TokenizerError> {
        Ok(self.vocab.token(id)?.ty)
    }

    /// Tokenises `text`, adding BOS/EOS as the vocabulary says when `add_special`. Special-token
    /// text in the input (e.g. `</s>`) is tokenised as plain text: see [`Self::encode_with`].
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError> {
        self.encode_with(text, add_special, false)
    }

    /// Tokenises `text`; with `parse_special`, the text of control tokens (`<s>`, `<|im_end|>`, ...)
    /// becomes those tokens (as llama.cpp's `parse_special`).
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let fragments = self.partition(text, parse_special);
        let v = &self.vocab;
        let mut out = Vec::new();
        let add_bos = add_special && v.add_bos;
        if add_bos {
            out.push(v.bos.ok_or(TokenizerError::MissingKey("tokenizer.ggml.bos_token_id"))?);
        }
        match (&self.kind, &self.merges) {
            (TokenizerKind::ByteLevelBpe(pre), Some(merges)) => {
                for f in &fragments {
                    match *f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(t) => merges.encode(v, *pre, t, &mut out),
                    }
                }
            }
            _ => {
                // A space is prefixed to each text fragment that starts the input or follows a
                // special token.
                let mut after_special = true;
                for f in &fragments {
                    match *f {
                        Fragment::Token(id) => {
                            out.push(id);
                            after_special = true;
                        }
                        Fragment::Text(t) => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if v.add_space_prefix && after_special {
                                s.push(' ');
                            }
                            s.push_str(t);
                            spm::encode(v, &s.replace(' ', "\u{2581}"), &mut out)?;
                            after_special = false;
                        }
                    }
                }
            }
        }
        if add_special && v.add_eos {
            out.push(v.eos.ok_or(TokenizerError::MissingKey("tokenizer.ggml.eos_token_id"))?);
        }
        Ok(out)
    }

    /// Splits the text at occurrences of special tokens (longest token text first).
    fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut frags = Vec::new();
        if !text.is_empty() {
            frags.push(Fragment::Text(text));
        }
        for &id in &self.vocab.specials {
            let tok = &self.vocab.tokens[id as usize];
            if !parse_special && matches!(tok.ty, TokenType::Control | TokenType::Unknown) {
                continue;
            }
            let pat = tok.text.as_str();
            let mut next = Vec::with_capacity(frags.len());
            for f in frags {
                let Fragment::Text(mut t) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = t.find(pat) {
                    if at > 0 {
                        next.push(Fragment::Text(&t[..at]));
                    }
                    next.push(Fragment::Token(id));
                    t = &t[at + pat.len()..];
                    if self.vocab.rstrip.contains(&id) {
                        // C's isspace.
                        t = t.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
                    }
                }
                if !t.is_empty() {
                    next.push(Fragment::Text(t));
                }
            }
            frags = next;
        }
        frags
    }

    /// The bytes a token stands for. Control and unknown tokens give their text only when
    /// `special`; unused tokens give nothing.
    pub fn piece(&self, id: u32, special: bool) -> Result<&[u8], TokenizerError> {
        let t = self.vocab.token(id)?;
        if !special && matches!(t.ty, TokenType::Control | TokenType::Unknown) {
            return Ok(&[]);
        }
        Ok(&self.vocab.pieces[id as usize])
    }

    /// The bytes a token stands for, special tokens included (`piece(id, true)`).
    pub fn token_bytes(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.piece(id, true)
    }

    /// The text of a token sequence; bytes that are not UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32], special: bool) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.piece(id, special)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A streaming decoder: feed ids one at a time, get text as soon as it is complete UTF-8.
    pub fn decoder(&self, special: bool) -> Decoder<'_> {
        Decoder { tokenizer: self, special, pending: Vec::new() }
    }
}

/// Streaming detokeniser: buffers the bytes of an incomplete UTF-8 character across tokens.
pub struct Decoder<'a> {
    tokenizer: &'a Tokenizer,
    special: bool,
    pending: Vec<u8>,
}

impl Decoder<'_> {
    /// Appends a token; returns the text completed by it (possibly empty). Bytes that can never
    /// start or continue a UTF-8 character come out as U+FFFD.
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        let piece = self.tokenizer.piece(id, self.special)?;
        Ok(self.push_bytes(piece))
    }

    /// Appends raw bytes; returns the text completed by them.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (ok, tail) = rest.split_at(e.valid_up_to());
                    // The prefix was just validated.
                    out.push_str(std::str::from_utf8(ok).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            rest = &tail[bad..];
                        }
                        None => {
                            rest = tail; // an incomplete character: wait for more bytes
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: a held incomplete character comes out as U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

#[cfg(test)]
mod tests;
