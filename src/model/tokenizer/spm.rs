//! SentencePiece (`tokenizer.ggml.model = llama`): merge by token score, then byte fallback.

use super::vocab::Vocab;
use super::{merge, TokenizerError};

/// A float score as a total order (the merge priority).
#[derive(Clone, Copy, PartialEq)]
struct Score(f32);

impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Tokenises one fragment whose spaces are already `▁` onto `out`. Adjacent pieces merge when
/// their concatenation is a token, highest score first; what is left that is not a token is
/// spelled with byte tokens.
pub(super) fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
    let mut buf = String::new();
    let parts = merge::merge(text, |l, r| {
        buf.clear();
        buf.push_str(l);
        buf.push_str(r);
        vocab.id(&buf).map(|id| Score(vocab.tokens[id as usize].score))
    });
    for (start, len) in parts {
        let piece = &text[start..start + len];
        if let Some(id) = vocab.id(piece) {
            out.push(id);
            continue;
        }
        for &b in piece.as_bytes() {
            out.push(byte_token(vocab, b)?);
        }
    }
    Ok(())
}

/// The token for one byte: `<0xNN>`, else the byte itself as a token, else the unknown token.
fn byte_token(vocab: &Vocab, b: u8) -> Result<u32, TokenizerError> {
    if let Some(id) = vocab.id(&format!("<0x{b:02X}>")) {
        return Ok(id);
    }
    if b.is_ascii() {
        if let Some(id) = vocab.id(char::from(b).encode_utf8(&mut [0; 4])) {
            return Ok(id);
        }
    }
    vocab.unk.ok_or(TokenizerError::MissingByteToken(b))
}
