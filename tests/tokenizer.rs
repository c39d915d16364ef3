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

/// The chat templates of tests/data/chat/ rendered by `model::chat` byte for byte as
/// transformers' `apply_chat_template` renders them (tools/make_chat_references.py): real models'
/// templates and one of our own that uses the Jinja features they use, for every conversation with
/// and without the generation prompt, and a template's `raise_exception` as an error naming its
/// message.
#[test]
fn chat_templates_render_as_transformers() {
    use wgkernels::model::chat::{ChatTemplate, Message};
    use wgkernels::model::ModelError;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat");
    let unescape = |s: &str| s.replace("\\n", "\n").replace("\\\\", "\\");
    let mut conversations: Vec<(String, Vec<Message>)> = Vec::new();
    for line in std::fs::read_to_string(dir.join("conversations.txt")).expect("conversations.txt").lines().filter(|l| !l.starts_with('#')) {
        let (key, rest) = line.split_once(' ').expect("key and value");
        match key {
            "conversation" => conversations.push((rest.to_string(), Vec::new())),
            role => conversations.last_mut().expect("message before conversation").1.push(Message::new(role, unescape(rest))),
        }
    }
    // tools/make_chat_references.py pins strftime_now to 2026-11-28 09:05:03 UTC.
    const NOW: i64 = 1_795_856_703;
    let expected = std::fs::read(dir.join("expected.txt")).expect("expected.txt");
    let mut at = 0;
    let line = |at: &mut usize| -> Option<String> {
        let end = *at + expected[*at..].iter().position(|&b| b == b'\n')?;
        let l = String::from_utf8(expected[*at..end].to_vec()).expect("utf-8 header");
        *at = end + 1;
        Some(l)
    };
    let mut template = None;
    let (mut checked, mut errors, mut failures) = (0, 0, Vec::new());
    let mut templates = Vec::new();
    while let Some(header) = line(&mut at) {
        let f: Vec<&str> = header.split(' ').collect();
        match f[0] {
            "#" => {}
            "template" => {
                let source = std::fs::read_to_string(dir.join(f[1])).expect("template file");
                template = Some(ChatTemplate::new(&source, f[2], f[3]).unwrap_or_else(|e| panic!("{}: {e}", f[1])));
                templates.push(f[1].to_string());
            }
            "render" => {
                let (name, conv, gen, status, n) = (f[1], f[2], f[3] == "1", f[4], f[5].parse::<usize>().expect("length"));
                // The body follows the header line (its length counted after it has been read).
                let body = String::from_utf8(expected[at..at + n].to_vec()).expect("utf-8 body");
                at += n + 1;
                let messages = &conversations.iter().find(|c| c.0 == conv).expect("conversation").1;
                let got = template.as_ref().expect("template first").render_at(messages, gen, NOW);
                checked += 1;
                match (status, got) {
                    ("ok", Ok(text)) if text == body => {}
                    ("error", Err(ModelError::ChatTemplate(e))) if e.contains(&body) => errors += 1,
                    (_, got) => failures.push(format!("{name} {conv} add_generation_prompt={gen}:\n  ours         {got:?}\n  transformers {status} {body:?}")),
                }
            }
            other => panic!("expected.txt: unknown record {other}"),
        }
    }
    assert!(templates.len() >= 7 && checked >= 70, "{} templates, {checked} renderings", templates.len());
    assert!(errors >= 4, "the template errors were not checked ({errors})");
    assert!(failures.is_empty(), "{} of {checked} renderings differ:\n{}", failures.len(), failures.join("\n"));
}

/// Stop strings over streamed text: text that may start a stop string is held back until it
/// cannot, the earliest stop string wins (the longer at the same place), and a stop string split
/// across pieces (and inside a multi-byte character's neighbourhood) is found.
#[test]
fn stop_strings_hold_back_and_cut() {
    use wgkernels::model::chat::StopStrings;
    let stream = |stops: &[&str], pieces: &[&str]| {
        let mut s = StopStrings::new(&stops.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let mut shown = Vec::new();
        for p in pieces {
            let (text, stop) = s.push(p);
            shown.push(text);
            if let Some(stop) = stop {
                return (shown, Some(stop));
            }
        }
        shown.push(s.finish());
        (shown, None)
    };
    assert_eq!(stream(&["END"], &["ab", "cE", "N", "x"]), (vec!["ab".into(), "c".into(), "".into(), "ENx".into(), "".into()], None));
    assert_eq!(stream(&["END"], &["abE", "ND", "zz"]), (vec!["ab".into(), "".into()], Some("END".into())));
    assert_eq!(stream(&["<|x|>", "<|"], &["é<", "|x|>"]), (vec!["é".into(), "".into()], Some("<|x|>".into())));
    assert_eq!(stream(&["ab", "abc"], &["xabc"]), (vec!["x".into()], Some("abc".into())));
    assert_eq!(stream(&["世界"], &["a世", "b世界"]), (vec!["a".into(), "世b".into()], Some("世界".into())));
    assert_eq!(stream(&[""], &["a", "b"]), (vec!["a".into(), "b".into(), "".into()], None));
}
