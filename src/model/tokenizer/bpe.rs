//! Byte-level BPE (`tokenizer.ggml.model = gpt2`): the byte <-> printable-character mapping,
//! merge ranks from `tokenizer.ggml.merges`, and the per-word merge.

use super::vocab::{get_strings, Vocab};
use super::{merge, pretok, PreTokenizer, TokenizerError};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Byte -> character: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..
/// in byte order (the GPT-2 convention every byte-level vocabulary uses).
fn byte_chars() -> &'static ([char; 256], HashMap<char, u8>) {
    static MAP: OnceLock<([char; 256], HashMap<char, u8>)> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut to_char = ['\0'; 256];
        let mut to_byte = HashMap::with_capacity(256);
        let mut extra = 0u32;
        for b in 0..=255u8 {
            let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
            let cp = if printable {
                u32::from(b)
            } else {
                extra += 1;
                255 + extra
            };
            // cp <= 255 + 68: always a valid scalar value.
            let c = char::from_u32(cp).unwrap_or('\u{FFFD}');
            to_char[b as usize] = c;
            to_byte.insert(c, b);
        }
        (to_char, to_byte)
    })
}

/// The byte-level character of one byte.
pub(super) fn byte_char(b: u8) -> char {
    byte_chars().0[b as usize]
}

/// A word's bytes as byte-level characters.
pub(super) fn encode_byte_level(word: &str) -> String {
    let map = &byte_chars().0;
    word.bytes().map(|b| map[b as usize]).collect()
}

/// Byte-level characters back to bytes; a character outside the mapping is kept as its UTF-8.
pub(super) fn decode_byte_level(text: &str) -> Vec<u8> {
    let map = &byte_chars().1;
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match map.get(&c) {
            Some(&b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// Merge ranks: the pair `(left, right)` merges with priority `rank` (lower first).
#[derive(Clone, Debug)]
pub(super) struct Merges {
    ranks: HashMap<(String, String), u32>,
}

impl Merges {
    pub fn from_gguf(file: &crate::formats::gguf::GgufFile) -> Result<Self, TokenizerError> {
        const KEY: &str = "tokenizer.ggml.merges";
        let items = get_strings(file, KEY)?.ok_or(TokenizerError::MissingKey(KEY))?;
        let mut ranks = HashMap::with_capacity(items.len());
        for (i, s) in items.iter().enumerate() {
            // "left right", split at the first space after the first character.
            let first_len = s.chars().next().map_or(0, char::len_utf8);
            let Some(sp) = s[first_len..].find(' ').map(|p| p + first_len) else {
                return Err(TokenizerError::BadKey { key: KEY, reason: format!("entry {i} ({s:?}) has no space") });
            };
            let rank = u32::try_from(i).map_err(|_| TokenizerError::BadKey { key: KEY, reason: "too many merges".into() })?;
            ranks.entry((s[..sp].to_string(), s[sp + 1..].to_string())).or_insert(rank);
        }
        Ok(Merges { ranks })
    }

    /// Tokenises one text fragment (no special tokens in it) onto `out`.
    pub fn encode(&self, vocab: &Vocab, pre: PreTokenizer, text: &str, out: &mut Vec<u32>) {
        let mut key = (String::new(), String::new());
        for word in pretok::split(pre, text) {
            let word = encode_byte_level(word);
            if pre.ignores_merges() {
                if let Some(id) = vocab.id(&word) {
                    out.push(id);
                    continue;
                }
            }
            let parts = merge::merge(&word, |l, r| {
                key.0.clear();
                key.0.push_str(l);
                key.1.clear();
                key.1.push_str(r);
                self.ranks.get(&key).map(|&rank| std::cmp::Reverse(rank))
            });
            for (start, len) in parts {
                let piece = &word[start..start + len];
                match vocab.id(piece) {
                    Some(id) => out.push(id),
                    None => {
                        // Token by byte; a byte with no token is dropped (as llama.cpp does).
                        for b in decode_byte_level(piece) {
                            let mut s = [0u8; 4];
                            if let Some(id) = vocab.id(byte_char(b).encode_utf8(&mut s)) {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_round_trip() {
        let all: Vec<u8> = (0..=255).collect();
        // Every byte maps to a distinct character, and back.
        let s: String = all.iter().map(|&b| byte_chars().0[b as usize]).collect();
        assert_eq!(s.chars().count(), 256);
        assert_eq!(decode_byte_level(&s), all);
        assert_eq!(encode_byte_level(" a\n"), "\u{120}a\u{10A}");
        assert_eq!(encode_byte_level("é"), "\u{C3}\u{A9}");
    }
}
