//! RoPE / attention checks the harness grid doesn't cover: the Hugging Face golden values
//! (tests/data/rope_golden.json from tools/make_rope_golden.py; missing file = failure) and
//! typed errors for bad input.

mod common;

use std::collections::BTreeMap;
use wgkernels::kernels::attention::{self, AttnShape, Decode, DecodeScratch, Prefill};
use wgkernels::kernels::rope::{self, PairLayout, Positions, RopeConfig, RopeScaling, RopeTable};
use wgkernels::{Context, Error, GpuBuffer};

// ---- a minimal JSON reader (the fixture is plain numbers, strings, arrays, objects) ----

#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    fn get(&self, k: &str) -> Option<&Json> {
        match self {
            Json::Obj(m) => m.get(k).filter(|v| !matches!(v, Json::Null)),
            _ => None,
        }
    }
    fn num(&self) -> f64 {
        match self {
            Json::Num(x) => *x,
            other => panic!("expected a number, got {other:?}"),
        }
    }
    fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            other => panic!("expected an array, got {other:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("expected a string, got {other:?}"),
        }
    }
    fn nums(&self) -> Vec<f64> {
        self.arr().iter().map(Json::num).collect()
    }
}

fn parse_json(s: &str) -> Json {
    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    fn val(b: &[u8], i: &mut usize) -> Json {
        ws(b, i);
        match b[*i] {
            b'{' => {
                *i += 1;
                let mut m = BTreeMap::new();
                loop {
                    ws(b, i);
                    if b[*i] == b'}' {
                        *i += 1;
                        return Json::Obj(m);
                    }
                    let Json::Str(k) = val(b, i) else { panic!("object key") };
                    ws(b, i);
                    assert_eq!(b[*i], b':');
                    *i += 1;
                    m.insert(k, val(b, i));
                    ws(b, i);
                    if b[*i] == b',' {
                        *i += 1;
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut v = Vec::new();
                loop {
                    ws(b, i);
                    if b[*i] == b']' {
                        *i += 1;
                        return Json::Arr(v);
                    }
                    v.push(val(b, i));
                    ws(b, i);
                    if b[*i] == b',' {
                        *i += 1;
                    }
                }
            }
            b'"' => {
                *i += 1;
                let start = *i;
                while b[*i] != b'"' {
                    *i += if b[*i] == b'\\' { 2 } else { 1 };
                }
                *i += 1;
                Json::Str(String::from_utf8_lossy(&b[start..*i - 1]).into_owned())
            }
            b't' => {
                *i += 4;
                Json::Bool(true)
            }
            b'f' => {
                *i += 5;
                Json::Bool(false)
            }
            b'n' => {
                *i += 4;
                Json::Null
            }
            _ => {
                let start = *i;
                while *i < b.len() && matches!(b[*i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'I' | b'n' | b'f' | b'N' | b'a') {
                    *i += 1;
                }
                let t = std::str::from_utf8(&b[start..*i]).unwrap();
                Json::Num(t.parse().unwrap_or_else(|_| panic!("bad number {t}")))
            }
        }
    }
    let mut i = 0;
    val(s.as_bytes(), &mut i)
}

// ---- HF golden check ----

fn config_of(c: &Json) -> RopeConfig {
    let p = c.get("params_seen").expect("params_seen");
    let f = |k: &str| p.get(k).map(Json::num);
    let d = c.get("head_dim").unwrap().num() as usize;
    let theta = f("rope_theta").expect("rope_theta");
    let max_pos = c.get("max_position_embeddings").unwrap().num() as usize;
    let scaling = match c.get("rope_type").unwrap().str() {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear { factor: f("factor").unwrap() },
        "dynamic" => RopeScaling::Dynamic { factor: f("factor").unwrap(), max_position_embeddings: max_pos, seq_len: c.get("seq_len").map_or(0, |s| s.num() as usize) },
        "llama3" => RopeScaling::Llama3 {
            factor: f("factor").unwrap(),
            low_freq_factor: f("low_freq_factor").unwrap(),
            high_freq_factor: f("high_freq_factor").unwrap(),
            original_max_position_embeddings: f("original_max_position_embeddings").unwrap() as usize,
        },
        "yarn" => RopeScaling::Yarn {
            factor: f("factor").unwrap(),
            original_max_position_embeddings: f("original_max_position_embeddings").map_or(max_pos, |v| v as usize),
            beta_fast: f("beta_fast").unwrap_or(32.0),
            beta_slow: f("beta_slow").unwrap_or(1.0),
            attention_factor: f("attention_factor"),
            mscale: f("mscale"),
            mscale_all_dim: f("mscale_all_dim"),
            truncate: !matches!(p.get("truncate"), Some(Json::Bool(false))),
        },
        "longrope" => RopeScaling::LongRope {
            short_factor: p.get("short_factor").expect("short_factor").nums().into(),
            long_factor: p.get("long_factor").expect("long_factor").nums().into(),
            // HF takes the factor as max_position_embeddings / original when both are given.
            factor: max_pos as f64 / f("original_max_position_embeddings").unwrap(),
            original_max_position_embeddings: f("original_max_position_embeddings").unwrap() as usize,
            attention_factor: f("attention_factor"),
            seq_len: c.get("seq_len").map_or(0, |s| s.num() as usize),
        },
        other => panic!("rope_type {other} not covered"),
    };
    RopeConfig::new(d, theta, scaling)
}

/// LongRoPE by hand (d = 4, theta = 10000: base frequencies 1 and 10000^-1/2 = 0.01): the factor
/// list switches at the original window, and the attention factor is sqrt(1 + ln 8 / ln 4096) =
/// sqrt(1.25) unless given.
#[test]
fn longrope_by_hand() {
    let cfg = |seq_len: usize, attention_factor: Option<f64>| {
        RopeConfig::new(
            4,
            10000.0,
            RopeScaling::LongRope {
                short_factor: vec![2.0, 4.0].into(),
                long_factor: vec![5.0, 50.0].into(),
                factor: 8.0,
                original_max_position_embeddings: 4096,
                attention_factor,
                seq_len,
            },
        )
    };
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-15 * y.abs());
    assert!(close(&cfg(4096, None).inv_freq(), &[0.5, 0.0025]), "{:?}", cfg(4096, None).inv_freq());
    assert!(close(&cfg(4097, None).inv_freq(), &[0.2, 0.0002]), "{:?}", cfg(4097, None).inv_freq());
    assert!((cfg(10, None).attention_factor() - 1.25f64.sqrt()).abs() < 1e-15);
    assert_eq!(cfg(10, Some(0.75)).attention_factor(), 0.75);
    // And through the GPU table: cos/sin at position 3, scaled by the attention factor.
    let ctx = common::context();
    let t = RopeTable::build(&ctx, cfg(5000, None), 4).unwrap();
    let got = ctx.read(t.buffer()).unwrap();
    let af = 1.25f64.sqrt();
    for (i, f) in [0.2f64, 0.0002].iter().enumerate() {
        let [c, s] = got[3 * 2 + i];
        assert!((c as f64 - af * (3.0 * f).cos()).abs() < 1e-6 && (s as f64 - af * (3.0 * f).sin()).abs() < 1e-6, "pair {i}: {c} {s}");
    }
}

fn golden_path() -> String {
    std::env::var("WGKERNELS_ROPE_GOLDEN").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rope_golden.json").to_string())
}

#[test]
fn hf_golden_rope() {
    let path = golden_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}. Generate it with `python3 tools/make_rope_golden.py tests/data/rope_golden.json` (needs torch + transformers)"));
    let doc = parse_json(&text);
    println!("golden from {} (transformers {})", doc.get("generator").map_or("?", Json::str), doc.get("transformers").map_or("?", Json::str));
    let ctx = common::context();
    let mut failures = Vec::new();
    let cases = doc.get("cases").expect("cases").arr();
    assert!(!cases.is_empty());
    for c in cases {
        let name = c.get("name").unwrap().str();
        let cfg = config_of(c);
        let d = cfg.head_dim;
        // 1. Frequencies: ours in f64 vs HF's float32 (its exponent 2i/d and pow are f32 too).
        let ours = cfg.inv_freq();
        let hf = c.get("inv_freq").unwrap().nums();
        assert_eq!(ours.len(), hf.len(), "{name}: pair count");
        let rel = ours.iter().zip(&hf).map(|(a, b)| ((a - b) / a).abs()).fold(0.0, f64::max);
        let af_hf = c.get("attention_factor").unwrap().num();
        let af_err = (cfg.attention_factor() - af_hf).abs() / af_hf;
        // 2. Our GPU table vs HF's cos/sin, tolerance = what HF's f32 angle carries:
        //    pos * |inv_freq difference| + pos * inv_freq * 2^-23 + a few 1e-7.
        let positions: Vec<usize> = c.get("positions").unwrap().nums().iter().map(|&p| p as usize).collect();
        let rows = positions.iter().max().unwrap() + 1;
        let table = RopeTable::build(&ctx, cfg, rows).unwrap();
        let got = ctx.read(table.buffer()).unwrap();
        let (cos, sin) = (c.get("cos").unwrap().arr(), c.get("sin").unwrap().arr());
        let tol_at = |pos: usize, i: usize| af_hf * (pos as f64 * ((ours[i] - hf[i]).abs() + ours[i] * 2f64.powi(-23)) + 3e-6);
        let mut worst: f64 = 0.0;
        for (k, &pos) in positions.iter().enumerate() {
            let (hc, hs) = (cos[k].nums(), sin[k].nums());
            for i in 0..d / 2 {
                let [gc, gs] = got[pos * d / 2 + i];
                let e = (gc as f64 - hc[i]).abs().max((gs as f64 - hs[i]).abs());
                worst = worst.max(e / tol_at(pos, i));
            }
        }
        // 3. HF's apply_rotary_pos_emb (half-split) vs our rope_apply, where the fixture has it.
        let mut apply_worst: f64 = 0.0;
        if let (Some(q), Some(rotated)) = (c.get("apply_q"), c.get("apply_rotated")) {
            let q: Vec<f32> = q.nums().iter().map(|&x| x as f32).collect();
            let n = positions.len();
            let x: GpuBuffer<f32> = ctx.upload(&q.repeat(n)).unwrap();
            let pos_u32: Vec<u32> = positions.iter().map(|&p| p as u32).collect();
            let pbuf = ctx.upload(&pos_u32).unwrap();
            let mut b = ctx.batch();
            let max = *pos_u32.iter().max().unwrap();
            rope::apply(&mut b, &x, n, 1, PairLayout::HalfSplit, &table, Positions::Buffer { buf: &pbuf, max }).unwrap();
            b.run().unwrap();
            let out = ctx.read(&x).unwrap();
            for (k, &pos) in positions.iter().enumerate() {
                let want = rotated.arr()[k].nums();
                for e in 0..d {
                    let i = e % (d / 2);
                    let mag = (q[i].abs() + q[i + d / 2].abs()) as f64;
                    apply_worst = apply_worst.max((out[k * d + e] as f64 - want[e]).abs() / (mag * tol_at(pos, i)));
                }
            }
        }
        println!(
            "{name:<24} inv_freq rel err {rel:.2e} ({:.1} f32 ulps), attention_factor err {af_err:.1e}, table err {worst:.2} x tol, apply {apply_worst:.2} x tol",
            rel / 2f64.powi(-24)
        );
        if rel > 4e-6 || af_err > 1e-6 || worst > 1.0 || apply_worst > 1.0 {
            failures.push(name.to_string());
        }
    }
    assert!(failures.is_empty(), "HF golden mismatch: {failures:?}");
}

// ---- bad input -> typed errors ----

fn table(ctx: &Context, d: usize, rows: usize) -> RopeTable {
    RopeTable::build(ctx, RopeConfig::new(d, 10000.0, RopeScaling::Default), rows).unwrap()
}

struct Bufs {
    q: GpuBuffer<f32>,
    k: GpuBuffer<f32>,
    v: GpuBuffer<f32>,
    out: GpuBuffer<f32>,
}

fn bufs(ctx: &Context, q: usize, kv: usize) -> Bufs {
    Bufs { q: ctx.alloc(q).unwrap(), k: ctx.alloc(kv).unwrap(), v: ctx.alloc(kv).unwrap(), out: ctx.alloc(q).unwrap() }
}

fn prefill_err(ctx: &Context, shape: AttnShape, tokens: usize, offset: usize, kv_len: usize, t: &RopeTable, b: &Bufs) -> Error {
    let mut batch = ctx.batch();
    let r = attention::prefill(
        &mut batch,
        &Prefill {
            shape,
            tokens,
            offset,
            kv_len,
            causal: true,
            k_rotated: false,
            layout: PairLayout::HalfSplit,
            scale: None,
            window: None,
            softcap: None,
            q: &b.q,
            k: &b.k,
            v: &b.v,
            table: t,
            out: &b.out,
        },
    );
    r.expect_err("bad prefill input was accepted")
}

#[test]
fn bad_inputs_are_errors() {
    let ctx = common::context();
    let t64 = table(&ctx, 64, 64);
    let big = bufs(&ctx, 1 << 16, 1 << 16);
    // heads % kv_heads != 0
    assert!(matches!(prefill_err(&ctx, AttnShape::new(6, 4, 64), 4, 0, 4, &t64, &big), Error::Shape(_)));
    assert!(matches!(DecodeScratch::new(&ctx, AttnShape::new(6, 4, 64)).err(), Some(Error::Shape(_))));
    // odd head_dim, head_dim over 256
    assert!(matches!(AttnShape::new(4, 4, 63).validate(), Err(Error::Shape(_))));
    assert!(matches!(RopeTable::new(&ctx, RopeConfig::new(63, 10000.0, RopeScaling::Default), 8).err(), Some(Error::Shape(_))));
    assert!(matches!(AttnShape::new(4, 4, 258).validate(), Err(Error::Shape(_))));
    assert!(matches!(RopeTable::new(&ctx, RopeConfig::new(512, 10000.0, RopeScaling::Default), 8).err(), Some(Error::Shape(_))));
    // table / attention head_dim mismatch
    let t128 = table(&ctx, 128, 64);
    assert!(matches!(prefill_err(&ctx, AttnShape::new(4, 4, 64), 4, 0, 4, &t128, &big), Error::Shape(_)));
    // kv shorter than offset + tokens
    assert!(matches!(prefill_err(&ctx, AttnShape::new(4, 2, 64), 8, 5, 12, &t64, &big), Error::Shape(_)));
    // positions beyond the table (64 rows)
    assert!(matches!(prefill_err(&ctx, AttnShape::new(4, 2, 64), 8, 60, 68, &t64, &big), Error::Argument(_)));
    // buffers too small
    let small = bufs(&ctx, 4 * 4 * 64 - 1, 4 * 4 * 64);
    assert!(matches!(prefill_err(&ctx, AttnShape::new(4, 4, 64), 4, 0, 4, &t64, &small), Error::BufferTooSmall { name: "q", .. }));
    let small_kv = bufs(&ctx, 4 * 4 * 64, 8 * 4 * 64 - 1);
    assert!(matches!(prefill_err(&ctx, AttnShape::new(4, 4, 64), 4, 4, 8, &t64, &small_kv), Error::BufferTooSmall { name: "k", .. }));

    // rope apply: positions beyond the table, odd-sized buffers
    let x: GpuBuffer<f32> = ctx.alloc(3 * 2 * 64).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(rope::apply(&mut b, &x, 3, 2, PairLayout::Interleaved, &t64, Positions::Start(62)), Err(Error::Argument(_))));
    let pbuf = ctx.upload(&[1u32, 2, 99]).unwrap();
    assert!(matches!(rope::apply(&mut b, &x, 3, 2, PairLayout::Interleaved, &t64, Positions::Buffer { buf: &pbuf, max: 99 }), Err(Error::Argument(_))));
    assert!(matches!(rope::apply(&mut b, &x, 4, 2, PairLayout::Interleaved, &t64, Positions::Start(0)), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(
        rope::apply(&mut b, &x, 3, 2, PairLayout::Interleaved, &t64, Positions::Buffer { buf: &ctx.upload(&[1u32]).unwrap(), max: 1 }),
        Err(Error::BufferTooSmall { name: "positions", .. })
    ));
    // bad RoPE parameters
    assert!(RopeConfig::new(64, 10000.0, RopeScaling::Linear { factor: 0.0 }).validate().is_err());
    assert!(RopeConfig::new(64, 0.5, RopeScaling::Default).validate().is_err());
    let longrope = |short: Vec<f64>, long: Vec<f64>| RopeScaling::LongRope {
        short_factor: short.into(),
        long_factor: long.into(),
        factor: 8.0,
        original_max_position_embeddings: 4096,
        attention_factor: None,
        seq_len: 100,
    };
    assert!(matches!(RopeConfig::new(4, 10000.0, longrope(vec![1.0, 2.0], vec![1.0])).validate(), Err(Error::Argument(_))), "long_factor length");
    assert!(matches!(RopeConfig::new(4, 10000.0, longrope(vec![1.0, 0.0], vec![1.0, 2.0])).validate(), Err(Error::Argument(_))), "zero factor");
    assert!(matches!(RopeTable::new(&ctx, RopeConfig::new(4, 10000.0, longrope(vec![1.0, f64::NAN], vec![1.0, 2.0])), 8).err(), Some(Error::Argument(_))));

    // decode: cache full, position beyond the table, scratch for another shape, small buffers
    let shape = AttnShape::new(8, 2, 64);
    let scratch = DecodeScratch::new(&ctx, shape).unwrap();
    let q: GpuBuffer<f32> = ctx.alloc(8 * 64).unwrap();
    let kn: GpuBuffer<f32> = ctx.alloc(2 * 64).unwrap();
    let kc: GpuBuffer<f32> = ctx.alloc(100 * 2 * 64).unwrap();
    let vc: GpuBuffer<f32> = ctx.alloc(100 * 2 * 64).unwrap();
    let out: GpuBuffer<f32> = ctx.alloc(8 * 64).unwrap();
    let dec = |pos: usize, capacity: usize, shape: AttnShape, scratch: &DecodeScratch, q: &GpuBuffer<f32>| {
        let mut b = ctx.batch();
        attention::decode(
            &mut b,
            &Decode {
                shape,
                pos,
                layout: PairLayout::Interleaved,
                scale: None,
                window: None,
                softcap: None,
                q,
                k_new: &kn,
                v_new: &kn,
                k_cache: &kc,
                v_cache: &vc,
                capacity,
                table: &t64,
                scratch,
                out: &out,
            },
        )
    };
    assert!(dec(10, 100, shape, &scratch, &q).is_ok());
    // One buffer as both caches: both are written (the append), so that is an aliasing error.
    let same = Decode {
        shape,
        pos: 10,
        layout: PairLayout::Interleaved,
        scale: None,
        window: None,
        softcap: None,
        q: &q,
        k_new: &kn,
        v_new: &kn,
        k_cache: &kc,
        v_cache: &kc,
        capacity: 100,
        table: &t64,
        scratch: &scratch,
        out: &out,
    };
    assert!(matches!(attention::decode(&mut ctx.batch(), &same), Err(Error::Aliased { first: "k_cache", second: "v_cache" })));
    // decode_q8: int8 activations of another width, or of several rows, are shape errors.
    {
        use wgkernels::kernels::q8::Q8Activations;
        let ok = Decode { v_cache: &vc, ..same };
        for xq in [Q8Activations::alloc(&ctx, 256).unwrap(), Q8Activations::alloc_rows(&ctx, 512, 2).unwrap()] {
            let mut b = ctx.batch();
            assert!(matches!(attention::decode_q8(&mut b, &ok, &xq), Err(Error::Shape(_))));
            assert!(b.is_empty(), "a rejected decode_q8 recorded a dispatch");
        }
        let mut b = ctx.batch();
        attention::decode_q8(&mut b, &ok, &Q8Activations::alloc(&ctx, 8 * 64).unwrap()).unwrap();
        assert_eq!(b.len(), 3, "append, split, merge with the quantisation");
    }
    assert!(matches!(dec(100, 100, shape, &scratch, &q), Err(Error::Shape(_))));
    assert!(matches!(dec(70, 100, shape, &scratch, &q), Err(Error::Argument(_))));
    assert!(matches!(dec(10, 101, shape, &scratch, &q), Err(Error::BufferTooSmall { name: "k_cache", .. })));
    let other = DecodeScratch::new(&ctx, AttnShape::new(8, 8, 64)).unwrap();
    assert!(matches!(dec(10, 100, shape, &other, &q), Err(Error::Argument(_))));
    let q_small: GpuBuffer<f32> = ctx.alloc(8 * 64 - 2).unwrap();
    assert!(matches!(dec(10, 100, shape, &scratch, &q_small), Err(Error::BufferTooSmall { name: "q", .. })));
    // A window of 0 keys and a soft-cap that is not finite and > 0 are argument errors, in both kernels.
    let b = bufs(&ctx, 4 * 8 * 64, 20 * 2 * 64);
    for (window, softcap) in [(Some(0), None), (None, Some(0.0)), (None, Some(-1.0)), (None, Some(f32::NAN)), (None, Some(f32::INFINITY))] {
        let d = Decode { window, softcap, v_cache: &vc, ..same };
        let mut batch = ctx.batch();
        assert!(matches!(attention::decode(&mut batch, &d), Err(Error::Argument(_))), "decode {window:?} {softcap:?}");
        let p = Prefill {
            shape,
            tokens: 4,
            offset: 0,
            kv_len: 20,
            causal: true,
            k_rotated: false,
            layout: PairLayout::HalfSplit,
            scale: None,
            window,
            softcap,
            q: &b.q,
            k: &b.k,
            v: &b.v,
            table: &t64,
            out: &b.out,
        };
        assert!(matches!(attention::prefill(&mut batch, &p), Err(Error::Argument(_))), "prefill {window:?} {softcap:?}");
        assert!(batch.is_empty(), "a rejected call recorded a dispatch");
    }
}

/// Several decode steps in a row against one prefill over the same tokens: the cache the
/// decode steps build (rotating each new k) must give the same outputs as the fused prefill;
/// also with a sliding window and a score soft-cap (Gemma's), which the two apply differently
/// (the decode starts its chunks at the window, the prefill masks).
#[test]
fn decode_steps_match_prefill() {
    decode_vs_prefill(None, None);
    decode_vs_prefill(Some(5), Some(1.5));
}

fn decode_vs_prefill(window: Option<usize>, softcap: Option<f32>) {
    let ctx = common::context();
    let (shape, n) = (AttnShape::new(8, 2, 64), 37usize);
    let cfg = RopeConfig::new(64, 10000.0, RopeScaling::yarn(4.0, 16));
    let t = RopeTable::build(&ctx, cfg, n).unwrap();
    let mut rng = wgkernels::suite::Rng::new(7);
    let (q, k, v) = (rng.normal_vec(n * 8 * 64), rng.normal_vec(n * 2 * 64), rng.normal_vec(n * 2 * 64));
    let (qb, kb, vb) = (ctx.upload(&q).unwrap(), ctx.upload(&k).unwrap(), ctx.upload(&v).unwrap());
    let out_p: GpuBuffer<f32> = ctx.alloc(n * 8 * 64).unwrap();
    let mut b = ctx.batch();
    let p = Prefill {
        shape,
        tokens: n,
        offset: 0,
        kv_len: n,
        causal: true,
        k_rotated: false,
        layout: PairLayout::HalfSplit,
        scale: None,
        window,
        softcap,
        q: &qb,
        k: &kb,
        v: &vb,
        table: &t,
        out: &out_p,
    };
    attention::prefill(&mut b, &p).unwrap();
    b.run().unwrap();
    let want = ctx.read(&out_p).unwrap();
    let kc: GpuBuffer<half::f16> = ctx.alloc(n * 2 * 64).unwrap();
    let vc: GpuBuffer<half::f16> = ctx.alloc(n * 2 * 64).unwrap();
    let scratch = DecodeScratch::new(&ctx, shape).unwrap();
    let out: GpuBuffer<f32> = ctx.alloc(8 * 64).unwrap();
    let mut worst: f32 = 0.0;
    for pos in 0..n {
        let qs = ctx.upload(&q[pos * 8 * 64..][..8 * 64]).unwrap();
        let ks = ctx.upload(&k[pos * 2 * 64..][..2 * 64]).unwrap();
        let vs = ctx.upload(&v[pos * 2 * 64..][..2 * 64]).unwrap();
        let mut b = ctx.batch();
        let d = Decode {
            shape,
            pos,
            layout: PairLayout::HalfSplit,
            scale: None,
            window,
            softcap,
            q: &qs,
            k_new: &ks,
            v_new: &vs,
            k_cache: &kc,
            v_cache: &vc,
            capacity: n,
            table: &t,
            scratch: &scratch,
            out: &out,
        };
        attention::decode(&mut b, &d).unwrap();
        b.run().unwrap();
        let got = ctx.read(&out).unwrap();
        for (g, w) in got.iter().zip(&want[pos * 8 * 64..][..8 * 64]) {
            worst = worst.max((g - w).abs());
        }
    }
    println!("decode vs prefill, f16 cache, window {window:?}, soft-cap {softcap:?}: max abs diff {worst:.2e}");
    assert!(worst < 1e-2, "decode steps differ from prefill by {worst}");
}

/// The tile planners under the WebGPU-baseline 16 KiB of workgroup memory (the CI adapter offers
/// 32 KiB): head_dim 256 prefill and decode with a full GQA group must still fit and be right.
#[test]
fn fits_16k_workgroup_memory() {
    use wgkernels::kernels::attention::cases::{DecodeCase, PrefillCase};
    use wgkernels::suite::{run_case, Rng};
    let base = common::context();
    let instance = wgkernels::wgpu::Instance::new(wgkernels::wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).expect("adapter");
    let mut limits = adapter.limits();
    limits.max_compute_workgroup_storage_size = 16 << 10;
    let features = adapter.features() & wgkernels::context::wanted_features();
    let (device, queue) =
        pollster::block_on(adapter.request_device(&wgkernels::wgpu::DeviceDescriptor { required_features: features, required_limits: limits, ..Default::default() }))
            .expect("device");
    let ctx = Context::from_device(device, queue, wgkernels::ContextOptions::default()).unwrap();
    assert_eq!(ctx.caps().limits.max_compute_workgroup_storage_size, 16 << 10);
    println!("CI adapter offers {} KiB; testing at 16 KiB", base.caps().limits.max_compute_workgroup_storage_size >> 10);
    let mut rng = Rng::new(Rng::fresh_seed());
    let cases: Vec<Box<dyn wgkernels::suite::Case>> = vec![
        Box::new(PrefillCase {
            tokens: 33,
            offset: 5,
            kv_len: 40,
            shape: AttnShape::new(8, 1, 256),
            layout: PairLayout::HalfSplit,
            kv_f16: true,
            causal: true,
            k_rotated: false,
            mode: 5,
            window: None,
            softcap: None,
        }),
        Box::new(DecodeCase {
            pos: 300,
            shape: AttnShape::new(8, 1, 256),
            layout: PairLayout::Interleaved,
            kv_f16: false,
            mode: 4,
            window: None,
            softcap: None,
            attend_only: false,
            q8: true,
        }),
        Box::new(DecodeCase {
            pos: 70,
            shape: AttnShape::new(16, 2, 128),
            layout: PairLayout::HalfSplit,
            kv_f16: true,
            mode: 6,
            window: None,
            softcap: None,
            attend_only: false,
            q8: true,
        }),
    ];
    for case in cases {
        let c = run_case(&ctx, case.as_ref(), &mut rng).unwrap();
        println!("{:<60} {}", case.name(), c.summary());
        assert!(c.passed(), "{}: {}", case.name(), c.summary());
    }
}

/// Random odd shapes beyond the harness grid (seed printed; `WGKERNELS_SEED` reproduces), for
/// both decode variants where the adapter has them.
#[test]
fn random_shapes() {
    use wgkernels::kernels::attention::cases::{DecodeCase, PrefillCase};
    use wgkernels::suite::{run_case, Case, Rng};
    use wgkernels::{ContextOptions, Variant, VariantPolicy};
    let base = common::context();
    let seed = Rng::fresh_seed();
    println!("seed {seed}");
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    for i in 0..12 {
        let d = 2 * (1 + rng.u32(128) as usize);
        let kv_heads = 1 + rng.u32(3) as usize;
        let heads = kv_heads * [1, 2, 3, 5, 8][rng.u32(5) as usize];
        let shape = AttnShape::new(heads, kv_heads, d);
        let layout = if rng.u32(2) == 0 { PairLayout::Interleaved } else { PairLayout::HalfSplit };
        let kv_f16 = rng.u32(2) == 0;
        let mode = rng.u32(7) as usize;
        let case: Box<dyn Case> = if i % 2 == 0 {
            let tokens = 1 + rng.u32(80) as usize;
            let offset = rng.u32(100) as usize;
            let causal = rng.u32(4) != 0;
            let kv_len = offset + tokens + rng.u32(20) as usize;
            Box::new(PrefillCase { tokens, offset, kv_len, shape, layout, kv_f16, causal, k_rotated: rng.u32(3) == 0, mode, window: None, softcap: None })
        } else {
            Box::new(DecodeCase { pos: rng.u32(600) as usize, shape, layout, kv_f16, mode, window: None, softcap: None, attend_only: false, q8: false })
        };
        for v in [Variant::Portable, Variant::Subgroup] {
            let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)));
            match run_case(&ctx, case.as_ref(), &mut rng) {
                Ok(c) => {
                    println!("{:<9} {:<70} {}", v.name(), case.name(), c.summary());
                    if !c.passed() {
                        failures.push(format!("{} {}: {}", v.name(), case.name(), c.summary()));
                    }
                }
                Err(Error::Unsupported { .. }) => {}
                // Scalings that need more than one rotation pair refuse d = 2 with a typed error.
                Err(Error::Shape(m)) if d == 2 && m.contains("head_dim > 2") => {}
                Err(e) => failures.push(format!("{} {}: {e}", v.name(), case.name())),
            }
        }
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
}
