//! Unit tests on hand-made vocabularies (the llama.cpp comparisons are in tests/tokenizer.rs).

use super::*;
use crate::formats::gguf::{GgufWriter, MetaValue, ValueType};

fn array(elem_type: ValueType, items: Vec<MetaValue>) -> MetaValue {
    MetaValue::array(elem_type, &items).expect("typed array")
}

fn strings(v: &[&str]) -> MetaValue {
    array(ValueType::String, v.iter().map(|s| MetaValue::String(s.to_string())).collect())
}

fn file(meta: Vec<(&str, MetaValue)>) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w = w.metadata(k, v);
    }
    GgufFile::from_vec(w.to_bytes()).expect("valid gguf")
}

/// SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then a few pieces.
fn spm() -> Tokenizer {
    let mut texts: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        texts.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let pieces = [("▁", -1.0), ("a", -2.0), ("b", -2.0), ("▁a", -0.5), ("ab", -0.1), ("▁ab", -3.0), ("é", -2.0)];
    for (p, _) in pieces {
        texts.push(p.to_string());
        types.push(1);
    }
    let mut scores = vec![0.0f32; 259];
    scores.extend(pieces.iter().map(|p| p.1));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    Tokenizer::from_gguf(&file(vec![
        ("tokenizer.ggml.model", MetaValue::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(&refs)),
        ("tokenizer.ggml.scores", array(ValueType::F32, scores.into_iter().map(MetaValue::F32).collect())),
        ("tokenizer.ggml.token_type", array(ValueType::I32, types.into_iter().map(MetaValue::I32).collect())),
    ]))
    .expect("tokenizer")
}

fn id(t: &Tokenizer, text: &str) -> u32 {
    t.vocab.id(text).expect(text)
}

#[test]
fn spm_merges_by_score_and_falls_back_to_bytes() {
    let t = spm();
    let (bos, sp_a, b, ab) = (1, id(&t, "▁a"), id(&t, "b"), id(&t, "ab"));
    // "ab" (-0.1) outscores "▁a" (-0.5), so it merges first, leaving "▁" + "ab", which "▁ab"
    // (-3.0) then joins.
    assert_eq!(t.encode("ab", true).unwrap(), [bos, id(&t, "▁ab")]);
    assert_eq!(t.encode("a", false).unwrap(), [sp_a]);
    assert_eq!(t.encode("bab", false).unwrap(), [id(&t, "▁"), b, ab]);
    // 😀 is no token: its four UTF-8 bytes become byte tokens.
    let emoji: Vec<u32> = [0xF0u32, 0x9F, 0x98, 0x80].iter().map(|b| 3 + b).collect();
    let mut want = vec![sp_a];
    want.extend(&emoji);
    assert_eq!(t.encode("a😀", false).unwrap(), want);
    assert_eq!(t.encode("", true).unwrap(), [bos]);
    assert_eq!(t.encode("", false).unwrap(), Vec::<u32>::new());
}

#[test]
fn spm_special_tokens_only_when_parsed() {
    let t = spm();
    // Parsed: "</s>" is one token, and the text after it gets the space prefix again.
    assert_eq!(t.encode_with("a</s>a", false, true).unwrap(), [id(&t, "▁a"), 2, id(&t, "▁a")]);
    // Not parsed: spelled out with byte tokens ('<', '/', 's', '>' are not pieces here).
    let plain = t.encode_with("a</s>", false, false).unwrap();
    assert_eq!(plain[0], id(&t, "▁a"));
    assert_eq!(plain[1..], [3 + u32::from(b'<'), 3 + u32::from(b'/'), 3 + u32::from(b's'), 3 + u32::from(b'>')]);
}

#[test]
fn pieces_and_streaming_decoder() {
    let t = spm();
    assert_eq!(t.piece(id(&t, "▁ab"), false).unwrap(), b" ab");
    assert_eq!(t.piece(1, false).unwrap(), b"");
    assert_eq!(t.piece(1, true).unwrap(), b"<s>");
    assert_eq!(t.token_bytes(3 + 0xF0).unwrap(), [0xF0]);
    assert!(matches!(t.piece(100_000, true), Err(TokenizerError::TokenOutOfRange { id: 100_000, .. })));

    // "é" as two byte tokens, then the 4 bytes of 😀 one at a time: text appears only when complete.
    let mut d = t.decoder(false);
    assert_eq!(d.push(id(&t, "▁a")).unwrap(), " a");
    assert_eq!(d.push(3 + 0xC3).unwrap(), "");
    assert_eq!(d.pending(), [0xC3]);
    assert_eq!(d.push(3 + 0xA9).unwrap(), "é");
    let mut got = Vec::new();
    for b in [0xF0u32, 0x9F, 0x98, 0x80] {
        got.push(d.push(3 + b).unwrap());
    }
    assert_eq!(got, ["", "", "", "😀"]);
    // A byte that cannot start a character is replaced at once; a dangling lead byte at the end.
    assert_eq!(d.push(3 + 0x80).unwrap(), "\u{FFFD}");
    assert_eq!(d.push(3 + 0xE2).unwrap(), "");
    assert_eq!(d.push(1).unwrap(), "");
    assert_eq!(d.finish(), "\u{FFFD}");
    // An interrupted sequence: the lead byte becomes U+FFFD, the next character survives.
    let mut d = t.decoder(false);
    assert_eq!(d.push_bytes(&[0xE2, b'x']), "\u{FFFD}x");
}

#[test]
fn byte_level_bpe_merges_by_rank() {
    // Byte-level characters for every byte, then merged tokens.
    let mut texts: Vec<String> = (0..=255u8).map(|b| bpe::byte_char(b).to_string()).collect();
    texts.extend(["ab", "Ġab", "<|endoftext|>"].map(String::from));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut types = vec![MetaValue::I32(1); 258];
    types.push(MetaValue::I32(3));
    let t = Tokenizer::from_gguf(&file(vec![
        ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
        ("tokenizer.ggml.pre", MetaValue::String("qwen2".into())),
        ("tokenizer.ggml.tokens", strings(&refs)),
        ("tokenizer.ggml.token_type", array(ValueType::I32, types)),
        ("tokenizer.ggml.merges", strings(&["a b", "Ġ ab"])),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(258)),
    ]))
    .expect("tokenizer");
    let (ab, sp_ab) = (256, 257);
    assert_eq!(t.encode("ab ab", true).unwrap(), [ab, sp_ab]);
    assert_eq!(t.encode("ba", false).unwrap(), [u32::from(b'b'), u32::from(b'a')]);
    // "é" is two bytes, each its own character token; 7 is a digit word of its own.
    assert_eq!(t.encode("é7", false).unwrap(), [0xC3, 0xA9, u32::from(b'7')]);
    assert_eq!(t.encode_with("ab<|endoftext|>", false, true).unwrap(), [ab, 258]);
    assert!(t.is_eog(258));
    assert_eq!(t.decode(&[ab, sp_ab, 258], false).unwrap(), "ab ab");
    assert_eq!(t.decode(&[ab, 258], true).unwrap(), "ab<|endoftext|>");
}

#[test]
fn bad_vocabularies_are_typed_errors() {
    let base = |model: &str| vec![("tokenizer.ggml.model", MetaValue::String(model.into())), ("tokenizer.ggml.tokens", strings(&["a", "b"]))];
    assert_eq!(Tokenizer::from_gguf(&file(base("rwkv"))).unwrap_err(), TokenizerError::UnknownModel("rwkv".into()));
    let mut m = base("gpt2");
    m.push(("tokenizer.ggml.pre", MetaValue::String("falcon".into())));
    assert_eq!(Tokenizer::from_gguf(&file(m)).unwrap_err(), TokenizerError::UnknownPreTokenizer("falcon".into()));
    assert_eq!(Tokenizer::from_gguf(&file(vec![])).unwrap_err(), TokenizerError::MissingKey("tokenizer.ggml.model"));
    let mut m = base("llama");
    m.push(("tokenizer.ggml.bos_token_id", MetaValue::U32(7)));
    assert!(matches!(Tokenizer::from_gguf(&file(m)), Err(TokenizerError::BadKey { key: "tokenizer.ggml.bos_token_id", .. })));
    let m = vec![("tokenizer.ggml.model", MetaValue::String("llama".into())), ("tokenizer.ggml.tokens", strings(&["a", "a", "b"]))];
    assert!(matches!(Tokenizer::from_gguf(&file(m)), Err(TokenizerError::DuplicateToken { id: 1, .. })));
    let mut m = base("gpt2");
    m.push(("tokenizer.ggml.pre", MetaValue::String("qwen2".into())));
    assert_eq!(Tokenizer::from_gguf(&file(m)).unwrap_err(), TokenizerError::MissingKey("tokenizer.ggml.merges"));
    let e: crate::Error = TokenizerError::UnknownModel("rwkv".into()).into();
    assert!(e.to_string().contains("rwkv"));
}

/// End-of-generation tokens as llama.cpp marks them: the file's ids, end-of-turn texts (made
/// control tokens), fill-in-the-middle tokens by key or else by text, and the two exceptions
/// (`<|end|>` beside `<|return|>` and `<|call|>`; `</s>` beside `<|tool_response>`).
#[test]
fn end_of_generation_tokens() {
    let eog = |texts: &[&str], extra: Vec<(&str, MetaValue)>| {
        let types = texts.iter().map(|_| MetaValue::I32(1)).collect();
        let mut meta = vec![
            ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
            ("tokenizer.ggml.pre", MetaValue::String("qwen2".into())),
            ("tokenizer.ggml.tokens", strings(texts)),
            ("tokenizer.ggml.token_type", array(ValueType::I32, types)),
            ("tokenizer.ggml.merges", strings(&[])),
        ];
        meta.extend(extra);
        let t = Tokenizer::from_gguf(&file(meta)).expect("tokenizer");
        let types: Vec<TokenType> = (0..texts.len() as u32).map(|i| t.token_type(i).unwrap()).collect();
        (t.eog_tokens().to_vec(), types)
    };
    use TokenType::{Control, Normal, UserDefined};
    let (ids, types) = eog(&["a", "<|im_end|>", "b", "<|endoftext|>"], vec![("tokenizer.ggml.eos_token_id", MetaValue::U32(2))]);
    assert_eq!((ids, types), (vec![1, 2, 3], vec![Normal, Control, Normal, Control]));
    // FIM tokens: the key's id, else the first known text.
    let (ids, _) = eog(&["a", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "x"], vec![("tokenizer.ggml.fim_pad_token_id", MetaValue::U32(4))]);
    assert_eq!(ids, [2, 3, 4]);
    let (ids, types) = eog(&["<|end|>", "<|return|>", "<|call|>"], vec![]);
    assert_eq!((ids, types[0]), (vec![1, 2], UserDefined));
    let (ids, types) = eog(&["<|end|>", "<|return|>"], vec![]);
    assert_eq!((ids, types[0]), (vec![0, 1], Control));
    let (ids, types) = eog(&["</s>", "<|tool_response>"], vec![]);
    assert_eq!((ids, types[0]), (vec![1], Normal));
}
