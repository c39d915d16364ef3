//! Property test over every public kernel entry point: random and extreme sizes, offsets and
//! positions (0, 1, u32::MAX ± 1, usize::MAX-ish, values whose products wrap, just over a buffer
//! or a limit). Each call must either return a typed error and record nothing, or record work
//! that, once run, leaves the guard regions of its outputs intact; random valid small shapes are
//! also compared with the CPU reference.
//!
//! Adding a family = one `fn family(env: &mut Env)` and one line in [`FAMILIES`].

mod common;

use wgkernels::kernels::attention::{self, AttnShape, Decode, DecodeAttention, DecodeScratch, Prefill};
use wgkernels::kernels::rope::{self, PairLayout, Positions, RopeConfig, RopeScaling, RopeTable};
use wgkernels::kernels::{elementwise, int4, q8, turboquant};
use wgkernels::suite::{self, Rng, POISON_F32};
use wgkernels::{Batch, Context, Error, GpuBuffer};

/// A family's entry points under test (see the module docs).
type Family = fn(&mut Env);

const FAMILIES: &[(&str, Family)] = &[
    ("elementwise", elementwise_family),
    ("rope", rope_family),
    ("attention", attention_family),
    ("turboquant", turboquant_family),
    ("int4", int4_family),
    ("q8", q8_family),
    ("matmul", matmul_family),
];

/// The wrapping reproducer of the audit: 25 * this wraps to 25 / 3 of a multiple of 3.
const WRAPS: usize = 25usize.wrapping_mul(0xAAAA_AAAA_AAAA_AAAB);

const EXTREMES: [usize; 16] = [
    0,
    1,
    2,
    3,
    257,
    u32::MAX as usize - 1,
    u32::MAX as usize,
    u32::MAX as usize + 1,
    1 << 32,
    1 << 48,
    usize::MAX / 2,
    usize::MAX / 3,
    usize::MAX - 1,
    usize::MAX,
    WRAPS,
    WRAPS.wrapping_add(1),
];

pub struct Env {
    ctx: Context,
    rng: Rng,
    /// Calls that returned a typed error / that ran (guards checked) / reference comparisons.
    rejected: usize,
    ran: usize,
    compared: usize,
}

impl Env {
    /// An extreme value or, half the time, a small random one around `near`.
    fn size(&mut self, near: usize) -> usize {
        if self.rng.u32(2) == 0 {
            EXTREMES[self.rng.u32(EXTREMES.len() as u32) as usize]
        } else {
            let d = self.rng.u32(5) as usize;
            if self.rng.u32(2) == 0 {
                near.saturating_sub(d)
            } else {
                near + d
            }
        }
    }

    /// `call` records into a fresh batch. Either it fails with a typed error and records
    /// nothing, or the batch runs and every `(buffer, len)` in `outputs` keeps its poison after
    /// element `len` (the guard region).
    fn call(&mut self, what: &str, outputs: &[(&GpuBuffer<f32>, usize)], call: impl FnOnce(&mut Batch) -> wgkernels::Result<()>) {
        let mut b = self.ctx.batch();
        match call(&mut b) {
            Err(e) => {
                assert_eq!(b.len(), 0, "{what}: {e} but {} dispatches recorded", b.len());
                assert!(!matches!(e, Error::Device(_) | Error::Readback(_)), "{what}: {e}");
                self.rejected += 1;
            }
            Ok(()) => {
                b.run().unwrap_or_else(|e| panic!("{what}: run failed: {e}"));
                for (buf, len) in outputs {
                    let out = self.ctx.read(buf).unwrap();
                    assert_eq!(suite::guard_damage(&out, *len, POISON_F32), 0, "{what}: guard region after {len} damaged");
                }
                self.ran += 1;
            }
        }
    }

    fn guarded(&self, len: usize) -> GpuBuffer<f32> {
        suite::guarded_f32(&self.ctx, len).unwrap()
    }

    fn data(&mut self, len: usize) -> (Vec<f32>, GpuBuffer<f32>) {
        let v = self.rng.uniform_vec(len, -1.0, 1.0);
        let b = self.ctx.upload(&v).unwrap();
        (v, b)
    }

    fn compare(&mut self, what: &str, out: &GpuBuffer<f32>, reference: &(Vec<f64>, Vec<f64>), tol: f64) {
        let got = self.ctx.read(out).unwrap();
        let c = suite::compare(&got, &reference.0, &reference.1, tol);
        assert!(c.passed(), "{what}: {}", c.summary());
        self.compared += 1;
    }
}

const ROUNDS: usize = 24;

fn elementwise_family(env: &mut Env) {
    const L: usize = 61;
    let (av, a) = env.data(L);
    let (bv, bb) = env.data(L);
    for _ in 0..ROUNDS {
        let len = env.size(L);
        let y = env.guarded(L);
        env.call("add", &[(&y, len)], |b| elementwise::add(b, &a, &bb, &y, len));
        env.call("silu_gate", &[(&y, len)], |b| elementwise::silu_gate(b, &a, &bb, &y, len));
        let inplace = env.guarded(L);
        env.call("add_inplace", &[(&inplace, len)], |b| elementwise::add_inplace(b, &inplace, &bb, len));
        env.call("silu_gate_inplace", &[(&inplace, len)], |b| elementwise::silu_gate_inplace(b, &inplace, &bb, len));
        let (rows, n) = (env.size(3), env.size(20));
        let eps = [1e-5, 0.0, -1.0, f32::NAN, f32::INFINITY][env.rng.u32(5) as usize];
        let ok_len = rows.saturating_mul(n);
        let y = env.guarded(L);
        env.call("rmsnorm", &[(&y, ok_len)], |b| elementwise::rmsnorm(b, &a, &bb, &y, rows, n, eps));
    }
    // Valid random shapes against the reference.
    for _ in 0..4 {
        let len = 1 + env.rng.u32(L as u32) as usize;
        let y = env.guarded(len);
        let mut b = env.ctx.batch();
        elementwise::add(&mut b, &a, &bb, &y, len).unwrap();
        b.run().unwrap();
        env.compare("add", &y, &elementwise::reference_add(&av[..len], &bv[..len]), 1e-6);
        let (rows, n) = (1 + env.rng.u32(3) as usize, 1 + env.rng.u32(20) as usize);
        let y = env.guarded(rows * n);
        let mut b = env.ctx.batch();
        elementwise::rmsnorm(&mut b, &a, &bb, &y, rows, n, 1e-5).unwrap();
        b.run().unwrap();
        env.compare("rmsnorm", &y, &elementwise::reference_rmsnorm(&av[..rows * n], &bv[..n], rows, 1e-5), 1e-5);
    }
}

fn rope_family(env: &mut Env) {
    let d = 8;
    let cfg = RopeConfig::new(d, 10000.0, RopeScaling::Default);
    for _ in 0..ROUNDS / 2 {
        let (rows, hd) = (env.size(16), env.size(8));
        let _ = RopeTable::new(&env.ctx, RopeConfig::new(hd, 10000.0, RopeScaling::Default), rows);
        let theta = [10000.0, 1.0, 0.0, f64::NAN, f64::INFINITY, -5.0][env.rng.u32(6) as usize];
        assert!(RopeTable::new(&env.ctx, RopeConfig::new(d, theta, RopeScaling::Default), 4).is_ok() == (theta == 10000.0));
    }
    let table = RopeTable::build(&env.ctx, cfg.clone(), 32).unwrap();
    const TOKENS: usize = 5;
    const HEADS: usize = 3;
    let len = TOKENS * HEADS * d;
    let positions = env.ctx.upload(&[0u32, 3, 31, 2, 1]).unwrap();
    for _ in 0..ROUNDS {
        let (tokens, heads) = (env.size(TOKENS), env.size(HEADS));
        let start = [0u32, 1, 27, 31, 32, u32::MAX, u32::MAX - 1][env.rng.u32(7) as usize];
        let ok_len = tokens.checked_mul(heads).and_then(|v| v.checked_mul(d)).unwrap_or(usize::MAX);
        let x = env.guarded(len);
        env.call("rope apply", &[(&x, ok_len)], |b| rope::apply(b, &x, tokens, heads, PairLayout::HalfSplit, &table, Positions::Start(start)));
        let max = [31u32, 32, u32::MAX][env.rng.u32(3) as usize];
        env.call("rope apply (buffer)", &[(&x, ok_len)], |b| rope::apply(b, &x, tokens, heads, PairLayout::Interleaved, &table, Positions::Buffer { buf: &positions, max }));
    }
    // Valid: rotate at a random start, compare with the reference.
    for layout in [PairLayout::Interleaved, PairLayout::HalfSplit] {
        let start = env.rng.u32(32 - TOKENS as u32);
        let (xv, x) = env.data(len);
        let mut b = env.ctx.batch();
        rope::apply(&mut b, &x, TOKENS, HEADS, layout, &table, Positions::Start(start)).unwrap();
        b.run().unwrap();
        let xf: Vec<f64> = xv.iter().map(|&v| v as f64).collect();
        let reference = wgkernels::reference::rope::rotate(&xf, HEADS, d, layout, &cfg, |t| start as usize + t);
        env.compare("rope apply", &x, &reference, 1e-5);
    }
}

fn attention_family(env: &mut Env) {
    let d = 8;
    let table = RopeTable::build(&env.ctx, RopeConfig::new(d, 10000.0, RopeScaling::Default), 64).unwrap();
    const KEYS: usize = 25;
    let (kv_heads, heads) = (3, 6);
    let k = env.ctx.upload(&env.rng.uniform_vec(KEYS * kv_heads * d, -1.0, 1.0)).unwrap();
    let v = env.ctx.upload(&env.rng.uniform_vec(KEYS * kv_heads * d, -1.0, 1.0)).unwrap();
    let q = env.ctx.upload(&env.rng.uniform_vec(KEYS * heads * d, -1.0, 1.0)).unwrap();
    let shape = AttnShape::new(heads, kv_heads, d);
    let scratch = DecodeScratch::new(&env.ctx, shape).unwrap();
    for _ in 0..ROUNDS {
        let (tokens, offset, kv_len) = (env.size(4), env.size(3), env.size(KEYS));
        let out = env.guarded(KEYS * heads * d);
        let ok = tokens.saturating_mul(heads * d);
        let scale = [None, Some(0.5), Some(f32::NAN), Some(f32::MAX)][env.rng.u32(4) as usize];
        let k_rotated = env.rng.u32(2) == 0;
        let a = Prefill {
            shape,
            tokens,
            offset,
            kv_len,
            causal: true,
            k_rotated,
            layout: PairLayout::HalfSplit,
            scale,
            window: None,
            softcap: None,
            q: &q,
            k: &k,
            v: &v,
            table: &table,
            out: &out,
        };
        env.call("prefill", &[(&out, ok)], |b| attention::prefill(b, &a));
        let bad_shape = AttnShape::new(env.size(heads), env.size(kv_heads), env.size(d));
        let a = Prefill { shape: bad_shape, ..a };
        env.call("prefill (shape)", &[(&out, KEYS * heads * d)], |b| attention::prefill(b, &a));
        let h = env.size(heads);
        let _ = DecodeScratch::new(&env.ctx, AttnShape::new(h, kv_heads, d));
        let out = env.guarded(heads * d);
        let da = DecodeAttention { shape, q_rot: &q, k_cache: &k, v_cache: &v, kv_len, scale, window: None, softcap: None, scratch: &scratch, out: &out };
        env.call("decode_attention", &[(&out, heads * d)], |b| attention::decode_attention(b, &da));
        // decode writes row `pos` of the caches: give it its own guarded ones.
        let (pos, capacity) = (env.size(3), env.size(KEYS));
        let kc = env.guarded(KEYS * kv_heads * d);
        let vc = env.guarded(KEYS * kv_heads * d);
        let dec = Decode {
            shape,
            pos,
            layout: PairLayout::Interleaved,
            scale,
            window: None,
            softcap: None,
            q: &q,
            k_new: &k,
            v_new: &v,
            k_cache: &kc,
            v_cache: &vc,
            capacity,
            table: &table,
            scratch: &scratch,
            out: &out,
        };
        env.call("decode", &[(&out, heads * d)], |b| attention::decode(b, &dec));
    }
    // Valid random shapes: the harness cases (reference, guards) with random sizes.
    for _ in 0..3 {
        // Head dims from a short list: each new one builds pipelines (slow on a CPU adapter).
        let kv_heads = 1 + env.rng.u32(2) as usize;
        let shape = AttnShape::new(kv_heads * (1 + env.rng.u32(3) as usize), kv_heads, [8, 6][env.rng.u32(2) as usize]);
        let tokens = 1 + env.rng.u32(5) as usize;
        let offset = env.rng.u32(4) as usize;
        let kv_len = offset + tokens + env.rng.u32(3) as usize;
        let case = attention::cases::PrefillCase {
            tokens,
            offset,
            kv_len,
            shape,
            layout: PairLayout::HalfSplit,
            kv_f16: false,
            causal: true,
            k_rotated: false,
            mode: 0,
            window: None,
            softcap: None,
        };
        let c = suite::run_case(&env.ctx, &case, &mut env.rng).unwrap();
        assert!(c.passed(), "{case:?}: {}", c.summary());
        let case = attention::cases::DecodeCase {
            pos: env.rng.u32(40) as usize,
            shape,
            layout: PairLayout::Interleaved,
            kv_f16: false,
            mode: 0,
            window: None,
            softcap: None,
            attend_only: false,
            q8: false,
        };
        let c = suite::run_case(&env.ctx, &case, &mut env.rng).unwrap();
        assert!(c.passed(), "{case:?}: {}", c.summary());
        env.compared += 2;
    }
}

fn turboquant_family(env: &mut Env) {
    use turboquant::{CacheKind, DecodeAttention as TqAttention, TqAttnWorkspace, TqCache, TqConfig};
    let d = 64;
    let cfg = TqConfig { kv_heads: 2, head_dim: d, capacity: 16, kind: CacheKind::Global, sign_seed: Some(7) };
    for _ in 0..ROUNDS / 2 {
        let c = TqConfig { kv_heads: env.size(2), capacity: env.size(16), head_dim: [64, 63, 0, 1 << 40][env.rng.u32(4) as usize], ..cfg };
        if c.kv_heads.saturating_mul(c.capacity) < 1 << 16 {
            let _ = TqCache::new(&env.ctx, c);
        } else {
            assert!(c.validate().is_err() || TqCache::new(&env.ctx, c).is_err());
        }
        let h = env.size(4);
        let _ = TqAttnWorkspace::new(&env.ctx, h, &cfg);
    }
    let cache = TqCache::new(&env.ctx, cfg).unwrap();
    let src = env.ctx.upload(&env.rng.uniform_vec(16 * 2 * d, -1.0, 1.0)).unwrap();
    let ws = TqAttnWorkspace::new(&env.ctx, 4, &cfg).unwrap();
    let q = env.ctx.upload(&env.rng.uniform_vec(4 * d, -1.0, 1.0)).unwrap();
    for _ in 0..ROUNDS {
        let (tokens, pos0) = (env.size(3), env.size(4));
        env.call("tq quantize", &[], |b| turboquant::quantize(b, &src, tokens, pos0, &cache));
        let out = env.guarded(16 * 2 * d);
        let count = env.size(3);
        let ok = count.saturating_mul(2 * d);
        env.call("tq dequantize", &[(&out, ok)], |b| turboquant::dequantize(b, &cache, pos0, count, &out));
        let out = env.guarded(4 * d);
        let a = TqAttention {
            heads: [4, 2, 3, 0, usize::MAX][env.rng.u32(5) as usize],
            kv_len: env.size(8),
            window: [None, Some(0), Some(4), Some(usize::MAX)][env.rng.u32(4) as usize],
            scale: [0.1, f32::NAN, f32::INFINITY][env.rng.u32(3) as usize],
        };
        env.call("tq decode_attention", &[(&out, 4 * d)], |b| turboquant::decode_attention(b, &ws, &q, &cache, &cache, &out, &a));
    }
    // Valid: quantise random tokens and check against the reference quantiser.
    let tokens = 1 + env.rng.u32(4) as usize;
    let pos0 = env.rng.u32(8) as usize;
    let v = turboquant::cases::test_vectors(&mut env.rng, tokens, 2, d, false);
    let src = env.ctx.upload(&v).unwrap();
    let n = cfg.kv_heads * cfg.capacity;
    let cache = TqCache::with_buffers(&env.ctx, cfg, suite::guarded_u32(&env.ctx, n * d / 8).unwrap(), env.guarded(n)).unwrap();
    let mut b = env.ctx.batch();
    turboquant::quantize(&mut b, &src, tokens, pos0, &cache).unwrap();
    b.run().unwrap();
    let (c, _) = turboquant::cases::check_quantized(&env.ctx, &cache, &v, tokens, pos0).unwrap();
    assert!(c.passed(), "tq quantize: {}", c.summary());
    env.compared += 1;
}

fn int4_family(env: &mut Env) {
    let (n, k) = (9, 70);
    let w = int4::Int4Matrix::alloc(&env.ctx, n, k, 32, int4::Int4Mode::Signed).unwrap();
    for _ in 0..ROUNDS {
        let (nn, kk, g) = (env.size(4), env.size(40), env.size(32));
        if nn.saturating_mul(kk) < 1 << 20 {
            let _ = int4::Int4Matrix::alloc(&env.ctx, nn, kk, g, int4::Int4Mode::Signed);
        }
        let xl = env.size(n * k);
        if xl < 1 << 16 {
            let src = env.ctx.upload(&vec![0.5f32; xl.max(1)]).unwrap();
            env.call("int4 quantize", &[], |b| int4::quantize(b, &src, &w));
        }
    }
}

fn matmul_family(env: &mut Env) {
    use wgkernels::formats::FORMATS;
    use wgkernels::kernels::matmul::{self, Epilogue, GemvInput, WeightMatrix};
    let (n, k) = (3, 256);
    let x = env.ctx.upload(&env.rng.uniform_vec(2 * k, -1.0, 1.0)).unwrap();
    for f in FORMATS {
        let mut blocks_rng = fastrand::Rng::with_seed(u64::from(env.rng.u32(u32::MAX)));
        let bytes = (f.random_blocks)(&mut blocks_rng, n * k / f.block_weights);
        let w = WeightMatrix::upload_format(&env.ctx, f, n, k, &bytes).unwrap();
        // (gate, up) pairs for the SwiGLU epilogue, when the format has a GGUF type.
        let pairs = f.ggml_type.map(|t| WeightMatrix::upload_interleaved(&env.ctx, t, n, k, &bytes, &bytes).unwrap());
        let xq = wgkernels::kernels::q8::Q8Activations::alloc(&env.ctx, k).unwrap();
        for _ in 0..ROUNDS / 8 {
            let m = env.size(2);
            let y = env.guarded(2 * n);
            env.call("matmul", &[(&y, m.saturating_mul(n))], |b| matmul::matmul(b, &w, &x, &y, m));
            let yl = env.size(n);
            if yl < 1 << 16 {
                let y = env.guarded(yl.max(1));
                env.call("matmul gemv", &[(&y, n)], |b| matmul::gemv(b, &w, &x, &y));
                env.call("matmul dequantize", &[(&y, n * k)], |b| matmul::dequantize(b, &w, &y));
                let y = env.guarded(yl.max(1));
                env.call("matmul gemv_with accumulate", &[(&y, n)], |b| matmul::gemv_with(b, &w, GemvInput::F32(&x), &y, Epilogue::Accumulate));
                env.call("matmul gemv_with q8", &[(&y, n)], |b| matmul::gemv_with(b, &w, GemvInput::Q8(&xq), &y, Epilogue::Store));
                // n = 3 rows cannot hold (gate, up) pairs: always refused.
                env.call("matmul gemv_with swiglu (odd)", &[], |b| matmul::gemv_with(b, &w, GemvInput::F32(&x), &y, Epilogue::SwiGlu));
                if let Some(gu) = &pairs {
                    env.call("matmul gemv_with swiglu", &[(&y, n)], |b| matmul::gemv_with(b, gu, GemvInput::F32(&x), &y, Epilogue::SwiGlu));
                }
            }
            if let Some(t) = f.ggml_type {
                let (nn, kk) = (env.size(n), env.size(k));
                let ok = WeightMatrix::upload_interleaved(&env.ctx, t, nn, kk, &bytes, &bytes).is_ok();
                assert!(!ok || nn.checked_mul(kk) == Some(n * k), "{}: interleaved upload of {nn} x {kk} from {} bytes each", f.name, bytes.len());
            }
            let (nn, kk) = (env.size(n), env.size(k));
            let uploaded = WeightMatrix::upload_format(&env.ctx, f, nn, kk, &bytes).is_ok();
            assert!(!uploaded || nn.checked_mul(kk) == Some(n * k), "{}: upload of {nn} x {kk} from {} bytes", f.name, bytes.len());
        }
    }
}

fn q8_family(env: &mut Env) {
    use wgkernels::formats::{self, gguf::GgmlType};
    use wgkernels::kernels::matmul::{self, WeightMatrix};
    let (n, k) = (5, 256);
    let mut blocks_rng = fastrand::Rng::with_seed(u64::from(env.rng.u32(u32::MAX)));
    // The int8 GEMV with the integer dot (Q4_K) and with the dequantised activations (int4).
    let q4k_bytes = (formats::q4k::FORMAT.random_blocks)(&mut blocks_rng, n * k / 256);
    let wq = WeightMatrix::upload(&env.ctx, GgmlType::Q4_K, n, k, &q4k_bytes).unwrap();
    let w4 = WeightMatrix::upload_format(&env.ctx, &formats::int4::FORMAT, n, k, &(formats::int4::FORMAT.random_blocks)(&mut blocks_rng, n * k / 32)).unwrap();
    let xq = q8::Q8Activations::alloc(&env.ctx, k).unwrap();
    for _ in 0..ROUNDS / 2 {
        let kk = env.size(k);
        if kk < 1 << 16 {
            let _ = q8::Q8Activations::alloc(&env.ctx, kk);
        } else if kk > u32::MAX as usize / 8 {
            assert!(q8::Q8Activations::alloc(&env.ctx, kk).is_err());
        }
        let xl = env.size(k);
        if xl < 1 << 16 {
            let x = env.ctx.upload(&vec![0.5f32; xl.max(1)]).unwrap();
            env.call("q8 quantize_activations", &[], |b| q8::quantize_activations(b, &x, &xq));
        }
        let yl = env.size(n);
        if yl < 1 << 16 {
            let y = env.guarded(yl.max(1));
            env.call("q8 int4 gemv_q8", &[(&y, n)], |b| matmul::gemv_q8(b, &w4, &xq, &y));
            env.call("q8 q4k gemv_q8", &[(&y, n)], |b| matmul::gemv_q8(b, &wq, &xq, &y));
        }
        // The fused RMSNorm + quantisation: x, the norm weight and the f32 output of any length,
        // any eps (the output past k must stay untouched).
        let (xl, wl, ol) = (env.size(k), env.size(k), env.size(k));
        if xl.max(wl).max(ol) < 1 << 16 {
            let x = env.ctx.upload(&vec![0.5f32; xl.max(1)]).unwrap();
            let w = env.ctx.upload(&vec![1.5f32; wl.max(1)]).unwrap();
            let xn = env.guarded(ol.max(1));
            let eps = [1e-5f32, 0.0, -1.0, f32::NAN, f32::INFINITY][env.rng.u32(5) as usize];
            env.call("q8 rmsnorm_quantize", &[(&xn, k)], |b| q8::rmsnorm_quantize(b, &x, &w, eps, &xn, &xq));
            env.call("q8 rmsnorm_quantize (x = xn)", &[], |b| q8::rmsnorm_quantize(b, &xn, &w, 1e-5, &xn, &xq));
        }
    }
}

#[test]
fn every_entry_point_gives_a_typed_error_or_a_guarded_result() {
    let seed = Rng::fresh_seed();
    println!("seed {seed}");
    let mut env = Env { ctx: common::context(), rng: Rng::new(seed), rejected: 0, ran: 0, compared: 0 };
    for (name, family) in FAMILIES {
        let t = std::time::Instant::now();
        let before = (env.rejected, env.ran, env.compared);
        family(&mut env);
        println!("{name:12} rejected {:4}  ran {:4}  compared {:3}  {:.1}s", env.rejected - before.0, env.ran - before.1, env.compared - before.2, t.elapsed().as_secs_f64());
    }
    assert!(env.rejected > 100 && env.ran > 50 && env.compared > 10, "rejected {} ran {} compared {}", env.rejected, env.ran, env.compared);
}
