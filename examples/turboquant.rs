//! TurboQuant KV cache demo: fill K and V caches with random data (Gaussian with a few
//! outlier channels, as real keys have), quantise them on the GPU (prefill), run decode
//! attention over the compressed caches, and compare with attention over the uncompressed
//! data (f64 on the CPU). Prints the error, the memory saved and GPU timings.
//!
//! `cargo run --release --example turboquant [kv_len]` (default 4096, 1024 on a CPU adapter; 32 heads, 8 kv heads,
//! head_dim 128). `WGKERNELS_VARIANT=portable|subgroup` picks a variant.
//! The uncompressed side is the CPU reference here; BENCHMARKS.md has the GPU timing of an
//! uncompressed f16 decode attention on the same shape.

use wgkernels::kernels::turboquant::{self as tq, CacheKind, DecodeAttention, TqAttnWorkspace, TqCache, TqConfig};
use wgkernels::reference::turboquant as reference;
use wgkernels::suite::Rng;
use wgkernels::{timing, Context, ContextOptions};

fn main() -> wgkernels::Result<()> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    // On a CPU adapter (lavapipe) the default context shrinks to 1024 positions.
    let cpu = ctx.caps().device_type == wgkernels::wgpu::DeviceType::Cpu;
    let given: Option<usize> = std::env::args().nth(1).and_then(|s| s.parse().ok());
    if cpu && given.is_none() {
        println!("CPU adapter: default kv_len shrunk from 4096 to 1024 (pass a length for another)");
    }
    let kv_len = given.unwrap_or(if cpu { 1024 } else { 4096 });
    let (heads, kv_heads, d) = (32usize, 8usize, 128usize);
    println!("adapter {} ({:?}); attention variant {}", ctx.caps().adapter_name, ctx.caps().backend, ctx.variant_for(&tq::ATTENTION)?);

    let mut rng = Rng::new(2504_19874);
    // Keys with outlier channels (every 16th channel x6), values plain Gaussian.
    let k: Vec<f32> = rng.normal_vec(kv_len * kv_heads * d).iter().enumerate().map(|(i, &x)| if i % d % 16 == 3 { 6.0 * x } else { x }).collect();
    let v = rng.normal_vec(kv_len * kv_heads * d);
    let q = rng.normal_vec(heads * d);

    let kcfg = TqConfig { kv_heads, head_dim: d, capacity: kv_len, kind: CacheKind::Global, sign_seed: Some(1) };
    let vcfg = TqConfig { sign_seed: Some(2), ..kcfg };
    let (kc, vc) = (TqCache::new(&ctx, kcfg)?, TqCache::new(&ctx, vcfg)?);
    let (sk, sv, sq) = (ctx.upload(&k)?, ctx.upload(&v)?, ctx.upload(&q)?);
    let out = ctx.alloc::<f32>(heads * d)?;
    let ws = TqAttnWorkspace::new(&ctx, heads, &kcfg)?;
    let a = DecodeAttention { heads, kv_len, window: None, scale: 1.0 / (d as f32).sqrt() };

    let prefill = timing::measure(&ctx, 5, &|b, _| tq::quantize_kv(b, &sk, &sv, kv_len, 0, &kc, &vc))?;
    let attn = timing::measure(&ctx, 20, &|b, _| tq::decode_attention(b, &ws, &sq, &kc, &vc, &out, &a))?;
    let mut b = ctx.batch();
    tq::decode_attention(&mut b, &ws, &sq, &kc, &vc, &out, &a)?;
    b.run()?;
    let got = ctx.read(&out)?;

    // Uncompressed attention (f64, CPU) over the original and over the dequantised caches.
    let (hk, hv) = (kc.download(&ctx)?, vc.download(&ctx)?);
    let orig = |j: usize, h: usize| {
        let o = (j * kv_heads + h) * d;
        (k[o..o + d].iter().map(|&x| x as f64).collect(), v[o..o + d].iter().map(|&x| x as f64).collect())
    };
    let (r_orig, _, _) = reference::decode_attention(&q, heads, kv_heads, d, a.scale as f64, kv_len, orig);
    let deq = |j: usize, h: usize| (reference::dequantize_slot(&hk, h, j), reference::dequantize_slot(&hv, h, j));
    let (r_deq, _, _) = reference::decode_attention(&q, heads, kv_heads, d, a.scale as f64, kv_len, deq);
    let rel = |r: &[f64]| (got.iter().zip(r).map(|(&g, x)| (g as f64 - x).powi(2)).sum::<f64>() / r.iter().map(|x| x * x).sum::<f64>()).sqrt();
    let cos = got.iter().zip(&r_orig).map(|(&g, x)| g as f64 * x).sum::<f64>()
        / (got.iter().map(|&g| (g as f64).powi(2)).sum::<f64>().sqrt() * r_orig.iter().map(|x| x * x).sum::<f64>().sqrt());

    let f16_bytes = 2 * kv_len * kv_heads * d * 2;
    let tq_bytes = (kcfg.bytes() + vcfg.bytes()) as usize;
    let how = if attn.gpu_timestamps { "GPU timestamps" } else { "wall clock" };
    println!("shape: {heads} heads, {kv_heads} kv heads, head_dim {d}, kv_len {kv_len}");
    println!(
        "memory: K+V f16 {:.2} MiB, f32 {:.2} MiB, TurboQuant 4-bit {:.2} MiB ({:.2}x smaller than f16)",
        f16_bytes as f64 / 1048576.0,
        2.0 * f16_bytes as f64 / 1048576.0,
        tq_bytes as f64 / 1048576.0,
        f16_bytes as f64 / tq_bytes as f64
    );
    println!("error vs attention over the dequantised cache (kernel error): relative L2 {:.2e}", rel(&r_deq));
    println!("error vs attention over the original cache (quantisation error): relative L2 {:.3}, cosine {:.5}", rel(&r_orig), cos);
    println!(
        "prefill quantise K+V ({} tokens): {:.1} us ({:.0} tokens/s); decode attention: {:.1} us per call single, {:.1} us batched, {:.1} GB/s of compressed KV ({how})",
        kv_len,
        prefill.single_us,
        kv_len as f64 / (prefill.single_us * 1e-6),
        attn.single_us,
        attn.batched_us,
        tq_bytes as f64 / (attn.single_us * 1e3)
    );
    Ok(())
}
