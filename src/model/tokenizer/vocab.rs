//! The vocabulary as read from `tokenizer.ggml.*`: token texts, scores, types, special ids, and
//! each token's detokenised bytes.

use super::{bpe, TokenizerError, TokenizerKind};
use crate::formats::gguf::{GgufFile, MetaArray, MetaValue, StringList};
use std::collections::{HashMap, HashSet};

/// A token's type (`tokenizer.ggml.token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 0, or a value outside 0..=6.
    Undefined,
    /// 1: ordinary text.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: BOS, EOS, chat markers: matched in text only on request, not printed by default.
    Control,
    /// 4: added tokens always matched as a whole in text.
    UserDefined,
    /// 5: padding slots.
    Unused,
    /// 6: a single byte, `<0xNN>`.
    Byte,
}

impl TokenType {
    fn from_id(v: i64) -> Self {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub text: String,
    pub score: f32,
    pub ty: TokenType,
}

/// Texts of end-of-generation tokens recognised by name when the file's ids do not list them;
/// such a token is treated as a control token.
const EOG_TEXTS: &[&str] = &["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<end_of_utterance>"];

#[derive(Clone, Debug)]
pub(super) struct Vocab {
    pub tokens: Vec<Token>,
    pub ids: HashMap<String, u32>,
    /// Detokenised bytes per token (control tokens: their text).
    pub pieces: Vec<Vec<u8>>,
    /// Tokens matched as a whole in text, longest text first.
    pub specials: Vec<u32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    pub eog: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    /// Special tokens after which matched text drops its leading whitespace (llama.cpp's
    /// right-strip attribute, which it gives the special tokens of Phi-3 vocabularies).
    pub rstrip: HashSet<u32>,
}

pub(super) fn get_str<'a>(file: &'a GgufFile, key: &'static str) -> Result<Option<&'a str>, TokenizerError> {
    match file.get(key) {
        None => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| TokenizerError::BadKey { key, reason: "not a string".into() }),
    }
}

pub(super) fn get_array<'a>(file: &'a GgufFile, key: &'static str) -> Result<Option<&'a MetaArray>, TokenizerError> {
    match file.get(key) {
        None => Ok(None),
        Some(v) => v.as_array().map(Some).ok_or_else(|| TokenizerError::BadKey { key, reason: "not an array".into() }),
    }
}

/// An array of strings.
pub(super) fn get_strings<'a>(file: &'a GgufFile, key: &'static str) -> Result<Option<&'a StringList>, TokenizerError> {
    match get_array(file, key)? {
        None => Ok(None),
        Some(a) => a.strings().map(Some).ok_or_else(|| TokenizerError::BadKey { key, reason: "not an array of strings".into() }),
    }
}

fn get_bool(file: &GgufFile, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match file.get(key) {
        None => Ok(None),
        Some(MetaValue::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(TokenizerError::BadKey { key, reason: "not a bool".into() }),
    }
}

fn get_id(file: &GgufFile, key: &'static str, n: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(v) = file.get(key) else { return Ok(None) };
    let id = v.as_u64().ok_or_else(|| TokenizerError::BadKey { key, reason: "not a non-negative integer".into() })?;
    match u32::try_from(id) {
        Ok(id) if (id as usize) < n => Ok(Some(id)),
        _ => Err(TokenizerError::BadKey { key, reason: format!("token id {id} is out of range for a vocabulary of {n}") }),
    }
}

/// `<0xNN>` -> NN.
pub(super) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

impl Vocab {
    pub fn from_gguf(file: &GgufFile, kind: &TokenizerKind) -> Result<Self, TokenizerError> {
        const TOKENS: &str = "tokenizer.ggml.tokens";
        const SCORES: &str = "tokenizer.ggml.scores";
        const TYPES: &str = "tokenizer.ggml.token_type";
        let texts = get_strings(file, TOKENS)?.ok_or(TokenizerError::MissingKey(TOKENS))?;
        let n = texts.len();
        if n == 0 || u32::try_from(n).is_err() {
            return Err(TokenizerError::BadKey { key: TOKENS, reason: format!("{n} tokens") });
        }
        let scores = get_array(file, SCORES)?;
        let types = get_array(file, TYPES)?;
        for (key, arr) in [(SCORES, scores), (TYPES, types)] {
            if let Some(a) = arr {
                if a.len() != n {
                    return Err(TokenizerError::BadKey { key, reason: format!("{} entries for {n} tokens", a.len()) });
                }
            }
        }
        let mut tokens = Vec::with_capacity(n);
        let mut ids = HashMap::with_capacity(n);
        for (i, text) in texts.iter().enumerate() {
            let score = match scores {
                Some(MetaArray::F32(v)) => v[i],
                Some(s) => s.get(i).and_then(|v| v.as_f64()).ok_or_else(|| TokenizerError::BadKey { key: SCORES, reason: format!("entry {i} is not a float") })? as f32,
                None => 0.0,
            };
            let ty = match types {
                Some(MetaArray::I32(v)) => TokenType::from_id(v[i].into()),
                Some(s) => TokenType::from_id(match s.get(i) {
                    Some(MetaValue::I64(v)) => v,
                    other => other.and_then(|v| v.as_u64()).and_then(|v| i64::try_from(v).ok()).unwrap_or(0),
                }),
                None => TokenType::Normal,
            };
            let id = i as u32; // n fits in u32 (checked above)
            if ids.insert(text.to_string(), id).is_some() {
                return Err(TokenizerError::DuplicateToken { id, text: text.to_string() });
            }
            tokens.push(Token { text: text.to_string(), score, ty });
        }

        let spm = matches!(kind, TokenizerKind::SentencePiece);
        let in_range = |id: u32| (id as usize) < n;
        let (mut bos, mut eos, mut unk) = if spm { (Some(1).filter(|&i| in_range(i)), Some(2).filter(|&i| in_range(i)), Some(0)) } else { (None, None, None) };
        bos = get_id(file, "tokenizer.ggml.bos_token_id", n)?.or(bos);
        eos = get_id(file, "tokenizer.ggml.eos_token_id", n)?.or(eos);
        unk = get_id(file, "tokenizer.ggml.unknown_token_id", n)?.or(unk);
        let eot = get_id(file, "tokenizer.ggml.eot_token_id", n)?;
        let eom = get_id(file, "tokenizer.ggml.eom_token_id", n)?;

        let default_bos = match kind {
            TokenizerKind::SentencePiece => true,
            TokenizerKind::ByteLevelBpe(pre) => pre.default_add_bos(),
        };
        let add_bos = get_bool(file, "tokenizer.ggml.add_bos_token")?.unwrap_or(default_bos);
        let add_eos = get_bool(file, "tokenizer.ggml.add_eos_token")?.unwrap_or(false);
        let add_space_prefix = get_bool(file, "tokenizer.ggml.add_space_prefix")?.unwrap_or(spm);
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingKey("tokenizer.ggml.bos_token_id"));
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingKey("tokenizer.ggml.eos_token_id"));
        }

        // End-of-generation tokens: the listed ids plus well-known texts (made control tokens).
        let mut eog: Vec<u32> = [eos, eot, eom].into_iter().flatten().collect();
        for text in EOG_TEXTS {
            if let Some(&id) = ids.get(*text) {
                eog.push(id);
                let t = &mut tokens[id as usize];
                if t.ty != TokenType::Control {
                    t.ty = TokenType::Control;
                }
            }
        }
        eog.sort_unstable();
        eog.dedup();

        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                let t = &tokens[i as usize];
                matches!(t.ty, TokenType::Control | TokenType::UserDefined | TokenType::Unknown) && !t.text.is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].text.len()));

        // llama.cpp sets the right-strip attribute by the model's name (`general.name`,
        // lower-cased, containing "phi-3" or "phi3"): on every special token but <unk>, <s> and
        // <|endoftext|>.
        let name = file.get("general.name").and_then(|v| v.as_str()).unwrap_or("").to_lowercase();
        let rstrip = if name.contains("phi-3") || name.contains("phi3") {
            specials.iter().copied().filter(|&i| !matches!(tokens[i as usize].text.as_str(), "<unk>" | "<s>" | "<|endoftext|>")).collect()
        } else {
            HashSet::new()
        };

        let pieces = tokens.iter().map(|t| piece_bytes(t, spm)).collect();
        Ok(Vocab { tokens, ids, pieces, specials, bos, eos, unk, eog, add_bos, add_eos, add_space_prefix, rstrip })
    }

    pub fn token(&self, id: u32) -> Result<&Token, TokenizerError> {
        self.tokens.get(id as usize).ok_or(TokenizerError::TokenOutOfRange { id, n_vocab: self.tokens.len() })
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }
}

/// The bytes a token detokenises to (control and unknown tokens: their text).
fn piece_bytes(t: &Token, spm: bool) -> Vec<u8> {
    match t.ty {
        TokenType::Control | TokenType::Unknown | TokenType::UserDefined => t.text.as_bytes().to_vec(),
        TokenType::Normal if spm => t.text.replace('\u{2581}', " ").into_bytes(),
        TokenType::Normal => bpe::decode_byte_level(&t.text),
        TokenType::Byte => match parse_byte_token(&t.text) {
            Some(b) => vec![b],
            None => bpe::decode_byte_level(&t.text),
        },
        TokenType::Unused | TokenType::Undefined => Vec::new(),
    }
}
