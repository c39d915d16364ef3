//! The cost of one transformer decode step: a Llama-shaped model with random Q4_K weights, every
//! dispatch of the step (all layers) recorded into one batch: one compute pass, one submit.
//!
//! Per layer: RMSNorm; Q4_K GEMV q, k, v; RoPE on q and k fused with the KV append (f16 cache)
//! and split-K decode attention + merge (`attention::decode`); GEMV o; residual add; RMSNorm;
//! GEMV gate and up; SiLU-gate; GEMV down; residual add. Then the final RMSNorm (and, with
//! `--lm-head`, the Q4_K LM head).
//!
//! ```text
//! cargo run --release --example decode_step                 # Llama-2-7B shapes (32 layers, 32/32 heads, FFN 11008)
//! cargo run --release --example decode_step -- --llama3     # Llama-3-8B shapes (32/8 heads, FFN 14336)
//!   [--layers N] [--kv-len N] [--reps N] [--lm-head] [--small] [--full] [--no-check] [--record-only STEPS] [--no-bind-cache] [--q8]
//! ```
//!
//! `--q8` runs every GEMV on the opt-in int8-activation path (`kernels::q8`): each GEMV input is
//! quantised once (one extra dispatch per input, shared by q/k/v and by gate/up) and the CPU check
//! quantises the same way.
//!
//! On a CPU adapter (lavapipe) it shrinks to `--small` (hidden 512, 8/4 heads of 64, FFN 768,
//! 2 layers) unless `--full` is given. Before timing, layer 0 alone is run and checked against an
//! f64 CPU computation of the same layer (in `--small` mode, or whenever hidden <= 1024), so a
//! wrong step cannot look fast.
//!
//! Reported: dispatches per step, CPU recording time (total and per dispatch), submit time, GPU
//! time of the step (timestamp queries on the pass; wall clock where the adapter has none), tokens/s,
//! and weight bytes / GPU time as GB/s next to the copy kernel measured in the same process.

use half::f16;
use std::cell::Cell;
use std::time::Instant;
use wgkernels::batch::BindCache;
use wgkernels::formats::gguf::GgmlType;
use wgkernels::formats::q4k::{dequantize_row, pack_scale_min, BlockQ4K, BLOCK_BYTES, QK_K};
use wgkernels::kernels::attention::{self, AttnShape, Decode, DecodeScratch};
use wgkernels::kernels::elementwise;
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::kernels::q8::{self, Q8Activations};
use wgkernels::kernels::rope::{PairLayout, RopeConfig, RopeScaling, RopeTable};
use wgkernels::reference::{self, attention::Dims};
use wgkernels::timing::copy_bandwidth;
use wgkernels::{Batch, Context, ContextOptions, GpuBuffer};

#[derive(Clone, Copy, Debug)]
struct Model {
    name: &'static str,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ffn: usize,
    layers: usize,
    vocab: usize,
    theta: f64,
    eps: f32,
}

const LLAMA2_7B: Model = Model { name: "Llama-2-7B", hidden: 4096, heads: 32, kv_heads: 32, head_dim: 128, ffn: 11008, layers: 32, vocab: 32000, theta: 10_000.0, eps: 1e-5 };
const LLAMA3_8B: Model = Model { name: "Llama-3-8B", hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, ffn: 14336, layers: 32, vocab: 128_256, theta: 500_000.0, eps: 1e-5 };
const SMALL: Model = Model { name: "small", hidden: 512, heads: 8, kv_heads: 4, head_dim: 64, ffn: 768, layers: 2, vocab: 1024, theta: 10_000.0, eps: 1e-5 };

struct Args {
    model: Model,
    small: bool,
    full: bool,
    layers: Option<usize>,
    kv_len: Option<usize>,
    reps: usize,
    lm_head: bool,
    check: bool,
    record_only: usize,
    bind_cache: bool,
    q8: bool,
}

fn args() -> Args {
    let mut a =
        Args { model: LLAMA2_7B, small: false, full: false, layers: None, kv_len: None, reps: 20, lm_head: false, check: true, record_only: 0, bind_cache: true, q8: false };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |d: usize| it.next().and_then(|v| v.parse().ok()).unwrap_or(d);
        match s.as_str() {
            "--llama3" => a.model = LLAMA3_8B,
            "--llama2" => a.model = LLAMA2_7B,
            "--small" => a.small = true,
            "--full" => a.full = true,
            "--layers" => a.layers = Some(num(32).max(1)),
            "--kv-len" => a.kv_len = Some(num(1024).max(1)),
            "--reps" => a.reps = num(20).max(1),
            "--lm-head" => a.lm_head = true,
            "--no-check" => a.check = false,
            "--no-bind-cache" => a.bind_cache = false,
            "--q8" => a.q8 = true,
            "--record-only" => a.record_only = num(1000).max(1),
            "--help" | "-h" => {
                println!("decode_step [--llama3] [--layers N] [--kv-len N] [--reps N] [--lm-head] [--small] [--full] [--no-check] [--q8]");
                std::process::exit(0);
            }
            other => eprintln!("ignoring argument {other}"),
        }
    }
    a
}

/// Random valid Q4_K blocks with realistic scales: `dmin = 7.5 d` centres the weights (mean of
/// `d sc q` over uniform nibbles and 6-bit scales equals the mean of `dmin m`), and `d` is chosen
/// so that a GEMV of a unit-RMS input gives outputs of order one.
fn random_blocks(rng: &mut fastrand::Rng, count: usize, k: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; count * BLOCK_BYTES];
    rng.fill(&mut bytes);
    let d_scale = 0.6 / (150.0 * (k as f32).sqrt());
    for blk in bytes.chunks_exact_mut(BLOCK_BYTES) {
        let d = d_scale * (0.5 + rng.f32());
        blk[0..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
        blk[2..4].copy_from_slice(&f16::from_f32(7.5 * d).to_bits().to_le_bytes());
        let sc: [u8; 8] = std::array::from_fn(|_| rng.u8(0..64));
        let m: [u8; 8] = std::array::from_fn(|_| rng.u8(0..64));
        blk[4..16].copy_from_slice(&pack_scale_min(&sc, &m));
    }
    bytes
}

/// Host copy of a weight matrix (for the CPU check), dequantised exactly as the GPU does.
struct HostW {
    n: usize,
    k: usize,
    w: Vec<f32>,
}

impl HostW {
    fn new(n: usize, k: usize, bytes: &[u8]) -> HostW {
        let blocks: Vec<BlockQ4K> = bytes.chunks_exact(BLOCK_BYTES).map(|c| BlockQ4K::from_le_bytes(c.try_into().unwrap())).collect();
        HostW { n, k, w: dequantize_row(&blocks) }
    }
    /// `W x` in f64; with `q8`, of x rounded to f32 and quantised as the GPU quantises it.
    fn matvec(&self, x: &[f64], q8: bool) -> Vec<f64> {
        let xq: Vec<f64> = if q8 {
            let h = reference::q8::quantize(&x.iter().map(|&v| v as f32).collect::<Vec<_>>());
            (0..x.len()).map(|c| h.value(c)).collect()
        } else {
            x.to_vec()
        };
        (0..self.n).map(|r| self.w[r * self.k..(r + 1) * self.k].iter().zip(&xq).map(|(&w, &x)| w as f64 * x).sum()).collect()
    }
}

struct Layer {
    wq: WeightMatrix,
    wk: WeightMatrix,
    wv: WeightMatrix,
    wo: WeightMatrix,
    wgate: WeightMatrix,
    wup: WeightMatrix,
    wdown: WeightMatrix,
    attn_norm: GpuBuffer<f32>,
    ffn_norm: GpuBuffer<f32>,
    k_cache: GpuBuffer<f16>,
    v_cache: GpuBuffer<f16>,
}

impl Layer {
    fn gemvs(&self) -> [&WeightMatrix; 7] {
        [&self.wq, &self.wk, &self.wv, &self.wo, &self.wgate, &self.wup, &self.wdown]
    }
}

/// Activations, shared by all layers.
struct Acts {
    x: GpuBuffer<f32>,
    xn: GpuBuffer<f32>,
    q: GpuBuffer<f32>,
    k: GpuBuffer<f32>,
    v: GpuBuffer<f32>,
    attn: GpuBuffer<f32>,
    tmp: GpuBuffer<f32>,
    gate: GpuBuffer<f32>,
    up: GpuBuffer<f32>,
    logits: GpuBuffer<f32>,
    scratch: DecodeScratch,
    /// `--q8`: int8 activations of the GEMV inputs (hidden, attention output, FFN), each
    /// quantised once and shared by the GEMVs that read it.
    q8: Option<[Q8Activations; 3]>,
}

struct Net {
    m: Model,
    layers: Vec<Layer>,
    final_norm: GpuBuffer<f32>,
    lm_head: Option<WeightMatrix>,
    table: RopeTable,
    /// Position of the token of the next recorded step (the cache holds rows `0..pos`).
    pos: Cell<usize>,
    capacity: usize,
    acts: Acts,
}

const LAYOUT: PairLayout = PairLayout::HalfSplit;
/// Positions the timed steps advance through (then wrap around).
const ADVANCE: usize = 256;

/// The GEMVs `ws` over one input x: f32 activations, or (`--q8`) x quantised once into `q8[slot]`
/// and every GEMV on the int8 path.
fn gemvs(b: &mut Batch, net: &Net, x: &GpuBuffer<f32>, slot: usize, ws: &[(&WeightMatrix, &GpuBuffer<f32>)]) -> wgkernels::Result<()> {
    match &net.acts.q8 {
        Some(q) => {
            q8::quantize_activations(b, x, &q[slot])?;
            ws.iter().try_for_each(|(w, y)| matmul::gemv_q8(b, w, &q[slot], y))
        }
        None => ws.iter().try_for_each(|(w, y)| matmul::gemv(b, w, x, y)),
    }
}

fn record_layer(b: &mut Batch, net: &Net, l: &Layer) -> wgkernels::Result<()> {
    let (m, a) = (&net.m, &net.acts);
    let shape = AttnShape::new(m.heads, m.kv_heads, m.head_dim);
    elementwise::rmsnorm(b, &a.x, &l.attn_norm, &a.xn, 1, m.hidden, m.eps)?;
    gemvs(b, net, &a.xn, 0, &[(&l.wq, &a.q), (&l.wk, &a.k), (&l.wv, &a.v)])?;
    attention::decode(
        b,
        &Decode {
            shape,
            pos: net.pos.get(),
            layout: LAYOUT,
            scale: None,
            window: None,
            softcap: None,
            q: &a.q,
            k_new: &a.k,
            v_new: &a.v,
            k_cache: &l.k_cache,
            v_cache: &l.v_cache,
            capacity: net.capacity,
            table: &net.table,
            scratch: &a.scratch,
            out: &a.attn,
        },
    )?;
    gemvs(b, net, &a.attn, 1, &[(&l.wo, &a.tmp)])?;
    elementwise::add_inplace(b, &a.x, &a.tmp, m.hidden)?;
    elementwise::rmsnorm(b, &a.x, &l.ffn_norm, &a.xn, 1, m.hidden, m.eps)?;
    gemvs(b, net, &a.xn, 0, &[(&l.wgate, &a.gate), (&l.wup, &a.up)])?;
    elementwise::silu_gate_inplace(b, &a.gate, &a.up, m.ffn)?;
    gemvs(b, net, &a.gate, 2, &[(&l.wdown, &a.tmp)])?;
    elementwise::add_inplace(b, &a.x, &a.tmp, m.hidden)
}

fn record_step(b: &mut Batch, net: &Net) -> wgkernels::Result<()> {
    for l in &net.layers {
        record_layer(b, net, l)?;
    }
    elementwise::rmsnorm(b, &net.acts.x, &net.final_norm, &net.acts.xn, 1, net.m.hidden, net.m.eps)?;
    if let Some(w) = &net.lm_head {
        gemvs(b, net, &net.acts.xn, 0, &[(w, &net.acts.logits)])?;
    }
    Ok(())
}

/// Host data of layer 0 kept for the CPU check.
struct Host {
    x0: Vec<f32>,
    w: [HostW; 7],
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    k_cache: Vec<f16>,
    v_cache: Vec<f16>,
}

fn build(ctx: &Context, m: Model, kv_len: usize, lm_head: bool, keep_host: bool, use_q8: bool) -> wgkernels::Result<(Net, Option<Host>)> {
    let mut rng = fastrand::Rng::with_seed(0x5eed_dec0de);
    let (h, hd, kvd) = (m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim);
    let shapes = [(hd, h), (kvd, h), (kvd, h), (h, hd), (m.ffn, h), (m.ffn, h), (h, m.ffn)];
    // One random weight set per matrix role, uploaded into distinct buffers for every layer
    // (every GEMV of the step reads its own memory, as in a real model).
    let pools: Vec<Vec<u8>> = shapes.iter().map(|&(n, k)| random_blocks(&mut rng, n * k / QK_K, k)).collect();
    // Room for the timed steps to advance: each recorded step decodes the next position, so its
    // attention parameters change from step to step as in a real decode loop.
    let capacity = kv_len + ADVANCE + 1;
    let cache_len = capacity * kvd;
    let k_host: Vec<f16> = (0..cache_len).map(|_| f16::from_f32(2.0 * rng.f32() - 1.0)).collect();
    let v_host: Vec<f16> = (0..cache_len).map(|_| f16::from_f32(2.0 * rng.f32() - 1.0)).collect();
    let norm = |rng: &mut fastrand::Rng| (0..h).map(|_| 0.5 + rng.f32()).collect::<Vec<f32>>();
    let mut layers = Vec::with_capacity(m.layers);
    let mut host = None;
    let t0 = Instant::now();
    for li in 0..m.layers {
        let mut up = shapes.iter().zip(&pools).map(|(&(n, k), p)| WeightMatrix::upload(ctx, GgmlType::Q4_K, n, k, p));
        let mut next = || up.next().expect("seven matrices");
        let (wq, wk, wv, wo, wgate, wup, wdown) = (next()?, next()?, next()?, next()?, next()?, next()?, next()?);
        let (an, fnm) = (norm(&mut rng), norm(&mut rng));
        let layer =
            Layer { wq, wk, wv, wo, wgate, wup, wdown, attn_norm: ctx.upload(&an)?, ffn_norm: ctx.upload(&fnm)?, k_cache: ctx.upload(&k_host)?, v_cache: ctx.upload(&v_host)? };
        if li == 0 && keep_host {
            let w = std::array::from_fn(|i| HostW::new(shapes[i].0, shapes[i].1, &pools[i]));
            host = Some(Host { x0: vec![], w, attn_norm: an, ffn_norm: fnm, k_cache: k_host.clone(), v_cache: v_host.clone() });
        }
        layers.push(layer);
    }
    let lm_head = if lm_head { Some(WeightMatrix::upload(ctx, GgmlType::Q4_K, m.vocab, h, &random_blocks(&mut rng, m.vocab * h / QK_K, h))?) } else { None };
    let table = RopeTable::build(ctx, RopeConfig::new(m.head_dim, m.theta, RopeScaling::Default), capacity)?;
    let x0: Vec<f32> = (0..h).map(|_| 2.0 * rng.f32() - 1.0).collect();
    let acts = Acts {
        x: ctx.upload(&x0)?,
        xn: ctx.alloc(h)?,
        q: ctx.alloc(hd)?,
        k: ctx.alloc(kvd)?,
        v: ctx.alloc(kvd)?,
        attn: ctx.alloc(hd)?,
        tmp: ctx.alloc(h)?,
        gate: ctx.alloc(m.ffn)?,
        up: ctx.alloc(m.ffn)?,
        logits: ctx.alloc(if lm_head.is_some() { m.vocab } else { 1 })?,
        scratch: DecodeScratch::new(ctx, AttnShape::new(m.heads, m.kv_heads, m.head_dim))?,
        q8: if use_q8 { Some([Q8Activations::alloc(ctx, h)?, Q8Activations::alloc(ctx, hd)?, Q8Activations::alloc(ctx, m.ffn)?]) } else { None },
    };
    if let Some(hst) = host.as_mut() {
        hst.x0 = x0;
    }
    let final_norm = ctx.upload(&norm(&mut rng))?;
    println!("weights uploaded in {:.1} s", t0.elapsed().as_secs_f64());
    Ok((Net { m, layers, final_norm, lm_head, table, pos: Cell::new(kv_len), capacity, acts }, host))
}

fn rms_f64(x: &[f64], w: &[f32], eps: f32) -> Vec<f64> {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + eps as f64).sqrt();
    x.iter().zip(w).map(|(v, &g)| v * inv * g as f64).collect()
}

/// Layer 0 in f64 from the same inputs (the cache stores rotated keys in f16, as the GPU does).
fn reference_layer(net: &Net, hst: &Host) -> Vec<f64> {
    let m = &net.m;
    let (d, kvd) = (m.head_dim, m.kv_heads * m.head_dim);
    let cfg = net.table.config().clone();
    let x: Vec<f64> = hst.x0.iter().map(|&v| v as f64).collect();
    let q8 = net.acts.q8.is_some();
    let xn = rms_f64(&x, &hst.attn_norm, m.eps);
    let (q, k, v) = (hst.w[0].matvec(&xn, q8), hst.w[1].matvec(&xn, q8), hst.w[2].matvec(&xn, q8));
    let pos = net.pos.get();
    let (q_rot, _) = reference::rope::rotate(&q, m.heads, d, LAYOUT, &cfg, |_| pos);
    let (k_rot, _) = reference::rope::rotate(&k, m.kv_heads, d, LAYOUT, &cfg, |_| pos);
    let r16 = |v: f64| f16::from_f64(v).to_f64();
    let mut kc: Vec<f64> = hst.k_cache[..pos * kvd].iter().map(|v| v.to_f64()).collect();
    let mut vc: Vec<f64> = hst.v_cache[..pos * kvd].iter().map(|v| v.to_f64()).collect();
    kc.extend(k_rot.iter().map(|&v| r16(v)));
    vc.extend(v.iter().map(|&v| r16(v)));
    let dims = Dims { tokens: 1, heads: m.heads, kv_heads: m.kv_heads, d, kv_len: pos + 1, offset: pos, causal: true, scale: 1.0 / (d as f64).sqrt(), window: None, softcap: None };
    let (attn, _) = reference::attention::attention(&dims, &q_rot, &kc, &vc);
    let o = hst.w[3].matvec(&attn, q8);
    let x1: Vec<f64> = x.iter().zip(&o).map(|(a, b)| a + b).collect();
    let xn = rms_f64(&x1, &hst.ffn_norm, m.eps);
    let (g, u) = (hst.w[4].matvec(&xn, q8), hst.w[5].matvec(&xn, q8));
    let act: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| g / (1.0 + (-g).exp()) * u).collect();
    let dn = hst.w[6].matvec(&act, q8);
    x1.iter().zip(&dn).map(|(a, b)| a + b).collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> wgkernels::Result<()> {
    let a = args();
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    let caps = ctx.caps().clone();
    println!("{}\n", caps.report());
    let cpu = caps.device_type == wgpu::DeviceType::Cpu;
    let small = a.small || (cpu && !a.full);
    let mut m = if small { SMALL } else { a.model };
    if small && !a.small {
        println!("CPU adapter: shrinking to --small shapes (use --full for {} shapes)", a.model.name);
    }
    if let Some(l) = a.layers {
        m.layers = l;
    }
    let kv_len = a.kv_len.unwrap_or(if small { 37 } else { 1024 });
    let check = a.check && m.hidden <= 1024;
    println!(
        "model {}: hidden {}, heads {}/{} of {}, FFN {}, {} layers, kv_len {} (f16 cache), Q4_K weights{}",
        m.name,
        m.hidden,
        m.heads,
        m.kv_heads,
        m.head_dim,
        m.ffn,
        m.layers,
        kv_len,
        if a.lm_head { format!(", LM head {}", m.vocab) } else { String::new() }
    );
    if a.q8 {
        println!("activations: int8 (--q8: x quantised per block of 32 once per GEMV input, matmul::gemv_q8)");
    }
    let (net, host) = build(&ctx, m, kv_len, a.lm_head, check, a.q8)?;

    // Correctness first: layer 0 alone against the f64 CPU computation, recorded with fresh bind
    // groups, then twice through a BindCache (filling it, then hitting it).
    let cache = BindCache::default();
    if let Some(hst) = &host {
        let want = reference_layer(&net, hst);
        let scale = want.iter().fold(0f64, |s, v| s.max(v.abs()));
        let tol = 2e-3;
        for mode in ["fresh bind groups", "BindCache (fill)", "BindCache (reuse)"] {
            ctx.write(&net.acts.x, &hst.x0)?;
            let mut b = if mode.starts_with("fresh") { ctx.batch() } else { ctx.batch().with_cache(&cache) };
            record_layer(&mut b, &net, &net.layers[0])?;
            b.run()?;
            let got = ctx.read(&net.acts.x)?;
            let err = got.iter().zip(&want).map(|(&g, w)| if g.is_finite() { (g as f64 - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max) / scale;
            println!("check: layer 0 output vs f64 CPU, {mode}: max |err| / max |ref| = {err:.2e} (tol {tol:.0e}; f16 KV cache)");
            if err.is_nan() || err > tol {
                eprintln!("decode step is WRONG: not timing it");
                std::process::exit(1);
            }
        }
    } else {
        println!("check: skipped (hidden > 1024; run with --small to check a layer against the CPU)");
    }

    let weight_bytes: u64 = net.layers.iter().flat_map(|l| l.gemvs()).map(|w| w.bytes()).sum::<u64>() + net.lm_head.as_ref().map_or(0, |w| w.bytes());
    let kv_bytes = (m.layers * 2 * (kv_len + 1) * m.kv_heads * m.head_dim * 2) as u64;
    let x0 = ctx.read(&net.acts.x)?;

    let use_cache = a.bind_cache;
    let batch = |timed: bool| {
        let b = if timed { ctx.timed_batch() } else { ctx.batch() };
        if use_cache {
            b.with_cache(&cache)
        } else {
            b
        }
    };
    if a.record_only > 0 {
        // Recording alone (for profiling the CPU side): batches are dropped, never submitted.
        let t0 = Instant::now();
        let mut n = 0;
        for i in 0..a.record_only {
            net.pos.set(kv_len + 1 + i % ADVANCE);
            let mut b = batch(false);
            record_step(&mut b, &net)?;
            n += b.len();
        }
        let us = t0.elapsed().as_secs_f64() * 1e6;
        println!("recorded {} steps ({n} dispatches) without submitting: {:.0} µs per step, {:.2} µs per dispatch", a.record_only, us / a.record_only as f64, us / n as f64);
        return Ok(());
    }
    // CPU cost of recording + submitting the step, without and with the bind-group cache.
    let cpu_cost = |cached: bool| -> wgkernels::Result<(usize, f64, f64, f64)> {
        let (mut rec, mut sub, mut e2e) = (Vec::new(), Vec::new(), Vec::new());
        let mut dispatches = 0;
        for i in 0..a.reps + 2 {
            net.pos.set(kv_len + 1 + i % ADVANCE);
            ctx.write(&net.acts.x, &x0)?;
            ctx.wait_idle()?;
            let t0 = Instant::now();
            let mut b = if cached { ctx.batch().with_cache(&cache) } else { ctx.batch() };
            record_step(&mut b, &net)?;
            let t1 = Instant::now();
            dispatches = b.len();
            let s = b.submit()?;
            let t2 = Instant::now();
            s.wait()?;
            let t3 = Instant::now();
            if i >= 2 {
                // the first two fill the cache / warm up
                rec.push((t1 - t0).as_secs_f64() * 1e6);
                sub.push((t2 - t1).as_secs_f64() * 1e6);
                e2e.push((t3 - t0).as_secs_f64() * 1e6);
            }
        }
        Ok((dispatches, median(&mut rec), median(&mut sub), median(&mut e2e)))
    };
    // Warm-up (pipelines, first touch).
    for _ in 0..2 {
        let mut b = batch(false);
        record_step(&mut b, &net)?;
        b.run()?;
    }
    let (dispatches, rec_plain, sub_plain, e2e_plain) = cpu_cost(false)?;
    let (_, rec_cached, sub_cached, e2e_cached) = cpu_cost(true)?;
    let e2e = if use_cache { e2e_cached } else { e2e_plain };
    // GPU time of the step's one pass.
    let mut gpu = Vec::new();
    let mut timestamps = caps.timestamps;
    for i in 0..a.reps {
        net.pos.set(kv_len + 1 + i % ADVANCE);
        ctx.write(&net.acts.x, &x0)?;
        ctx.wait_idle()?;
        let mut b = batch(true);
        record_step(&mut b, &net)?;
        let t0 = Instant::now();
        match b.submit()?.gpu_ns()? {
            Some(ns) if timestamps => gpu.push(ns / 1e3),
            _ => {
                timestamps = false;
                gpu.push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let out = ctx.read(&net.acts.xn)?;
    let nonfinite = out.iter().filter(|v| !v.is_finite()).count();
    let gpu = median(&mut gpu);

    let copy_bytes: u64 = if cpu { 64 << 20 } else { 1 << 30 };
    let (copy_gbs, _) = copy_bandwidth(&ctx, copy_bytes, if cpu { 5 } else { 20 })?;
    let wgbs = weight_bytes as f64 / (gpu * 1e3);
    let allgbs = (weight_bytes + kv_bytes) as f64 / (gpu * 1e3);
    println!("\ndecode step ({} reps, medians)", a.reps);
    println!("  dispatches            {dispatches} in one pass, one submit");
    let per = |t: f64| t / dispatches as f64;
    println!("  CPU recording         {rec_plain:.0} µs total, {:.2} µs per dispatch (new bind groups)", per(rec_plain));
    println!("                        {rec_cached:.0} µs total, {:.2} µs per dispatch (BindCache; the attention dispatches get new parameter blocks as the position advances, no new bind groups)", per(rec_cached));
    println!("  submit                {sub_plain:.0} µs / {sub_cached:.0} µs with BindCache (params upload + queue submit)");
    println!("  GPU time              {gpu:.0} µs ({})", if timestamps { "timestamp queries" } else { "wall clock, submit to completion" });
    println!("  end to end            {e2e:.0} µs (record + submit + wait{})", if use_cache { ", BindCache" } else { "" });
    println!("  tokens/s              {:.1} (GPU time), {:.1} (end to end)", 1e6 / gpu, 1e6 / e2e);
    println!("  weights               {:.1} MB Q4_K -> {wgbs:.1} GB/s ({:.1}% of copy)", weight_bytes as f64 / 1e6, 100.0 * wgbs / copy_gbs);
    println!("  weights + KV read     {:.1} MB -> {allgbs:.1} GB/s ({:.1}% of copy)", (weight_bytes + kv_bytes) as f64 / 1e6, 100.0 * allgbs / copy_gbs);
    println!("  copy kernel           {copy_gbs:.0} GB/s read+write over {} MiB", copy_bytes >> 20);
    if nonfinite > 0 {
        println!("  note: {nonfinite} non-finite values in the final normed state (random weights)");
    }
    Ok(())
}
