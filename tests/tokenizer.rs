//! Our tokenizer against llama.cpp's on the fixture vocabularies (tests/data/models/, made by
//! tools/make_model_fixtures.py): every test text in all four (add_special, parse_special) modes,
//! and every token's piece with and without special tokens rendered.

use std::path::{Path, PathBuf};
use wgkernels::formats::gguf::GgufFile;
use wgkernels::model::tokenizer::{Tokenizer, TokenizerKind};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models")
}

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

struct Case {
    text: String,
    /// (add_special, parse_special, ids)
    modes: Vec<(bool, bool, Vec<u32>)>,
}

struct Reference {
    file: String,
    cases: Vec<Case>,
    /// (id, piece with special tokens rendered, piece without)
    pieces: Vec<(u32, Vec<u8>, Vec<u8>)>,
}

fn read_reference(path: &Path) -> Reference {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = Reference { file: String::new(), cases: Vec::new(), pieces: Vec::new() };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let ids = || rest.split_whitespace().map(|x| x.parse::<u32>().expect("id")).collect::<Vec<_>>();
        match key {
            "file" => r.file = rest.to_string(),
            "case" => r.cases.push(Case { text: String::from_utf8(unhex(rest)).expect("utf-8 case"), modes: Vec::new() }),
            "plain" | "add_special" | "parse_special" | "add_and_parse_special" => {
                let add = key.starts_with("add");
                let parse = key.contains("parse");
                r.cases.last_mut().expect("mode before case").modes.push((add, parse, ids()));
            }
            "piece" => {
                let f: Vec<&str> = rest.split(' ').collect();
                assert_eq!(f.len(), 4, "piece line {line}");
                r.pieces.push((f[0].parse().expect("id"), unhex(f[2]), unhex(f[3])));
            }
            other => panic!("{}: unknown key {other}", path.display()),
        }
    }
    r
}

/// (name, gguf, tokens reference) for every vocabulary in the manifest.
fn vocabularies() -> Vec<(String, PathBuf, PathBuf)> {
    let manifest = std::fs::read_to_string(dir().join("manifest.txt")).expect("tests/data/models/manifest.txt");
    manifest
        .lines()
        .filter_map(|l| l.strip_prefix("vocab "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), dir().join(f[1]), dir().join(f[2]))
        })
        .collect()
}

#[test]
fn tokenisation_matches_llama_cpp() {
    let vocabs = vocabularies();
    // SentencePiece, byte-level BPE with the Qwen2 split, and with the Llama 3 split.
    assert!(vocabs.len() >= 3, "expected three fixture vocabularies, found {}", vocabs.len());
    let mut kinds = Vec::new();
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for (name, gguf, reference) in &vocabs {
        let r = read_reference(reference);
        assert_eq!(gguf.file_name().and_then(|f| f.to_str()), Some(r.file.as_str()));
        assert!(r.cases.len() >= 10, "{name}: only {} cases", r.cases.len());
        let file = GgufFile::open(gguf).unwrap_or_else(|e| panic!("{}: {e:?}", gguf.display()));
        let tok = Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        kinds.push(format!("{:?}", tok.kind()));
        for case in &r.cases {
            assert_eq!(case.modes.len(), 4, "{name}: {:?}", case.text);
            for (add, parse, want) in &case.modes {
                let got = tok.encode_with(&case.text, *add, *parse).unwrap_or_else(|e| panic!("{name}: {e}"));
                checked += 1;
                if &got != want {
                    failures.push(format!("{name} add_special={add} parse_special={parse} {:?}\n  ours      {got:?}\n  llama.cpp {want:?}", case.text));
                }
            }
        }
    }
    assert!(kinds.iter().any(|k| k.starts_with("SentencePiece")), "{kinds:?}");
    assert!(kinds.iter().any(|k| k.contains("Qwen2")), "{kinds:?}");
    assert!(kinds.iter().any(|k| k.contains("Llama3")), "{kinds:?}");
    assert!(failures.is_empty(), "{} of {checked} tokenisations differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn pieces_and_streamed_text_match_llama_cpp() {
    for (name, gguf, reference) in vocabularies() {
        let r = read_reference(&reference);
        let file = GgufFile::open(&gguf).expect("fixture");
        let tok = Tokenizer::from_gguf(&file).expect("tokenizer");
        assert_eq!(r.pieces.len(), tok.n_vocab(), "{name}");
        let mut bad = Vec::new();
        for (id, special, plain) in &r.pieces {
            let (s, p) = (tok.piece(*id, true).expect("piece"), tok.piece(*id, false).expect("piece"));
            if s != special.as_slice() || p != plain.as_slice() {
                bad.push(format!("{id}: ours {s:?} / {p:?}, llama.cpp {special:?} / {plain:?}"));
            }
        }
        assert!(bad.is_empty(), "{name}: {} pieces differ:\n{}", bad.len(), bad.join("\n"));

        // Streaming: fed one token at a time, the decoder's output is exactly the UTF-8 text of
        // llama.cpp's concatenated pieces, and never splits a character.
        for case in &r.cases {
            for (add, _, ids) in &case.modes[2..] {
                let mut dec = tok.decoder(true);
                let mut streamed = String::new();
                for &id in ids {
                    streamed += &dec.push(id).expect("push");
                }
                streamed += &dec.finish();
                let bytes: Vec<u8> = ids.iter().flat_map(|&id| r.pieces[id as usize].1.clone()).collect();
                assert_eq!(streamed, String::from_utf8_lossy(&bytes), "{name}: {:?}", case.text);
                if !add && matches!(tok.kind(), TokenizerKind::ByteLevelBpe(_)) {
                    // Byte-level BPE loses nothing: without BOS the text comes back exactly.
                    assert_eq!(streamed, case.text, "{name}");
                }
            }
        }
    }
}
