//! Prefill + one decode step with YaRN RoPE, checked against the f64 CPU reference, with timings.
//!
//! `cargo run --release --example attention -- [tokens] [heads] [kv_heads] [head_dim]`
//! (defaults 256 32 8 128; on a CPU adapter 64 8 2 64). The flow an engine would use: rotate the prompt's K into an f16
//! cache (rope::apply), fused RoPE + flash-attention prefill over it (Q rotated on load), then a
//! decode step that rotates the new q/k, appends k/v and attends split-K over the whole cache.
//! The prefill CPU check is skipped above 2048 tokens (f64 reference too slow).
//!
//! `cargo run --release --example attention -- sweep`: the reference measurements — decode at
//! kv 4k/16k/32k (f16 and f32 caches; GB/s of KV read and % of the in-process copy kernel) and
//! prefill at 512/2048 tokens (TFLOP/s), heads 32, kv_heads 8, head_dim 128, each checked first.

use wgkernels::kernels::attention::{self, AttnShape, Decode, DecodeScratch, Prefill};
use wgkernels::kernels::rope::{self, PairLayout, Positions, RopeConfig, RopeScaling, RopeTable};
use wgkernels::reference::{self, attention::Dims};
use wgkernels::suite::Rng;
use wgkernels::timing::measure;
use wgkernels::{Context, ContextOptions, GpuBuffer};

type Kv = half::f16;

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Largest error normalised by the reference's magnitudes.
fn max_err(got: &[f32], want: &[f64], mag: &[f64]) -> f64 {
    got.iter().zip(want).zip(mag).map(|((g, w), m)| (*g as f64 - w).abs() / m.max(1e-30)).fold(0.0, f64::max)
}

fn main() -> wgkernels::Result<()> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("{}\n", ctx.caps().report());
    if std::env::args().nth(1).as_deref() == Some("sweep") {
        return sweep(&ctx);
    }
    // On a CPU adapter (lavapipe) the defaults shrink to a shape that checks in seconds.
    let cpu = ctx.caps().device_type == wgkernels::wgpu::DeviceType::Cpu;
    let (dt, dh, dkv, dd) = if cpu { (64, 8, 2, 64) } else { (256, 32, 8, 128) };
    if cpu && std::env::args().len() < 2 {
        println!("CPU adapter: default shape shrunk to {dt} tokens, {dh}/{dkv} heads, head_dim {dd} (pass the four numbers for others)\n");
    }
    let (tokens, heads, kv_heads, d) = (arg(1, dt), arg(2, dh), arg(3, dkv), arg(4, dd));
    let shape = AttnShape::new(heads, kv_heads, d);
    shape.validate()?;
    let capacity = tokens + 1;
    let layout = PairLayout::HalfSplit;
    // YaRN as Qwen2.5 / DeepSeek ship it: 4x over a 32k original context.
    let cfg = RopeConfig::new(d, 1_000_000.0, RopeScaling::yarn(4.0, 32768));
    let table = RopeTable::build(&ctx, cfg.clone(), capacity)?;
    println!("YaRN: attention factor {:.4}, inv_freq[0] {:.3e}, inv_freq[last] {:.3e}", cfg.attention_factor(), cfg.inv_freq()[0], cfg.inv_freq()[d / 2 - 1]);

    let mut rng = Rng::new(Rng::fresh_seed());
    let q = rng.normal_vec(tokens * heads * d);
    let k = rng.normal_vec(capacity * kv_heads * d);
    let v = rng.normal_vec(capacity * kv_heads * d);
    let row = kv_heads * d;
    // Caches hold the prompt's rows; row `tokens` is written by the decode step.
    let to_kv = |x: &[f32]| x.iter().map(|&a| Kv::from_f32(a)).collect::<Vec<_>>();
    let k_cache: GpuBuffer<Kv> = ctx.upload(&to_kv(&k))?;
    let v_cache: GpuBuffer<Kv> = ctx.upload(&to_kv(&v))?;
    let qb = ctx.upload(&q)?;
    let out: GpuBuffer<f32> = ctx.alloc(tokens * heads * d)?;

    let mut b = ctx.batch();
    rope::apply(&mut b, &k_cache, tokens, kv_heads, layout, &table, Positions::Start(0))?;
    b.run()?;
    let prefill = Prefill {
        shape,
        tokens,
        offset: 0,
        kv_len: tokens,
        causal: true,
        k_rotated: true,
        layout,
        scale: None,
        window: None,
        softcap: None,
        q: &qb,
        k: &k_cache,
        v: &v_cache,
        table: &table,
        out: &out,
    };
    let mut b = ctx.batch();
    attention::prefill(&mut b, &prefill)?;
    b.run()?;
    let got = ctx.read(&out)?;

    // CPU: the same computation in f64 from the f16-rounded K/V.
    let f16r = |x: &[f32]| x.iter().map(|&a| Kv::from_f32(a).to_f64()).collect::<Vec<f64>>();
    let q64: Vec<f64> = q.iter().map(|&a| a as f64).collect();
    let (q_rot, _) = reference::rope::rotate(&q64, heads, d, layout, &cfg, |t| t);
    let (k_rot, _) = reference::rope::rotate(&f16r(&k[..tokens * row]), kv_heads, d, layout, &cfg, |t| t);
    // The cache stores rotated keys in f16.
    let k_rot: Vec<f64> = k_rot.iter().map(|&a| Kv::from_f64(a).to_f64()).collect();
    let v64 = f16r(&v);
    let dims = Dims { tokens, heads, kv_heads, d, kv_len: tokens, offset: 0, causal: true, scale: 1.0 / (d as f64).sqrt(), window: None, softcap: None };
    let perr = if tokens <= 2048 {
        let (want, mag) = reference::attention::attention(&dims, &q_rot, &k_rot, &v64[..tokens * row]);
        let e = max_err(&got, &want, &mag);
        println!("prefill  {tokens} tokens x {heads}/{kv_heads} heads, d {d}: max normalised error vs CPU {e:.2e}");
        e
    } else {
        println!("prefill  {tokens} tokens: CPU check skipped (over 2048 tokens)");
        0.0
    };

    // Decode step: the token at position `tokens`.
    let (qn, kn, vn) = (rng.normal_vec(heads * d), rng.normal_vec(row), rng.normal_vec(row));
    let (qnb, knb, vnb) = (ctx.upload(&qn)?, ctx.upload(&kn)?, ctx.upload(&vn)?);
    let scratch = DecodeScratch::new(&ctx, shape)?;
    let dout: GpuBuffer<f32> = ctx.alloc(heads * d)?;
    let step = Decode {
        shape,
        pos: tokens,
        layout,
        scale: None,
        window: None,
        softcap: None,
        q: &qnb,
        k_new: &knb,
        v_new: &vnb,
        k_cache: &k_cache,
        v_cache: &v_cache,
        capacity,
        table: &table,
        scratch: &scratch,
        out: &dout,
    };
    let mut b = ctx.batch();
    attention::decode(&mut b, &step)?;
    b.run()?;
    let dgot = ctx.read(&dout)?;
    let to64 = |x: &[f32]| x.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let (qn_rot, _) = reference::rope::rotate(&to64(&qn), heads, d, layout, &cfg, |_| tokens);
    let (kn_rot, _) = reference::rope::rotate(&to64(&kn), kv_heads, d, layout, &cfg, |_| tokens);
    let mut k_all = k_rot.clone();
    k_all.extend(kn_rot.iter().map(|&a| Kv::from_f64(a).to_f64()));
    let mut v_all = v64[..tokens * row].to_vec();
    v_all.extend(vn.iter().map(|&a| Kv::from_f32(a).to_f64()));
    let ddims = Dims { tokens: 1, heads, kv_heads, d, kv_len: tokens + 1, offset: tokens, causal: true, scale: dims.scale, window: None, softcap: None };
    let (dwant, dmag) = reference::attention::attention(&ddims, &qn_rot, &k_all, &v_all);
    let derr = max_err(&dgot, &dwant, &dmag);
    println!("decode   at position {tokens} over {} cached keys: max normalised error vs CPU {derr:.2e}", tokens + 1);

    // Timings.
    let tp = measure(&ctx, 10, &|b, _| attention::prefill(b, &prefill))?;
    let flops: f64 = 4.0 * (tokens * (tokens + 1) / 2) as f64 * heads as f64 * d as f64;
    println!("prefill  {:9.1} us  {:7.3} TFLOP/s ({})", tp.single_us, flops / (tp.single_us * 1e6), if tp.gpu_timestamps { "GPU timestamps" } else { "wall clock" });
    let td = measure(&ctx, 20, &|b, _| attention::decode(b, &step))?;
    let bytes = 2.0 * ((tokens + 1) * row * std::mem::size_of::<Kv>()) as f64;
    println!("decode   {:9.1} us  {:7.1} GB/s of KV read (single submit), {:9.1} us batched", td.single_us, bytes / (td.single_us * 1e3), td.batched_us);
    let ok = perr < 1e-3 && derr < 1e-3;
    println!("{}", if ok { "OK" } else { "MISMATCH" });
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}

/// The reference bench shapes, each checked against the CPU before it is timed.
fn sweep(ctx: &Context) -> wgkernels::Result<()> {
    use wgkernels::kernels::attention::cases::{DecodeCase, PrefillCase};
    use wgkernels::suite::Case;
    let cpu = ctx.caps().device_type == wgkernels::wgpu::DeviceType::Cpu;
    let (copy_gbs, _) = wgkernels::timing::copy_bandwidth(ctx, if cpu { 32 << 20 } else { 1 << 30 }, if cpu { 3 } else { 10 })?;
    println!("copy kernel: {copy_gbs:.1} GB/s (read + write)\n");
    let mut rng = Rng::new(Rng::fresh_seed());
    let shape = AttnShape::new(32, 8, 128);
    for kv in [4096usize, 16384, 32768] {
        for kv_f16 in [true, false] {
            let case = DecodeCase { pos: kv - 1, shape, layout: PairLayout::HalfSplit, kv_f16, mode: 5, window: None, softcap: None, attend_only: false, q8: false };
            // Enough cache copies to exceed a 60 MB last-level cache.
            let copies = (256usize << 20).div_ceil(case.bytes() as usize).clamp(1, 8);
            let prepared = case.setup(ctx, &mut rng, copies)?;
            let mut b = ctx.batch();
            prepared.encode(&mut b, 0)?;
            b.run()?;
            let check = prepared.check(ctx)?;
            let t = measure(ctx, 20, &|b, i| prepared.encode(b, i))?;
            let gbs = case.bytes() as f64 / (t.single_us * 1e3);
            println!(
                "decode  {:<40} {:8.1} us  {:7.1} GB/s  {:5.1}% of copy  (batched {:7.1} us)  check: {}",
                case.name(),
                t.single_us,
                gbs,
                100.0 * gbs / copy_gbs,
                t.batched_us,
                check.summary()
            );
        }
    }
    for tokens in [512usize, 2048] {
        let case = PrefillCase {
            tokens,
            offset: 0,
            kv_len: tokens,
            shape,
            layout: PairLayout::HalfSplit,
            kv_f16: true,
            causal: true,
            k_rotated: false,
            mode: 5,
            window: None,
            softcap: None,
        };
        let prepared = case.setup(ctx, &mut rng, 1)?;
        let mut b = ctx.batch();
        prepared.encode(&mut b, 0)?;
        b.run()?;
        let check = prepared.check(ctx)?;
        let t = measure(ctx, 5, &|b, i| prepared.encode(b, i))?;
        println!("prefill {:<60} {:9.1} us  {:6.2} TFLOP/s  check: {}", case.name(), t.single_us, case.flops() / (t.single_us * 1e6), check.summary());
    }
    Ok(())
}
