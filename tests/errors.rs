//! Bad input returns typed errors before any dispatch: never a panic, never a GPU write.

mod common;

use wgkernels::formats::{self, gguf::GgmlType};
use wgkernels::kernels::int4::{self, HostInt4, Int4Matrix, Int4Mode};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::suite::Rng;
use wgkernels::{Context, ContextOptions, Error, GpuBuffer, Variant, VariantPolicy};

fn host(rng: &mut Rng, n: usize, k: usize, g: usize) -> HostInt4 {
    int4::random_host(rng, n, k, g, Int4Mode::Signed, false)
}

/// An `n x k` matrix of random valid blocks of the `int4` weight format.
fn int4_matrix(ctx: &Context, seed: u64, n: usize, k: usize) -> WeightMatrix {
    let f = &formats::int4::FORMAT;
    let bytes = (f.random_blocks)(&mut fastrand::Rng::with_seed(seed), n * k / f.block_weights);
    WeightMatrix::upload_format(ctx, f, n, k, &bytes).unwrap()
}

#[test]
fn int4_shape_and_argument_errors() {
    let ctx = common::context();
    let mut rng = Rng::new(1);
    assert!(matches!(Int4Matrix::alloc(&ctx, 4, 0, 32, Int4Mode::Signed), Err(Error::Shape(_))));
    assert!(matches!(Int4Matrix::alloc(&ctx, 0, 4, 32, Int4Mode::Signed), Err(Error::Shape(_))));
    assert!(matches!(Int4Matrix::alloc(&ctx, 4, 4, 0, Int4Mode::Signed), Err(Error::Argument(_))));

    let mut h = host(&mut rng, 5, 70, 32);
    h.scales.pop();
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "scales of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.zeros = Some(vec![0.0; 3]);
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "zeros of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.codes.truncate(5 * 35 - 1);
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "codes of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.k = 0;
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Shape(_))), "k = 0");
    // The int4 weight format holds signed, zero-less groups of a multiple of 32 only.
    assert!(host(&mut rng, 5, 70, 32).to_int4_blocks().is_err(), "k % 32 != 0");
    assert!(host(&mut rng, 5, 64, 48).to_int4_blocks().is_err(), "group size % 32 != 0");
    assert!(int4::random_host(&mut rng, 5, 64, 32, Int4Mode::Asymmetric, true).to_int4_blocks().is_err(), "zero points");
}

#[test]
fn int4_buffer_length_errors() {
    let ctx = common::context();
    let w = int4_matrix(&ctx, 2, 33, 96);
    let x_short = ctx.upload(&vec![1.0f32; 95]).unwrap();
    let x = ctx.upload(&vec![1.0f32; 96]).unwrap();
    let y_short = ctx.alloc::<f32>(32).unwrap();
    let y = ctx.alloc::<f32>(33).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(matmul::gemv(&mut b, &w, &x_short, &y), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(matmul::gemv(&mut b, &w, &x, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    assert!(matches!(matmul::gemm(&mut b, &w, &x, &y, 0), Err(Error::Shape(_))));
    assert!(matches!(matmul::gemm(&mut b, &w, &x, &y, 2), Err(Error::BufferTooSmall { .. })));
    let out = ctx.alloc::<f32>(33 * 96 - 1).unwrap();
    assert!(matches!(matmul::dequantize(&mut b, &w, &out), Err(Error::BufferTooSmall { .. })));
    let q = Int4Matrix::alloc(&ctx, 33, 100, 32, Int4Mode::Signed).unwrap();
    let src = ctx.upload(&vec![0.5f32; 33 * 100 - 1]).unwrap();
    assert!(matches!(int4::quantize(&mut b, &src, &q), Err(Error::BufferTooSmall { .. })));
    assert_eq!(b.len(), 0, "nothing may be recorded after a rejected call");
}

#[test]
fn required_variant_that_cannot_run_is_an_error() {
    let base = common::context();
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Native)));
    let w = int4_matrix(&ctx, 3, 4, 64);
    let x = ctx.upload(&[1.0f32; 64]).unwrap();
    let y = ctx.alloc::<f32>(4).unwrap();
    let r = matmul::gemv(&mut ctx.batch(), &w, &x, &y);
    assert!(matches!(r, Err(Error::Unsupported { variant: Variant::Native, .. })), "{r:?}");
    // The GEMM has no subgroup version: requiring one is an error, preferring one falls back.
    let gemm = &matmul::kernel_infos(&formats::int4::FORMAT).gemm;
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Subgroup)));
    assert!(matches!(ctx.variant_for(gemm), Err(Error::Unsupported { .. })));
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Prefer(Variant::Subgroup)));
    assert_eq!(ctx.variant_for(gemm).unwrap(), Variant::Portable);
}

/// A device whose storage-binding limit is small: a matrix whose single row is over it is
/// rejected with BindingTooLarge before anything is uploaded (wgpu would otherwise raise a
/// validation error); a larger matrix of short rows is split into row chunks and runs.
#[test]
fn binding_over_the_device_limit() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())).expect("adapter");
    let limits = wgpu::Limits { max_storage_buffer_binding_size: 64 << 10, ..wgpu::Limits::default() };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor { required_limits: limits, ..Default::default() })).expect("device");
    let ctx = Context::from_device(device, queue, ContextOptions::default()).unwrap();
    assert_eq!(ctx.caps().limits.max_storage_buffer_binding_size, 64 << 10);
    let k = 32 << 10; // one f32 row of 128 KiB
    let r = WeightMatrix::upload(&ctx, GgmlType::F32, 1, k, &vec![0u8; 4 * k]);
    assert!(matches!(r, Err(Error::BindingTooLarge { name: "weights row", .. })), "{:?}", r.err());
    // 256 x 1024 int4 weights (160 KiB): chunks within the limit (from an application-owned
    // device, without subgroups enabled).
    let w = int4_matrix(&ctx, 4, 256, 1024);
    assert!(w.chunks() > 1);
    let x = ctx.upload(&vec![1.0f32; 1024]).unwrap();
    let y = ctx.alloc::<f32>(256).unwrap();
    let mut b = ctx.batch();
    matmul::gemv(&mut b, &w, &x, &y).unwrap();
    b.run().unwrap();
}

#[test]
fn q8_activation_errors() {
    use wgkernels::kernels::q8::{self, Q8Activations};
    let ctx = common::context();
    assert!(matches!(Q8Activations::alloc(&ctx, 0), Err(Error::Shape(_))));
    assert!(matches!(Q8Activations::alloc(&ctx, 100), Err(Error::Shape(_))), "k % 32 != 0");
    let xq = Q8Activations::alloc(&ctx, 96).unwrap();
    assert!(!xq.has_q4k());
    let x_short = ctx.upload(&vec![1.0f32; 95]).unwrap();
    let y = ctx.alloc::<f32>(64).unwrap();
    let y_short = ctx.alloc::<f32>(4).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(q8::quantize_activations(&mut b, &x_short, &xq), Err(Error::BufferTooSmall { name: "x", .. })));
    // The dequantising path (int4): k mismatch, y too short.
    let w_128 = int4_matrix(&ctx, 8, 5, 128);
    assert!(matches!(matmul::gemv_q8(&mut b, &w_128, &xq, &y), Err(Error::Shape(_))), "k mismatch");
    let w = int4_matrix(&ctx, 9, 5, 96);
    assert!(matches!(matmul::gemv_q8(&mut b, &w, &xq, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    // The integer path (Q4_K): k mismatch (a 256-column matrix against 96- and 512-column
    // activations), y too short, several rows where the GEMV reads one.
    let f = &formats::q4k::FORMAT;
    let bytes = (f.random_blocks)(&mut fastrand::Rng::with_seed(10), 5);
    let wq = WeightMatrix::upload(&ctx, GgmlType::Q4_K, 5, 256, &bytes).unwrap();
    assert!(matches!(matmul::gemv_q8(&mut b, &wq, &xq, &y), Err(Error::Shape(_))));
    let xq512 = Q8Activations::alloc(&ctx, 512).unwrap();
    assert!(matches!(matmul::gemv_q8(&mut b, &wq, &xq512, &y), Err(Error::Shape(_))));
    let xq256 = Q8Activations::alloc(&ctx, 256).unwrap();
    assert!(matches!(matmul::gemv_q8(&mut b, &wq, &xq256, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    let xq_rows = Q8Activations::alloc_rows(&ctx, 256, 2).unwrap();
    assert!(matches!(matmul::gemv_q8(&mut b, &wq, &xq_rows, &y), Err(Error::Shape(_))));
    assert_eq!(b.len(), 0, "nothing may be recorded after a rejected call");
    // A context that requires Subgroup cannot quantise (Portable only): typed, not a panic.
    let sub = ctx.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Subgroup)));
    let x = sub.upload(&vec![1.0f32; 96]).unwrap();
    let mut b = sub.batch();
    assert!(matches!(q8::quantize_activations(&mut b, &x, &xq), Err(Error::Unsupported { .. })));
}

// ---- Reproducers of the public-API audit: each failed (corruption, panic, wrong result) before
// the host checks below existed; each must now give a typed error and leave buffers untouched.

/// Finding 1: a buffer of context B recorded into a batch of context A. wgpu resource ids of two
/// instances collide, so the dispatch used to overwrite A's unrelated `victim` buffer.
#[test]
fn foreign_buffer_is_a_typed_error_and_the_victim_is_untouched() {
    use wgkernels::kernels::elementwise;
    let ca = common::context();
    let cb = common::context();
    assert_ne!(ca.id(), cb.id());
    let victim = ca.upload(&[5.0f32; 64]).unwrap();
    let a = ca.upload(&[1.0f32; 64]).unwrap();
    let b = ca.upload(&[2.0f32; 64]).unwrap();
    let y = cb.alloc::<f32>(64).unwrap();
    let mut batch = ca.batch();
    assert_eq!(elementwise::add(&mut batch, &a, &b, &y, 64), Err(Error::ForeignBuffer { name: "y" }));
    assert_eq!(elementwise::add(&mut batch, &a, &cb.upload(&[1.0f32; 64]).unwrap(), &victim, 64), Err(Error::ForeignBuffer { name: "b" }));
    assert_eq!(batch.len(), 0);
    batch.run().unwrap();
    assert_eq!(ca.read(&victim).unwrap(), vec![5.0; 64], "victim changed");
    assert_eq!(ca.read(&y), Err(Error::ForeignBuffer { name: "read source" }));
    assert_eq!(ca.write(&y, &[1.0; 4]), Err(Error::ForeignBuffer { name: "write destination" }));
    assert_eq!(cb.read(&y).unwrap(), vec![0.0; 64]);
    // Contexts derived with with_options share the device and its buffers.
    let derived = ca.with_options(ContextOptions::default());
    let out = derived.alloc::<f32>(64).unwrap();
    let mut batch = derived.batch();
    elementwise::add(&mut batch, &a, &b, &out, 64).unwrap();
    batch.run().unwrap();
    assert_eq!(ca.read(&out).unwrap(), vec![3.0; 64]);
}

/// A bind cache is keyed by wgpu ids, which are only unique within one device: shared by two
/// contexts it used to hand one context's bind group to the other. It now belongs to its first
/// context.
#[test]
fn bind_cache_shared_across_contexts_is_rejected() {
    use wgkernels::batch::BindCache;
    use wgkernels::kernels::elementwise;
    let ca = common::context();
    let cb = common::context();
    let cache = BindCache::default();
    let (a, b, y) = (ca.upload(&[1.0f32; 8]).unwrap(), ca.upload(&[2.0f32; 8]).unwrap(), ca.alloc::<f32>(8).unwrap());
    let mut batch = ca.batch().with_cache(&cache);
    elementwise::add(&mut batch, &a, &b, &y, 8).unwrap();
    batch.run().unwrap();
    assert_eq!(ca.read(&y).unwrap(), vec![3.0; 8]);
    let victim = cb.upload(&[5.0f32; 8]).unwrap();
    let (a2, b2, y2) = (cb.upload(&[1.0f32; 8]).unwrap(), cb.upload(&[2.0f32; 8]).unwrap(), cb.alloc::<f32>(8).unwrap());
    let mut batch = cb.batch().with_cache(&cache);
    assert_eq!(elementwise::add(&mut batch, &a2, &b2, &y2, 8), Err(Error::ForeignBuffer { name: "BindCache" }));
    batch.run().unwrap();
    assert_eq!(cb.read(&victim).unwrap(), vec![5.0; 8]);
    assert_eq!(cb.read(&y2).unwrap(), vec![0.0; 8]);
}

/// Finding 4: a GEMV with `x == y` panicked inside wgpu (a buffer bound read-only and
/// read-write in one dispatch).
#[test]
fn gemv_aliased_input_and_output_is_a_typed_error() {
    let ctx = common::context();
    let w = int4_matrix(&ctx, 11, 64, 64);
    let x = ctx.upload(&vec![1.0f32; 64]).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(matmul::gemv(&mut b, &w, &x, &x), Err(Error::Aliased { .. })));
    assert_eq!(b.len(), 0);
}

fn attn_setup(ctx: &Context, kv_heads: usize, d: usize, keys: usize) -> (wgkernels::kernels::rope::RopeTable, GpuBuffer<f32>, GpuBuffer<f32>) {
    use wgkernels::kernels::rope::{RopeConfig, RopeScaling, RopeTable};
    let table = RopeTable::build(ctx, RopeConfig::new(d, 10000.0, RopeScaling::Default), 64).unwrap();
    let k = ctx.upload(&vec![0.25f32; keys * kv_heads * d]).unwrap();
    let v = ctx.upload(&vec![0.5f32; keys * kv_heads * d]).unwrap();
    (table, k, v)
}

/// Finding 4: `attention::prefill` with `q == out` panicked inside wgpu.
#[test]
fn prefill_aliased_q_and_out_is_a_typed_error() {
    use wgkernels::kernels::attention::{self, AttnShape, Prefill};
    use wgkernels::kernels::rope::PairLayout;
    let ctx = common::context();
    let (table, k, v) = attn_setup(&ctx, 2, 8, 4);
    let q = ctx.upload(&vec![1.0f32; 4 * 2 * 8]).unwrap();
    let a = Prefill {
        shape: AttnShape::new(2, 2, 8),
        tokens: 4,
        offset: 0,
        kv_len: 4,
        causal: true,
        k_rotated: false,
        layout: PairLayout::Interleaved,
        scale: None,
        window: None,
        softcap: None,
        q: &q,
        k: &k,
        v: &v,
        table: &table,
        out: &q,
    };
    let mut b = ctx.batch();
    assert!(matches!(attention::prefill(&mut b, &a), Err(Error::Aliased { .. })));
    assert_eq!(b.len(), 0);
}

/// Finding 2: a `kv_len` whose product with kv_heads * head_dim wraps to 25 keys' worth passed
/// the size checks (release) and the dispatch read far out of bounds; debug builds panicked.
#[test]
fn wrapping_kv_len_is_a_typed_error() {
    use wgkernels::kernels::attention::{self, AttnShape, DecodeAttention, DecodeScratch, Prefill};
    use wgkernels::kernels::rope::PairLayout;
    let ctx = common::context();
    let (kv_heads, d) = (3, 64); // kv_heads * d = 3 * 64: kv_len * 192 wraps to 25 * 64
    let kv_len = 25usize.wrapping_mul(0xAAAA_AAAA_AAAA_AAAB);
    assert_eq!(kv_len.wrapping_mul(kv_heads * d), 25 * 64);
    let (table, k, v) = attn_setup(&ctx, kv_heads, d, 25);
    let shape = AttnShape::new(3, kv_heads, d);
    let q = ctx.upload(&vec![1.0f32; 3 * d]).unwrap();
    let out = ctx.upload(&vec![7.0f32; 3 * d]).unwrap();
    let a = Prefill {
        shape,
        tokens: 1,
        offset: 0,
        kv_len,
        causal: false,
        k_rotated: true,
        layout: PairLayout::Interleaved,
        scale: None,
        window: None,
        softcap: None,
        q: &q,
        k: &k,
        v: &v,
        table: &table,
        out: &out,
    };
    let mut b = ctx.batch();
    assert!(matches!(attention::prefill(&mut b, &a), Err(Error::Shape(_))));
    let a = Prefill { offset: kv_len - 1, ..a };
    assert!(matches!(attention::prefill(&mut b, &a), Err(Error::Shape(_))));
    let a = Prefill { offset: usize::MAX, tokens: 2, kv_len: 25, ..a };
    assert!(matches!(attention::prefill(&mut b, &a), Err(Error::Shape(_))));
    let scratch = DecodeScratch::new(&ctx, shape).unwrap();
    let da = DecodeAttention { shape, q_rot: &q, k_cache: &k, v_cache: &v, kv_len, scale: None, window: None, softcap: None, scratch: &scratch, out: &out };
    assert!(matches!(attention::decode_attention(&mut b, &da), Err(Error::Shape(_))));
    assert_eq!(b.len(), 0);
    b.run().unwrap();
    assert_eq!(ctx.read(&out).unwrap(), vec![7.0; 3 * d]);
}

/// Finding 5: a NaN softmax scale gave an all-NaN output from attention decode (TurboQuant
/// already rejected it). Parameters must be finite (see the policy in wgkernels::error).
#[test]
fn non_finite_attention_scale_is_a_typed_error() {
    use wgkernels::kernels::attention::{self, AttnShape, DecodeAttention, DecodeScratch, Prefill};
    use wgkernels::kernels::rope::PairLayout;
    let ctx = common::context();
    let (table, k, v) = attn_setup(&ctx, 1, 8, 4);
    let shape = AttnShape::new(2, 1, 8);
    let q = ctx.upload(&[1.0f32; 2 * 8]).unwrap();
    let out = ctx.alloc::<f32>(2 * 8).unwrap();
    let scratch = DecodeScratch::new(&ctx, shape).unwrap();
    let mut b = ctx.batch();
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX] {
        let da = DecodeAttention { shape, q_rot: &q, k_cache: &k, v_cache: &v, kv_len: 4, scale: Some(bad), window: None, softcap: None, scratch: &scratch, out: &out };
        assert!(matches!(attention::decode_attention(&mut b, &da), Err(Error::Argument(_))), "decode scale {bad}");
        let a = Prefill {
            shape,
            tokens: 1,
            offset: 0,
            kv_len: 4,
            causal: true,
            k_rotated: false,
            layout: PairLayout::Interleaved,
            scale: Some(bad),
            window: None,
            softcap: None,
            q: &q,
            k: &k,
            v: &v,
            table: &table,
            out: &out,
        };
        assert!(matches!(attention::prefill(&mut b, &a), Err(Error::Argument(_))), "prefill scale {bad}");
    }
    assert_eq!(b.len(), 0);
    // A finite scale still runs and gives finite output.
    let da = DecodeAttention { shape, q_rot: &q, k_cache: &k, v_cache: &v, kv_len: 4, scale: Some(0.3), window: None, softcap: None, scratch: &scratch, out: &out };
    attention::decode_attention(&mut b, &da).unwrap();
    b.run().unwrap();
    assert!(ctx.read(&out).unwrap().iter().all(|x| (x - 0.5).abs() < 1e-5));
}

/// Finding 4: reading back an adopted buffer made without COPY_SRC panicked inside wgpu.
#[test]
fn reading_a_buffer_without_copy_src_is_a_typed_error() {
    let ctx = common::context();
    let raw = ctx.device().create_buffer(&wgkernels::wgpu::BufferDescriptor { label: None, size: 64, usage: wgkernels::wgpu::BufferUsages::STORAGE, mapped_at_creation: false });
    let buf = GpuBuffer::<f32>::from_raw(&ctx, raw, 16).unwrap();
    assert!(matches!(ctx.read(&buf), Err(Error::Argument(_))));
    assert!(matches!(ctx.write(&buf, &[1.0]), Err(Error::Argument(_))));
    // An odd-sized adopted buffer reads back its logical length.
    let raw = ctx.device().create_buffer(&wgkernels::wgpu::BufferDescriptor {
        label: None,
        size: 20,
        usage: wgkernels::wgpu::BufferUsages::STORAGE | wgkernels::wgpu::BufferUsages::COPY_SRC | wgkernels::wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let buf = GpuBuffer::<u8>::from_raw(&ctx, raw, 3).unwrap();
    assert_eq!(ctx.read(&buf).unwrap(), vec![0u8; 3]);
}

/// `From<FormatError>` and `source()`.
#[test]
fn format_errors_convert_with_their_source() {
    use std::error::Error as _;
    use wgkernels::formats::FormatError;
    let e: Error = FormatError::BadMagic(*b"ABCD").into();
    assert!(matches!(e, Error::FormatError(_)));
    assert!(e.source().is_some_and(|s| s.to_string().contains("magic")));
    assert_eq!(e.clone(), e);
}

/// Finding 5: Q4_K blocks with a non-finite `d` or `dmin` gave finite GPU results where the CPU
/// dequantiser gives NaN. Block scales are parameters: rejected at upload.
#[test]
fn q4k_non_finite_block_scales_are_rejected_at_upload() {
    let ctx = common::context();
    let good = (formats::q4k::FORMAT.random_blocks)(&mut fastrand::Rng::with_seed(5), 2);
    assert!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 2, 256, &good).is_ok());
    for (at, bits) in [(0usize, 0x7c00u16), (0, 0xfc00), (0, 0x7e00), (144 + 2, 0x7c00), (144 + 2, 0x7e01)] {
        let mut bad = good.clone();
        bad[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 2, 256, &bad), Err(Error::InvalidData(_))), "byte {at} = {bits:#x}");
    }
}

/// What an application writes: `?` on every kind of the crate's errors in a function returning
/// [`wgkernels::Result`] (a file error, a model error, a tokenizer error), and `?` on a
/// tokenizer call inside a decoding callback (which returns the model runner's `Result`).
fn greedy_text(path: &std::path::Path, prompt: &str, n: usize) -> wgkernels::Result<String> {
    use wgkernels::formats::gguf::GgufFile;
    use wgkernels::model::tokenizer::Tokenizer;
    use wgkernels::model::{Model, Session, SessionOptions};
    let ctx = common::context();
    let tok = Tokenizer::from_gguf(&GgufFile::open(path)?)?;
    let model = Model::open(&ctx, path, &mut |_| {})?;
    let mut session = Session::new(&ctx, &model, SessionOptions { context: 64, ..Default::default() })?;
    session.prefill(&ctx, &model, &tok.encode(prompt, true)?)?;
    let mut decoder = tok.decoder(false);
    let mut text = String::new();
    session.decode_greedy(&ctx, &model, n, |t| {
        text.push_str(&decoder.push(t)?);
        Ok(true)
    })?;
    Ok(text)
}

#[test]
fn errors_compose_with_question_mark() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models");
    greedy_text(&dir.join("llama-tiny-q8_0.gguf"), "Once upon a time", 4).expect("greedy text");
    // A missing file names its path, through every conversion.
    let missing = dir.join("no-such-model.gguf");
    let e = greedy_text(&missing, "x", 1).unwrap_err();
    assert!(e.to_string().contains("no-such-model.gguf"), "{e}");
    // Each error type converts both ways with the model runner's.
    use wgkernels::model::tokenizer::TokenizerError;
    use wgkernels::model::ModelError;
    let t = TokenizerError::TokenOutOfRange { id: 9, n_vocab: 3 };
    let m: ModelError = t.clone().into();
    let e: Error = m.into();
    assert_eq!(e, Error::Tokenizer(t.clone()));
    let back: ModelError = e.into();
    assert!(matches!(back, ModelError::Tokenizer(ref x) if *x == t));
    let e: Error = ModelError::MissingTensor("blk.0.attn_q.weight".into()).into();
    assert!(matches!(e, Error::Model(_)) && e.to_string().contains("blk.0.attn_q.weight"), "{e}");
    assert!(matches!(ModelError::from(e), ModelError::MissingTensor(ref n) if n == "blk.0.attn_q.weight"));
    let e: Error = ModelError::Gpu(Error::Shape("s".into())).into();
    assert_eq!(e, Error::Shape("s".into()));
}

/// Every message names its subject: a missing file its path, a directory that it is one, a
/// cut file that it is truncated, a wrong magic as text, a context too large its size.
#[test]
fn messages_name_their_subject() {
    use wgkernels::formats::gguf::GgufFile;
    use wgkernels::model::{Model, Session, SessionOptions};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models");
    let ctx = common::context();
    let msg = |e: &dyn std::fmt::Display| e.to_string();

    let e = Model::open(&ctx, dir.join("absent.gguf"), &mut |_| {}).err().expect("missing file");
    assert!(msg(&e).contains("absent.gguf"), "{e}");
    let e = GgufFile::open(&dir).expect_err("a directory");
    assert!(msg(&e).contains("is a directory") && msg(&e).contains("models"), "{e}");
    // SAFETY: the fixture directory is not written while the test runs.
    let e = unsafe { GgufFile::open_mapped(&dir) }.expect_err("a directory");
    assert!(msg(&e).contains("is a directory"), "{e}");

    let bytes = std::fs::read(dir.join("llama-tiny-q8_0.gguf")).unwrap();
    for cut in [bytes.len() - 100, bytes.len() / 2] {
        let e = GgufFile::from_vec(bytes[..cut].to_vec()).expect_err("truncated");
        assert!(msg(&e).contains("truncated"), "cut at {cut}: {e}");
    }
    let mut ggml = bytes[..64].to_vec();
    ggml[..4].copy_from_slice(b"GGML");
    let e = GgufFile::from_vec(ggml.clone()).expect_err("bad magic");
    assert!(msg(&e).contains("\"GGML\""), "{e}");
    // Through Model::open, a malformed file also names its path.
    let path = std::env::temp_dir().join(format!("wgkernels-bad-magic-{}.gguf", std::process::id()));
    std::fs::write(&path, &ggml).unwrap();
    let e = Model::open(&ctx, &path, &mut |_| {}).err().expect("bad magic");
    std::fs::remove_file(&path).unwrap();
    assert!(msg(&e).contains("\"GGML\"") && msg(&e).contains(path.to_str().unwrap()), "{e}");

    let model = Model::open(&ctx, dir.join("llama-tiny-q8_0.gguf"), &mut |_| {}).unwrap();
    let e = Session::new(&ctx, &model, SessionOptions { context: 1 << 30, ..Default::default() }).err().expect("context too large");
    assert!(msg(&e).contains("context of 1073741824") && !msg(&e).contains("wgkernels buffer"), "{e}");
}
