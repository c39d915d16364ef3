//! The model runner end to end: synthetic llama / qwen2 files (random weights written with the
//! crate's GgufWriter) against an f64 CPU forward pass, and bad input -> typed errors.

mod common;
mod model_ref;

use model_ref::{build, Spec};
use wgkernels::formats::gguf::{GgufFile, GgufWriter, MetaValue};
use wgkernels::model::{Config, KvKind, Model, ModelError, Session, SessionOptions};
use wgkernels::Context;

fn load(ctx: &Context, w: &GgufWriter) -> Result<Model, ModelError> {
    let file = GgufFile::from_vec(w.to_bytes())?;
    Model::load(ctx, file, &mut |_| {})
}

/// Largest |gpu - ref| over a row, relative to the row's spread (max - min of the reference).
fn row_error(got: &[f32], want: &[f64]) -> f64 {
    let (lo, hi) = want.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    got.iter().zip(want).map(|(&g, &w)| if g.is_finite() { (g as f64 - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max) / (hi - lo)
}

fn prompt(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n).map(|_| rng.u32(0..vocab as u32)).collect()
}

/// Prefill in chunks (every position's logits), then decode steps, against the f64 reference.
/// Tolerance: the cache holds K and V in f16 (relative rounding 2^-11 of each element) and the
/// GPU sums in f32; through two layers that moves logits by well under 1% of their spread, while
/// a wrong position, pair layout, bias or GQA mapping moves them by tens of percent.
fn check_synthetic(spec: &Spec, kv: KvKind, tol: f64) {
    let ctx = common::context();
    let (w, reference) = build(spec, 42);
    let model = load(&ctx, &w).expect("load");
    let cfg = &model.config;
    assert_eq!((cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.vocab), (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.vocab));
    assert_eq!(cfg.layout, spec.layout());
    let tokens = prompt(13, spec.vocab, 3);
    let want = reference.forward(&tokens);
    // Prefill 10 tokens in chunks of 4 (4 + 4 + 2), then 3 decode steps.
    let mut s = Session::new(&ctx, &model, SessionOptions { context: 16, kv, chunk: 4, all_logits: true }).expect("session");
    let got = s.prefill(&ctx, &model, &tokens[..10]).expect("prefill");
    assert_eq!(got.len(), 10 * spec.vocab);
    let mut worst: f64 = 0.0;
    for (t, row) in got.chunks(spec.vocab).enumerate() {
        let e = row_error(row, &want[t]);
        assert!(e < tol, "{} {kv:?}: prefill position {t}: error {e:.2e} of the spread (tol {tol:.0e})", spec.arch);
        worst = worst.max(e);
    }
    for (t, &tok) in tokens.iter().enumerate().skip(10) {
        let row = s.decode(&ctx, &model, tok).expect("decode");
        let e = row_error(&row, &want[t]);
        assert!(e < tol, "{} {kv:?}: decode position {t}: error {e:.2e} of the spread (tol {tol:.0e})", spec.arch);
        worst = worst.max(e);
    }
    println!("{} {kv:?}: worst logit error {worst:.2e} of the spread", spec.arch);
    assert_eq!(s.kv().pos(), 13);
    // Only the last position's logits (one chunk of 10 at once) agree with the all-logits run.
    let mut s1 = Session::new(&ctx, &model, SessionOptions { context: 16, kv, chunk: 16, all_logits: false }).expect("session");
    let last = s1.prefill(&ctx, &model, &tokens[..10]).expect("prefill");
    assert_eq!(last.len(), spec.vocab);
    assert!(row_error(&last, &want[9]) < tol);
}

#[test]
fn llama_synthetic_matches_reference() {
    check_synthetic(&Spec::llama(), KvKind::F16, 5e-3);
}

#[test]
fn qwen2_synthetic_matches_reference() {
    check_synthetic(&Spec::qwen2(), KvKind::F16, 5e-3);
}

fn writer_without_key(spec: &Spec, key: &str) -> GgufWriter {
    let (w, _) = build(spec, 1);
    let file = GgufFile::from_vec(w.to_bytes()).unwrap();
    let mut out = GgufWriter::new();
    for (k, v) in file.metadata() {
        if k != key {
            out = out.metadata(k.clone(), v.clone());
        }
    }
    for t in file.tensors() {
        if t.name != key {
            out = out.tensor(t.name.clone(), &t.dims, t.ggml_type, file.tensor_data(t).unwrap().to_vec()).unwrap();
        }
    }
    out
}

#[test]
fn bad_files_are_typed_errors() {
    let ctx = common::context();
    let spec = Spec::llama();
    // Unknown architecture: named.
    let (w, _) = build(&spec, 1);
    let w = w.metadata("general.architecture", MetaValue::String("mamba".into()));
    let file = GgufFile::from_vec(w.to_bytes());
    // The writer keeps both keys; the reader rejects the duplicate: use a clean rewrite instead.
    assert!(file.is_err());
    let mut clean = writer_without_key(&spec, "general.architecture");
    clean = clean.metadata("general.architecture", MetaValue::String("mamba".into()));
    match Config::from_gguf(&GgufFile::from_vec(clean.to_bytes()).unwrap()) {
        Err(ModelError::UnknownArchitecture(a)) => assert_eq!(a, "mamba"),
        other => panic!("expected UnknownArchitecture, got {other:?}"),
    }
    // Missing key and missing tensor: named.
    match load(&ctx, &writer_without_key(&spec, "llama.attention.layer_norm_rms_epsilon")) {
        Err(ModelError::MissingKey(k)) => assert_eq!(k, "llama.attention.layer_norm_rms_epsilon"),
        other => panic!("expected MissingKey, got {:?}", other.err()),
    }
    match load(&ctx, &writer_without_key(&spec, "blk.1.ffn_up.weight")) {
        Err(ModelError::MissingTensor(k)) => assert_eq!(k, "blk.1.ffn_up.weight"),
        other => panic!("expected MissingTensor, got {:?}", other.err()),
    }
    // Truncated file: a format error from the reader, no panic.
    let (w, _) = build(&spec, 1);
    let bytes = w.to_bytes();
    for cut in [10, bytes.len() / 2, bytes.len() - 1] {
        let r = GgufFile::from_vec(bytes[..cut].to_vec()).map_err(ModelError::from).and_then(|f| Model::load(&ctx, f, &mut |_| {}));
        assert!(matches!(r, Err(ModelError::Format(_))), "cut at {cut}: {:?}", r.err());
    }
}

#[test]
fn context_limits_are_typed_errors() {
    let ctx = common::context();
    let (w, _) = build(&Spec::llama(), 5);
    let model = load(&ctx, &w).unwrap();
    let mut s = Session::new(&ctx, &model, SessionOptions { context: 8, kv: KvKind::F16, chunk: 4, all_logits: false }).unwrap();
    match s.prefill(&ctx, &model, &prompt(9, 61, 1)) {
        Err(ModelError::ContextFull { needed: 9, capacity: 8 }) => {}
        other => panic!("expected ContextFull, got {other:?}"),
    }
    assert_eq!(s.kv().pos(), 0, "nothing written");
    s.prefill(&ctx, &model, &prompt(7, 61, 1)).unwrap();
    s.decode(&ctx, &model, 3).unwrap();
    assert!(matches!(s.decode(&ctx, &model, 3), Err(ModelError::ContextFull { needed: 9, capacity: 8 })));
    assert!(matches!(s.prefill(&ctx, &model, &[1]), Err(ModelError::ContextFull { .. })));
    s.reset();
    assert!(matches!(s.prefill(&ctx, &model, &[61]), Err(ModelError::BadToken { token: 61, vocab: 61 })));
    assert!(
        matches!(Session::new(&ctx, &model, SessionOptions { context: 8, kv: KvKind::TurboQuant, chunk: 4, all_logits: false }), Err(ModelError::Argument(_))),
        "head dim 16 is below TurboQuant's 64"
    );
}
