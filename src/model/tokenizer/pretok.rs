//! Pre-tokenizers of byte-level BPE vocabularies: the split of the text into words before merges.
//!
//! Both supported splits are the regular expression
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! (Llama 3; Qwen2 has `\p{N}` for `\p{N}{1,3}`), hand-coded rather than run through a regex
//! engine: the `regex` crate has no look-ahead, which `\s+(?!\S)` needs, and a hand-coded scan
//! needs no new dependency. `\p{L}`/`\p{N}` come from generated Unicode tables, `\s` is the
//! Unicode White_Space property (`char::is_whitespace`).

use super::unicode_tables::{LETTER, NUMBER};

/// A byte-level BPE pre-tokenizer, named by the GGUF key `tokenizer.ggml.pre`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// Llama 3 and its relatives: digits in groups of up to three.
    Llama3,
    /// Qwen2 and its relatives: every digit on its own.
    Qwen2,
}

impl PreTokenizer {
    /// The pre-tokenizer a `tokenizer.ggml.pre` value names, if supported.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" => Some(PreTokenizer::Llama3),
            "qwen2" | "deepseek-r1-qwen" | "megrez" | "stablelm2" => Some(PreTokenizer::Qwen2),
            _ => None,
        }
    }

    /// Whether a word that is itself a token skips the merges (Llama 3 does, Qwen2 does not).
    pub fn ignores_merges(self) -> bool {
        self == PreTokenizer::Llama3
    }

    /// Whether the vocabulary adds BOS when the file does not say (`tokenizer.ggml.add_bos_token`).
    pub fn default_add_bos(self) -> bool {
        self == PreTokenizer::Llama3
    }
}

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// `\p{L}`: general category L*.
pub(super) fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphabetic()
    } else {
        in_table(LETTER, c)
    }
}

/// `\p{N}`: general category N*.
pub(super) fn is_number(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        in_table(NUMBER, c)
    }
}

/// `[^\s\p{L}\p{N}]`.
fn is_other(c: char) -> bool {
    !c.is_whitespace() && !is_letter(c) && !is_number(c)
}

/// Splits `text` into words; concatenated, the words are `text`.
pub(super) fn split<'a>(pre: PreTokenizer, text: &'a str) -> Vec<&'a str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let at = |p: usize| chars.get(p).map(|&(_, c)| c);
    let byte = |p: usize| chars.get(p).map_or(text.len(), |&(b, _)| b);
    let mut words = Vec::new();
    let mut prev = 0usize;
    let mut emit = |end: usize, words: &mut Vec<&'a str>| {
        if end > prev {
            words.push(&text[byte(prev)..byte(end)]);
            prev = end;
        }
    };
    let mut pos = 0usize;
    while pos < n {
        let c = chars[pos].1;
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if c == '\'' && pos + 1 < n {
            let c1 = chars[pos + 1].1.to_ascii_lowercase();
            if matches!(c1, 's' | 't' | 'm' | 'd') {
                pos += 2;
                emit(pos, &mut words);
                continue;
            }
            if pos + 2 < n {
                let c2 = chars[pos + 2].1.to_ascii_lowercase();
                if matches!((c1, c2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                    pos += 3;
                    emit(pos, &mut words);
                    continue;
                }
            }
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(c == '\r' || c == '\n' || is_number(c)) && (is_letter(c) || at(pos + 1).is_some_and(is_letter)) {
            pos += 1;
            while at(pos).is_some_and(is_letter) {
                pos += 1;
            }
            emit(pos, &mut words);
            continue;
        }
        // \p{N}{1,3} (Llama 3) or \p{N} (Qwen2)
        if is_number(c) {
            let max = if pre == PreTokenizer::Llama3 { 3 } else { 1 };
            let start = pos;
            while pos - start < max && at(pos).is_some_and(is_number) {
                pos += 1;
            }
            emit(pos, &mut words);
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`: a lone space at the very end also lands here (as " ").
        let punct = if c == ' ' { at(pos + 1).is_none_or(is_other) } else { is_other(c) };
        if punct {
            if c == ' ' {
                pos += 1;
            }
            while at(pos).is_some_and(is_other) {
                pos += 1;
            }
            while matches!(at(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            emit(pos, &mut words);
            continue;
        }
        // Whitespace: `\s*[\r\n]+`, then `\s+(?!\S)`, then `\s+`.
        let mut run = 0usize;
        let mut after_newline = None;
        while let Some(w) = at(pos + run).filter(|w| w.is_whitespace()) {
            run += 1;
            if w == '\r' || w == '\n' {
                after_newline = Some(pos + run);
            }
        }
        if let Some(end) = after_newline {
            pos = end;
        } else if run > 1 && pos + run < n {
            pos += run - 1; // leave the last space to prefix the next word
        } else if run > 0 {
            pos += run;
        } else {
            pos += 1;
        }
        emit(pos, &mut words);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_classes() {
        for c in ['a', 'Z', 'é', 'ж', '日', 'ß', 'ª'] {
            assert!(is_letter(c), "{c}");
        }
        for c in ['0', '9', '٣', '½', 'Ⅻ', '²'] {
            assert!(is_number(c), "{c}");
            assert!(!is_letter(c), "{c}");
        }
        for c in [' ', '!', '🦙', '\u{301}', '_', '\u{200d}'] {
            assert!(!is_letter(c) && !is_number(c), "{c:?}");
        }
    }

    #[test]
    fn llama3_and_qwen2_splits() {
        let s = "Hello  world's 12345 ok!!\n\n  x  ";
        assert_eq!(split(PreTokenizer::Llama3, s), ["Hello", " ", " world", "'s", " ", "123", "45", " ok", "!!\n\n", " ", " x", "  "]);
        assert_eq!(split(PreTokenizer::Qwen2, "a 12"), ["a", " ", "1", "2"]);
        assert_eq!(split(PreTokenizer::Qwen2, "I'VE \r\n"), ["I", "'VE", " \r\n"]);
        assert_eq!(split(PreTokenizer::Llama3, " "), [" "]);
        assert_eq!(split(PreTokenizer::Llama3, ""), Vec::<&str>::new());
        assert_eq!(split(PreTokenizer::Llama3, "x ?!"), ["x", " ?!"]);
        assert_eq!(split(PreTokenizer::Llama3, "日本語🦙"), ["日本語", "🦙"]);
    }
}
