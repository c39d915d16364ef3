//! The model runner against hostile input: metadata that would size allocations or wrap
//! arithmetic, a session given another model, non-finite values on every activation path, and
//! values that would only fail mid-run. Each is a typed error at load (or NaN where the data
//! policy propagates it), never a panic, an abort or a silent wrong result.

mod common;
#[allow(dead_code)]
mod model_ref;

use model_ref::{build, Spec};
use wgkernels::formats::gguf::{GgmlType, GgufFile, GgufWriter, MetaValue};
use wgkernels::model::{Model, ModelError, Session, SessionOptions};
use wgkernels::Context;

/// A tensor replacing the one of its name: dims (`ne0` first), type and bytes.
type NewTensor<'a> = (&'a str, Vec<u64>, GgmlType, Vec<u8>);

/// `bytes` rewritten with the metadata keys of `set` replaced (or added) and the tensors of
/// `tensors` replaced.
fn edit(bytes: &[u8], set: &[(String, MetaValue)], tensors: &[NewTensor]) -> Vec<u8> {
    let file = GgufFile::from_vec(bytes.to_vec()).expect("parse");
    let mut out = GgufWriter::new();
    for (k, v) in file.metadata() {
        if !set.iter().any(|(s, _)| s == k) {
            out = out.metadata(k.clone(), v.clone());
        }
    }
    for (k, v) in set {
        out = out.metadata(k.clone(), v.clone());
    }
    for t in file.tensors() {
        out = match tensors.iter().find(|n| n.0 == t.name) {
            Some((name, dims, ty, data)) => out.tensor(*name, dims, *ty, data.clone()),
            None => out.tensor(t.name.clone(), &t.dims, t.ggml_type, file.tensor_data(t).unwrap().to_vec()),
        }
        .expect("tensor");
    }
    out.to_bytes()
}

fn load(ctx: &Context, bytes: Vec<u8>) -> Result<Model, ModelError> {
    Model::load(ctx, GgufFile::from_vec(bytes)?, &mut |_| {})
}

fn synthetic(spec: &Spec, seed: u64) -> Vec<u8> {
    build(spec, seed).0.to_bytes()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(model_ref::fixtures::dir().join(name)).expect("fixture")
}

fn expect_bad_key(r: Result<Model, ModelError>, key: &str) {
    match r {
        Err(ModelError::BadKey { key: k, reason }) => assert_eq!(k, key, "{reason}"),
        other => panic!("expected BadKey {key:?}, got {:?}", other.err()),
    }
}

fn expect_bad_tensor(r: Result<Model, ModelError>, name: &str) {
    match r {
        Err(ModelError::BadTensor { name: n, reason }) => assert_eq!(n, name, "{reason}"),
        other => panic!("expected BadTensor {name:?}, got {:?}", other.err()),
    }
}

/// heads x head_dim that wraps in 64 bits to the file's real q width (2^60 + 4 heads of 16 is
/// 2^64 + 64): a checked product names the key, in debug and release builds alike.
#[test]
fn head_count_times_head_dim_is_checked() {
    let ctx = common::context();
    let bytes = synthetic(&Spec::llama(), 1);
    let set = [("llama.attention.head_count".to_string(), MetaValue::U64((1 << 60) + 4)), ("llama.attention.key_length".to_string(), MetaValue::U32(16))];
    expect_bad_key(load(&ctx, edit(&bytes, &set, &[])), "llama.attention.head_count");
}

/// A session made for one model, given another: of more layers (it indexed past its cache), or
/// of the same shape (it ran with the wrong weights, silently): a typed error from every entry.
#[test]
fn session_rejects_another_model() {
    let ctx = common::context();
    let a = load(&ctx, synthetic(&Spec::llama(), 1)).unwrap();
    let same_shape = load(&ctx, synthetic(&Spec::llama(), 2)).unwrap();
    let deeper = load(&ctx, synthetic(&Spec { layers: 3, ..Spec::llama() }, 3)).unwrap();
    let opts = SessionOptions { context: 16, chunk: 4, ..Default::default() };
    let mut s = Session::new(&ctx, &a, opts).unwrap();
    s.prefill(&ctx, &a, &[1, 2]).unwrap();
    for other in [&same_shape, &deeper] {
        let foreign = |r: Result<(), ModelError>, what: &str| assert!(matches!(r, Err(ModelError::ForeignModel)), "{what}: {:?}", r.err());
        foreign(s.prefill(&ctx, other, &[1, 2]).map(drop), "prefill");
        foreign(s.decode(&ctx, other, 3).map(drop), "decode");
        foreign(s.decode_stream(&ctx, other, 3, |_| Ok(None)).map(drop), "decode_stream");
        foreign(s.decode_stream_top_k(&ctx, other, 3, 4, |_| Ok(None)).map(drop), "decode_stream_top_k");
        foreign(s.decode_greedy(&ctx, other, 2, |_| Ok(true)).map(drop), "decode_greedy");
        let mut sampler = wgkernels::model::Sampler::new(wgkernels::model::SamplerConfig { temperature: 1.0, ..Default::default() }).unwrap();
        foreign(s.decode_sampled(&ctx, other, &mut sampler, 2, |_| Ok(true)).map(drop), "decode_sampled");
        foreign(s.warm_up(&ctx, other, 2), "warm_up");
        foreign(s.record_decode(&mut ctx.batch(), other, 2), "record_decode");
        foreign(s.record_chunk(&mut ctx.batch(), other, 2, 2, false), "record_chunk");
    }
    // The session is intact: it goes on with its own model.
    assert_eq!(s.kv().pos(), 2);
    assert!(s.decode(&ctx, &a, 3).unwrap().iter().all(|v| v.is_finite()));
}

/// A NaN in a norm weight: the f32 path's logits are NaN, and so are the int8-activation path's
/// (decode step and a short prefill chunk), which used to drop the NaN in the block maximum.
#[test]
fn nan_propagates_through_int8_activations() {
    let ctx = common::context();
    let bytes = fixture("llama-tiny-q8_0.gguf");
    let mut w = vec![1f32; 256];
    w[3] = f32::NAN;
    let bytes = edit(&bytes, &[], &[("blk.0.ffn_norm.weight", vec![256], GgmlType::F32, bytemuck::cast_slice(&w).to_vec())]);
    let model = load(&ctx, bytes).unwrap();
    for int8 in [false, true] {
        let opts = SessionOptions { context: 16, int8_activations: int8, ..Default::default() };
        let mut s = Session::new(&ctx, &model, opts).unwrap();
        let prefill = s.prefill(&ctx, &model, &[1, 5, 9]).unwrap();
        let decode = s.decode(&ctx, &model, 7).unwrap();
        for (what, logits) in [("prefill", &prefill), ("decode", &decode)] {
            assert!(logits.iter().all(|v| v.is_nan()), "int8 {int8}, {what}: {} of {} logits finite", logits.iter().filter(|v| v.is_finite()).count(), logits.len());
        }
    }
}

/// An untied embedding table with a NaN block scale is rejected at load, naming it, whether or
/// not a prompt uses the row (it was read unchecked row by row).
#[test]
fn untied_embedding_scales_are_validated_at_load() {
    let ctx = common::context();
    let bytes = fixture("llama-tiny-q8_0.gguf");
    let file = GgufFile::from_vec(bytes.clone()).unwrap();
    let t = file.tensor("token_embd.weight").unwrap();
    assert_eq!(t.ggml_type, GgmlType::Q8_0);
    let mut data = file.tensor_data(t).unwrap().to_vec();
    // Q8_0 blocks of 34 bytes, the f16 scale first: block 17's scale becomes NaN.
    data[17 * 34..17 * 34 + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
    let dims = t.dims.clone();
    let bad = edit(&bytes, &[], &[("token_embd.weight", dims, GgmlType::Q8_0, data)]);
    expect_bad_tensor(load(&ctx, bad), "token_embd.weight");
}

/// Values that used to pass load and fail mid-run: an eps finite as f64 but infinite as f32, a
/// negative YaRN factor, an embedding table of a type the CPU cannot dequantise.
#[test]
fn late_failures_are_rejected_at_load() {
    let ctx = common::context();
    let llama = synthetic(&Spec::llama(), 1);
    let eps = [("llama.attention.layer_norm_rms_epsilon".to_string(), MetaValue::F64(1e300))];
    expect_bad_key(load(&ctx, edit(&llama, &eps, &[])), "llama.attention.layer_norm_rms_epsilon");

    let qwen = synthetic(&Spec::qwen2(), 1);
    let yarn = |factor: f64| {
        [
            ("qwen2.rope.scaling.type".to_string(), MetaValue::String("yarn".into())),
            ("qwen2.rope.scaling.factor".to_string(), MetaValue::F64(factor)),
            ("qwen2.rope.scaling.original_context_length".to_string(), MetaValue::U32(256)),
        ]
    };
    expect_bad_key(load(&ctx, edit(&qwen, &yarn(-2.0), &[])), "qwen2.rope.scaling.factor");
    assert!(load(&ctx, edit(&qwen, &yarn(4.0), &[])).is_ok(), "a valid YaRN factor loads");

    // IQ4_NL has a known size (so the file parses) but no weight format.
    let (hidden, vocab) = (64u64, 61u64);
    let rows = vec![0u8; (vocab * hidden / 32 * 18) as usize];
    let r = load(&ctx, edit(&llama, &[], &[("token_embd.weight", vec![hidden, vocab], GgmlType::IQ4_NL, rows)]));
    expect_bad_tensor(r, "token_embd.weight");
}

/// GPU int4 quantisation of a NaN weight: the group's scale is NaN (its values and the GEMV
/// outputs reading it are NaN, never finite), and `check_finite` gives the typed error the CPU
/// quantiser gives.
#[test]
fn int4_gpu_quantize_of_nan_is_typed() {
    use wgkernels::kernels::int4::{self, Int4Matrix, Int4Mode};
    let ctx = common::context();
    let (n, k) = (4, 128);
    for mode in [Int4Mode::Signed, Int4Mode::Asymmetric] {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut src: Vec<f32> = (0..n * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0).collect();
            src[k + 70] = bad; // row 1, group 2 of 4
            let dst = Int4Matrix::alloc(&ctx, n, k, 32, mode).unwrap();
            let mut b = ctx.batch();
            int4::quantize(&mut b, &ctx.upload(&src).unwrap(), &dst).unwrap();
            b.submit().unwrap().wait().unwrap();
            let host = dst.download(&ctx).unwrap();
            for i in 0..n * k {
                let v = host.value(i / k, i % k);
                let in_group = i / k == 1 && (i % k) / 32 == 2;
                assert_eq!(v.is_nan(), in_group, "{mode:?} {bad}: value {i} = {v}");
            }
            match dst.check_finite(&ctx) {
                Err(wgkernels::Error::FormatError(e)) => assert!(matches!(*e, wgkernels::formats::FormatError::NonFiniteScale { block: 6 }), "{}", *e),
                other => panic!("{mode:?} {bad}: expected NonFiniteScale, got {other:?}"),
            }
        }
    }
}

/// The int8 activation quantiser and its CPU reference: a block holding a NaN or an infinity
/// gets the scale NaN and codes 0 (the GPU's words equal the reference's, bit for bit), the
/// other blocks are untouched.
#[test]
fn q8_quantiser_marks_non_finite_blocks() {
    use wgkernels::kernels::q8::{self, Q8Activations};
    use wgkernels::reference::q8 as r;
    let ctx = common::context();
    let k = 512;
    let mut x: Vec<f32> = (0..k).map(|i| ((i * 53 % 97) as f32 - 48.0) / 16.0).collect();
    x[5] = f32::NAN; // block 0
    x[32 * 9 + 31] = f32::INFINITY; // block 9
    x[32 * 15] = f32::NEG_INFINITY; // block 15
    let want = r::quantize(&x);
    for (b, d) in want.d.iter().enumerate() {
        assert_eq!(d.is_nan(), [0, 9, 15].contains(&b), "reference block {b}: d = {d}");
    }
    assert!(want.q[..32].iter().all(|&q| q == 0));
    let xq = Q8Activations::alloc(&ctx, k).unwrap();
    let mut b = ctx.batch();
    q8::quantize_activations(&mut b, &ctx.upload(&x).unwrap(), &xq).unwrap();
    b.submit().unwrap().wait().unwrap();
    assert_eq!(ctx.read(xq.int4_words()).unwrap(), r::pack_int4(&want), "INT4-order words");
    assert_eq!(ctx.read(xq.q4k_words().unwrap()).unwrap(), r::pack_q4k(&want), "Q4_K-order words");
}

/// What an architecture asks for and the runner does not implement, or describes wrongly, is a
/// typed error when the file is read, naming the architecture and the piece or the key/tensor:
/// partial rotary embeddings (qwen3), a LongRoPE factor table of the wrong length and a
/// negative attention factor (phi3); an unknown architecture lists the implemented ones.
#[test]
fn architecture_pieces_are_typed_errors() {
    use wgkernels::model::Config;
    let cfg = |bytes: Vec<u8>| Config::from_gguf(&GgufFile::from_vec(bytes).unwrap());
    let qwen3 = synthetic(&Spec::qwen3(), 1);
    match cfg(edit(&qwen3, &[("qwen3.rope.dimension_count".into(), MetaValue::U32(16))], &[])) {
        Err(ModelError::Unsupported { arch, what }) => assert!(arch == "qwen3" && what.contains("partial rotary"), "{arch}: {what}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let phi3 = synthetic(&Spec::phi3(), 1);
    assert!(cfg(phi3.clone()).is_ok());
    let short = (vec![7u64], GgmlType::F32, vec![0u8; 28]);
    match cfg(edit(&phi3, &[], &[("rope_factors_long.weight", short.0, short.1, short.2)])) {
        Err(ModelError::BadTensor { name, .. }) => assert_eq!(name, "rope_factors_long.weight"),
        other => panic!("expected BadTensor, got {other:?}"),
    }
    match cfg(edit(&phi3, &[("phi3.rope.scaling.attn_factor".into(), MetaValue::F32(-1.0))], &[])) {
        Err(ModelError::BadKey { key, .. }) => assert_eq!(key, "phi3.rope.scaling.attn_factor"),
        other => panic!("expected BadKey, got {other:?}"),
    }
    let e = cfg(edit(&qwen3, &[("general.architecture".into(), MetaValue::String("mamba".into()))], &[])).unwrap_err();
    assert!(matches!(&e, ModelError::UnknownArchitecture(a) if a == "mamba"), "{e:?}");
    assert!(e.to_string().contains("llama, qwen2, qwen3, phi3"), "{e}");
}
