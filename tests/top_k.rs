//! The GPU top-k (`model::ops::top_k`) against a full sort on the CPU and against the CPU
//! sampler's own top-k, with poisoned guard regions; and sampled decoding from the GPU's
//! candidates (`Session::decode_stream_top_k`) against sampling the read-back logits.

mod common;
#[allow(dead_code)]
mod model_ref;

use model_ref::{build, Spec};
use wgkernels::formats::gguf::GgufFile;
use wgkernels::model::ops::{self, TOP_K_MAX};
use wgkernels::model::{KvKind, Model, ModelError, Sampler, SamplerConfig, Session, SessionOptions};
use wgkernels::Context;

const POISON: u32 = 0xdead_beef;
const GUARD: usize = 64;

/// The top-k of `row` by a full sort: finite logits, larger first, the lower id first among
/// equal ones (-0 equals +0), the first `k`.
fn reference(row: &[f32], k: usize) -> Vec<(f32, u32)> {
    let mut all: Vec<(f32, u32)> = row.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)).collect();
    all.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
    all.truncate(k);
    all
}

/// Random logits with many ties (a few distinct values), signed zeros, subnormals, NaN and
/// +-inf.
fn tied_row(r: &mut fastrand::Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| match r.u32(0..40) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => -0.0,
            4 => 0.0,
            5 => f32::from_bits(1 + r.u32(0..3)),
            6 => f32::from_bits(0x8000_0001 + r.u32(0..3)),
            7 => f32::MAX,
            8 => f32::MIN,
            _ => r.i32(-6..6) as f32 * 0.5,
        })
        .collect()
}

/// Run `ops::top_k` on `row` placed at `off` in a buffer whose other elements are +inf and
/// large finite values (which must not be picked), with poisoned guards after `out` and each
/// scratch; returns the candidates, and checks the guards.
fn gpu_top_k(ctx: &Context, row: &[f32], off: usize, k: usize) -> Vec<(f32, u32)> {
    let n = row.len();
    let mut buf: Vec<f32> = (0..off + n + GUARD).map(|i| if i % 2 == 0 { 1e30 } else { f32::INFINITY }).collect();
    buf[off..off + n].copy_from_slice(row);
    let src = ctx.upload(&buf).unwrap();
    let s_len = ops::top_k_scratch_len(n, k).unwrap();
    let scratch = [ctx.upload(&vec![POISON; s_len + GUARD]).unwrap(), ctx.upload(&vec![POISON; s_len + GUARD]).unwrap()];
    let out = ctx.upload(&vec![POISON; 2 * k + GUARD]).unwrap();
    let mut b = ctx.batch();
    ops::top_k(&mut b, &src, off, n, k, [&scratch[0], &scratch[1]], &out).unwrap();
    b.run().unwrap();
    let words = ctx.read(&out).unwrap();
    assert!(words[2 * k..].iter().all(|&w| w == POISON), "n {n} k {k}: write past the output");
    for (i, s) in scratch.iter().enumerate() {
        assert!(ctx.read(s).unwrap()[s_len..].iter().all(|&w| w == POISON), "n {n} k {k}: write past scratch {i}");
    }
    let mut got = Vec::new();
    ops::top_k_candidates(&words[..2 * k], &mut got);
    // Empty slots only after the candidates.
    let filled = words[..2 * k].chunks(2).take_while(|w| w[1] != ops::TOP_K_NONE).count();
    assert_eq!(filled, got.len(), "n {n} k {k}: an empty slot among the candidates");
    got
}

fn bits(v: &[(f32, u32)]) -> Vec<(u32, u32)> {
    v.iter().map(|&(x, i)| (x.to_bits(), i)).collect()
}

/// Exactly the full sort's k best, in rank order, bit for bit (signed zeros kept), over odd
/// sizes (several levels above 1024 entries, a two-level and a three-level one), k up to the
/// maximum and above the row's length; and the CPU sampler draws the same tokens from them as
/// from the row.
#[test]
fn top_k_matches_a_full_sort() {
    let ctx = common::context();
    let mut r = fastrand::Rng::with_seed(17);
    let mut cases = 0;
    for (n, off) in [(1usize, 0usize), (7, 3), (1000, 5), (1024, 0), (1025, 1), (5000, 2), (40_003, 0), (300_001, 7)] {
        for k in [1usize, 3, 40, TOP_K_MAX] {
            if n == 300_001 && k != 40 && k != TOP_K_MAX {
                continue;
            }
            let row = tied_row(&mut r, n);
            let got = gpu_top_k(&ctx, &row, off, k);
            let want = reference(&row, k);
            assert_eq!(bits(&got), bits(&want), "n {n} offset {off} k {k}");
            // The CPU sampler's one-pass top-k keeps the same set: the same draws.
            let cfg = SamplerConfig { temperature: 0.8, top_k: k, top_p: 0.95, seed: cases };
            let (mut a, mut b) = (Sampler::new(cfg).unwrap(), Sampler::new(cfg).unwrap());
            for _ in 0..8 {
                assert_eq!(b.sample_top_k(&got).unwrap(), a.sample(&row).unwrap(), "n {n} k {k}: sampled token");
            }
            cases += 1;
        }
    }
    // Rows made of one value (ties everywhere: ids 0..k), ascending and descending rows, all
    // NaN / all infinite (no candidates), one finite logit among NaN, signed zeros, subnormals.
    for n in [3usize, 700, 3000] {
        let flat = vec![0.25f32; n];
        let asc: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let desc: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
        let mut one = vec![f32::NAN; n];
        one[n / 2] = -3.0;
        let inf: Vec<f32> = (0..n).map(|i| if i % 2 == 0 { f32::INFINITY } else { f32::NEG_INFINITY }).collect();
        // -0 equals +0 (the lower id wins), the smallest subnormals rank as their values.
        let zeros: Vec<f32> = (0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect();
        let tiny: Vec<f32> = (0..n).map(|i| [0.0, f32::from_bits(1), -0.0, f32::from_bits(0x8000_0001)][i % 4]).collect();
        let rows = [("flat", flat), ("ascending", asc), ("descending", desc), ("one finite", one), ("nan", vec![f32::NAN; n]), ("inf", inf), ("zeros", zeros), ("subnormal", tiny)];
        for (name, row) in rows {
            for k in [1, 40, TOP_K_MAX] {
                assert_eq!(bits(&gpu_top_k(&ctx, &row, 0, k)), bits(&reference(&row, k)), "{name} n {n} k {k}");
            }
        }
    }
}

/// Bad k, an empty row, a row past its buffer, a short output or scratch: typed errors, nothing
/// recorded.
#[test]
fn top_k_bad_input_is_an_error() {
    let ctx = common::context();
    let src = ctx.upload(&vec![1.0f32; 3000]).unwrap();
    let s_len = ops::top_k_scratch_len(3000, 8).unwrap();
    assert_eq!(s_len, 2 * 3 * 8);
    assert_eq!(ops::top_k_scratch_len(1024, TOP_K_MAX).unwrap(), 0);
    let scratch = [ctx.alloc::<u32>(s_len).unwrap(), ctx.alloc::<u32>(s_len).unwrap()];
    let small = ctx.alloc::<u32>(s_len - 1).unwrap();
    let out = ctx.alloc::<u32>(2 * TOP_K_MAX).unwrap();
    let short_out = ctx.alloc::<u32>(2 * 8 - 1).unwrap();
    let mut b = ctx.batch();
    let sc = [&scratch[0], &scratch[1]];
    assert!(ops::top_k(&mut b, &src, 0, 3000, 0, sc, &out).is_err(), "k = 0");
    assert!(ops::top_k(&mut b, &src, 0, 3000, TOP_K_MAX + 1, sc, &out).is_err(), "k above the maximum");
    assert!(ops::top_k(&mut b, &src, 0, 0, 8, sc, &out).is_err(), "n = 0");
    assert!(ops::top_k(&mut b, &src, 1, 3000, 8, sc, &out).is_err(), "row past the buffer");
    assert!(ops::top_k(&mut b, &src, usize::MAX, 2, 8, sc, &out).is_err(), "offset overflow");
    assert!(ops::top_k(&mut b, &src, 0, 3000, 8, [&scratch[0], &small], &out).is_err(), "short scratch");
    assert!(ops::top_k(&mut b, &src, 0, 3000, 8, sc, &short_out).is_err(), "short output");
    assert!(ops::top_k(&mut b, &src, 0, 3000, TOP_K_MAX, sc, &out).is_err(), "scratch sized for a smaller k");
    assert_eq!(b.len(), 0);
    assert!(ops::top_k_scratch_len(usize::MAX, TOP_K_MAX).is_err());
    ops::top_k(&mut b, &src, 0, 3000, 8, sc, &out).unwrap();
    assert_eq!(b.len(), 2, "3000 logits: two levels");
}

/// Sampling from the GPU's candidates (`decode_stream_top_k` + `Sampler::sample_top_k`) gives
/// the token stream of sampling the read-back logits (`decode_stream` + `Sampler::sample`) for
/// the same seed (temperature 0.8, top-k 40, top-p 0.95), and each step's candidates are the
/// exact top-40 of that step's logits; k above the vocabulary gives every logit; a bad k is an
/// error before anything runs.
#[test]
fn sampling_from_gpu_candidates_matches_the_logits_path() {
    let ctx = common::context();
    let spec = Spec::llama();
    let (w, _) = build(&spec, 23);
    let model = Model::load(&ctx, GgufFile::from_vec(w.to_bytes()).unwrap(), &mut |_| {}).unwrap();
    let opts = SessionOptions { context: 24, kv: KvKind::F16, chunk: 4, all_logits: false, ..Default::default() };
    let p: Vec<u32> = {
        let mut r = fastrand::Rng::with_seed(4);
        (0..5).map(|_| r.u32(0..spec.vocab as u32)).collect()
    };
    let steps = 12;
    for seed in [1u64, 2, 3] {
        let cfg = SamplerConfig { temperature: 0.8, top_k: 40, top_p: 0.95, seed };
        // The logits path.
        let mut a = Session::new(&ctx, &model, opts).unwrap();
        let mut sa = Sampler::new(cfg).unwrap();
        let first = sa.sample(&a.prefill(&ctx, &model, &p).unwrap()).unwrap();
        let mut want = vec![first];
        let mut rows = Vec::new();
        a.decode_stream(&ctx, &model, first, |l| {
            rows.push(l.to_vec());
            want.push(sa.sample(l)?);
            Ok((want.len() <= steps).then(|| *want.last().unwrap()))
        })
        .unwrap();
        // The candidates path.
        let mut b = Session::new(&ctx, &model, opts).unwrap();
        let mut sb = Sampler::new(cfg).unwrap();
        let first_b = sb.sample(&b.prefill(&ctx, &model, &p).unwrap()).unwrap();
        let mut got = vec![first_b];
        let mut step = 0;
        b.decode_stream_top_k(&ctx, &model, first_b, 40, |c| {
            assert_eq!(bits(c), bits(&reference(&rows[step], 40)), "seed {seed} step {step}: candidates");
            step += 1;
            got.push(sb.sample_top_k(c)?);
            Ok((got.len() <= steps).then(|| *got.last().unwrap()))
        })
        .unwrap();
        assert_eq!(got, want, "seed {seed}: sampled tokens");
        assert_eq!(got.len(), steps + 1);
        assert_eq!(b.kv().pos(), a.kv().pos());
        // The session goes on: the next decode's logits agree with the logits path's.
        assert_eq!(b.decode(&ctx, &model, 3).unwrap(), a.decode(&ctx, &model, 3).unwrap(), "seed {seed}: logits after");
    }
    // k above the vocabulary: every logit, in rank order; one step, then stop.
    let mut s = Session::new(&ctx, &model, opts).unwrap();
    let mut t = Session::new(&ctx, &model, opts).unwrap();
    s.prefill(&ctx, &model, &p).unwrap();
    t.prefill(&ctx, &model, &p).unwrap();
    let row = t.decode(&ctx, &model, 7).unwrap();
    let mut seen = Vec::new();
    let ran = s
        .decode_stream_top_k(&ctx, &model, 7, 100, |c| {
            seen.push(bits(c));
            Ok(None)
        })
        .unwrap();
    assert_eq!(ran, 1);
    assert_eq!(seen, vec![bits(&reference(&row, 100))]);
    assert_eq!(seen[0].len(), spec.vocab);
    for k in [0, TOP_K_MAX + 1] {
        assert!(matches!(s.decode_stream_top_k(&ctx, &model, 1, k, |_| Ok(None)), Err(ModelError::Argument(_))), "k = {k}");
    }
    assert_eq!(s.kv().pos(), t.kv().pos(), "a bad k runs nothing");
    assert!(matches!(s.decode_stream_top_k(&ctx, &model, 99, 40, |_| Ok(None)), Err(ModelError::BadToken { token: 99, .. })));
}
