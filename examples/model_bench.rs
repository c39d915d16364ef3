//! Prompt and generation throughput of a GGUF model, measured the way llama.cpp's `llama-bench`
//! measures its `pp` and `tg` tests, so the two can be put side by side on the same file and GPU.
//!
//! ```text
//! cargo run --release --example model_bench -- MODEL.gguf [-p 512] [-n 128] [-d 0] [-r 5]
//!     [--kv f16|turboquant] [--chunk N] [--greedy-steps N] [--f32-activations] [--gpu-time] [--profile] [--seed S]
//!     [--pipeline-cache FILE | --no-pipeline-cache]
//! ```
//!
//! The tables are Markdown. After them, the time to first token from the start of `main` (the
//! first `pp` run's logits on the host, or the first `tg` token without a `pp` test), with its
//! parts: device, weights, pipelines (built up front, through the on-disk pipeline cache).
//!
//! - `pp N`: a prompt of N random token ids, from an empty cache, in chunks of `--chunk` (512,
//!   as llama.cpp's default micro-batch); the time runs until the last position's logits are on
//!   the host.
//! - `tg N`: N greedy decode steps from an empty cache (one token of context), token choice and
//!   embedding lookup on the GPU ([`Session::decode_greedy`]), each step's token read back.
//! - `-d D` (depth, as `llama-bench -d`): both tests start after a prefill of D random tokens
//!   instead of an empty cache (that prefill is not timed); the rows read `pp512 @ d4096`.
//!
//! Each test runs once untimed first (reported as "first run"), then `-r` timed repetitions;
//! the result is the mean ± standard deviation of the repetitions' tokens/s, as `llama-bench`
//! reports. With `--gpu-time`, the GPU time of the timed repetitions (timestamp queries around
//! each batch) and, for `tg`, the CPU time per token the GPU did not hide. `--profile` times
//! every dispatch of a prompt chunk (once before the first run, once after the repetitions) and
//! of a decode step, after the depth's context ([`Context::profiled_batch`]), and prints the GPU
//! time per kernel.

#[path = "common/cli.rs"]
mod cli;

use cli::Res;
use std::time::Instant;
use wgkernels::model::{KvKind, Model, Session, SessionOptions};
use wgkernels::Context;

struct Args {
    model: String,
    common: cli::Common,
    pp: usize,
    tg: usize,
    depth: usize,
    reps: usize,
    kv: KvKind,
    chunk: usize,
    greedy_steps: usize,
    f32_activations: bool,
    wide_gemm: bool,
    gpu_time: bool,
    profile: bool,
    seed: u64,
}

const HELP: &str = "\
usage: model_bench MODEL.gguf [-p 512] [-n 128] [-d 0] [-r 5] [--kv f16|turboquant] [--chunk N] [--greedy-steps N] [--f32-activations] [--one-pass-gemm] [--gpu-time] [--profile] [--seed S] [--pipeline-cache FILE | --no-pipeline-cache]

Prompt (pp) and generation (tg) tokens/s of a GGUF model, measured as llama.cpp's llama-bench
does; prints a Markdown table.

  MODEL.gguf             the model file (memory-mapped; it must not change while this runs)
  -p N                   pp test: a prompt of N random tokens from an empty cache (default 512; 0 skips it)
  -n N                   tg test: N greedy decode steps after one token (default 128; 0 skips it)
  -r N                   timed repetitions after one untimed first run (default 5, at least 1)
  -d D                   depth: tokens of context before each test (default 0)
  --kv f16|turboquant    KV cache: f16, or TurboQuant 4-bit codes (default f16)
  --chunk N              most prompt tokens per prefill batch (default 512)
  --greedy-steps N       tg: decode steps per queue submission, 1..=8 (default 4)
  --f32-activations      multiply weights by f32 activations (default: int8-rounded in decode steps)
  --one-pass-gemm        prompt chunks through the one-pass Matrix GEMM (default: two-pass where it applies)
  --gpu-time             also report GPU time per token and the CPU time the GPU did not hide
  --profile              GPU time of every kernel of a prompt chunk and of a decode step
  --seed S               seed of the random prompt tokens (default 1)";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        common: cli::Common { pipeline_cache: None },
        pp: 512,
        tg: 128,
        depth: 0,
        reps: 5,
        kv: KvKind::F16,
        chunk: 512,
        greedy_steps: SessionOptions::default().greedy_steps,
        f32_activations: false,
        wide_gemm: true,
        gpu_time: false,
        profile: false,
        seed: 1,
    };
    (a.model, a.common) = cli::parse(HELP, std::env::args().skip(1), |f, v| {
        match f {
            "-p" => a.pp = v.value(f)?,
            "-n" => a.tg = v.value(f)?,
            "-d" => a.depth = v.value(f)?,
            "-r" => a.reps = v.value(f)?,
            "--kv" => a.kv = v.kv(f)?,
            "--chunk" => a.chunk = v.value(f)?,
            "--greedy-steps" => a.greedy_steps = v.value(f)?,
            "--f32-activations" => a.f32_activations = true,
            "--one-pass-gemm" => a.wide_gemm = false,
            "--gpu-time" => a.gpu_time = true,
            "--profile" => a.profile = true,
            "--seed" => a.seed = v.value(f)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if a.reps == 0 {
        return Err("-r must be at least 1".into());
    }
    if a.chunk == 0 {
        return Err("--chunk must be at least 1".into());
    }
    if a.pp == 0 && a.tg == 0 && !a.profile {
        return Err("-p 0 and -n 0: nothing to measure".into());
    }
    Ok(a)
}

/// Mean and sample standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

/// One repetition's wall seconds and GPU seconds (zero without `--gpu-time`).
struct Rep {
    wall: f64,
    gpu: f64,
}

/// An empty cache, then the untimed `context` (the depth's tokens), if any.
fn start(ctx: &Context, model: &Model, s: &mut Session, context: &[u32]) -> Res<()> {
    s.reset();
    if !context.is_empty() {
        s.prefill(ctx, model, context)?;
    }
    Ok(())
}

/// `pp`: the prompt after the depth's context.
fn run_pp(ctx: &Context, model: &Model, s: &mut Session, depth: &[u32], prompt: &[u32]) -> Res<Rep> {
    start(ctx, model, s, depth)?;
    let g0 = s.gpu_seconds().0;
    let t = Instant::now();
    s.prefill(ctx, model, prompt)?;
    Ok(Rep { wall: t.elapsed().as_secs_f64(), gpu: s.gpu_seconds().0 - g0 })
}

/// `tg`: `n` greedy steps after the depth's context and one more token (their prefill not
/// timed). `first_token` gets the seconds from process start to the first generated token, if
/// it has none.
fn run_tg(ctx: &Context, model: &Model, s: &mut Session, context: &[u32], n: usize, first_token: &mut Option<f64>) -> Res<Rep> {
    start(ctx, model, s, context)?;
    let g0 = s.gpu_seconds().1;
    let t = Instant::now();
    let done = s.decode_greedy(ctx, model, n, |_| {
        first_token.get_or_insert_with(cli::since_start);
        Ok(true)
    })?;
    let wall = t.elapsed().as_secs_f64();
    if done != n {
        return Err(format!("tg: {done} of {n} steps ran").into());
    }
    Ok(Rep { wall, gpu: s.gpu_seconds().1 - g0 })
}

fn report(name: &str, tokens: usize, first: &Rep, reps: &[Rep], gpu_time: bool) {
    let ts: Vec<f64> = reps.iter().map(|r| tokens as f64 / r.wall).collect();
    let (m, sd) = mean_sd(&ts);
    print!("| {name:<6} | {m:>10.1} ± {sd:>7.1} | {:>10.1} |", tokens as f64 / first.wall);
    if gpu_time {
        let gpu: Vec<f64> = reps.iter().map(|r| r.gpu).collect();
        let (g, _) = mean_sd(&gpu);
        let wall = reps.iter().map(|r| r.wall).sum::<f64>() / reps.len() as f64;
        let per = |x: f64| 1e3 * x / tokens as f64;
        print!(" {:>10.3} | {:>10.1} | {:>12.3} |", per(g), tokens as f64 / g, per(wall - g));
    }
    println!();
}

/// Time every dispatch of one prompt chunk of `m` tokens (or, with `m == 0`, of one decode
/// step) after `context` (the depth's tokens, prefilled first), and print the GPU time per
/// kernel, largest first.
fn profile(ctx: &Context, model: &Model, s: &mut Session, m: usize, context: &[u32], title: &str) -> Res<()> {
    start(ctx, model, s, context)?;
    let mut b = ctx.profiled_batch(2048)?;
    if m == 0 {
        s.record_decode(&mut b, model, context.len())?;
    } else {
        s.record_chunk(&mut b, model, m, context.len(), false)?;
    }
    let times = b.submit()?.profile()?.unwrap_or_default();
    let total: f64 = times.iter().map(|t| t.1).sum();
    let mut per: Vec<(String, usize, f64)> = Vec::new();
    for (label, ns) in times {
        match per.iter_mut().find(|p| p.0 == label) {
            Some(p) => {
                p.1 += 1;
                p.2 += ns;
            }
            None => per.push((label, 1, ns)),
        }
    }
    per.sort_by(|a, b| b.2.total_cmp(&a.2));
    println!("\n{title}: {} dispatches, {:.1} µs summed\n", per.iter().map(|p| p.1).sum::<usize>(), total * 1e-3);
    println!("| kernel | dispatches | µs | % |");
    println!("|---|--:|--:|--:|");
    for (label, n, ns) in &per {
        println!("| {label} | {n} | {:.1} | {:.1} |", ns * 1e-3, 100.0 * ns / total.max(1.0));
    }
    Ok(())
}

fn run(a: Args) -> Res<()> {
    let (ctx, file) = cli::open(&a.model, &a.common)?;
    let t_ctx = cli::since_start();
    let t0 = Instant::now();
    let model = Model::load(&ctx, file, &mut |_| {})?;
    let load_s = t0.elapsed().as_secs_f64();
    eprintln!("loaded in {load_s:.1} s");
    let c = &model.config;
    let context = a.pp.max(a.tg + 1).max(2).checked_add(a.depth).ok_or("-d: too many positions")?;
    if context > c.context_length {
        eprintln!("warning: a context of {context} positions exceeds the {} the model was trained for", c.context_length);
    }
    let mut s = Session::new(
        &ctx,
        &model,
        SessionOptions {
            context,
            kv: a.kv,
            chunk: a.chunk,
            all_logits: false,
            int8_activations: !a.f32_activations,
            fused_norm: true,
            gpu_timing: a.gpu_time,
            greedy_steps: a.greedy_steps,
            wide_gemm: a.wide_gemm,
        },
    )?;
    let warm_s = cli::warm_up(&ctx, &model, &s, a.pp.max(1), a.tg > 0)?;
    eprintln!("{} pipelines built in {warm_s:.2} s", ctx.built_pipelines().len());
    let mut rng = fastrand::Rng::with_seed(a.seed);
    let vocab = u32::try_from(c.vocab).map_err(|_| "vocabulary too large")?;
    let prompt: Vec<u32> = (0..a.pp).map(|_| rng.u32(0..vocab)).collect();
    // The depth's context, and that context plus one token for `tg`.
    let mut depth: Vec<u32> = (0..a.depth).map(|_| rng.u32(0..vocab)).collect();
    let at = if a.depth > 0 { format!(" @ d{}", a.depth) } else { String::new() };
    println!(
        "{} {} layers, hidden {}, vocab {}, {} KV cache, {} activations, chunks of {}, {} repetitions\n",
        c.arch.name(),
        c.layers,
        c.hidden,
        c.vocab,
        a.kv.name(),
        if a.f32_activations { "f32" } else { "int8 decode" },
        a.chunk,
        a.reps
    );
    let chunk = a.pp.min(a.chunk);
    if a.profile && chunk > 0 {
        // Before anything has run: what a first prompt pays.
        profile(&ctx, &model, &mut s, chunk, &[], &format!("profile: the first {chunk}-token chunk after loading"))?;
        println!();
    }
    let mut first_token = None;
    if a.pp > 0 || a.tg > 0 {
        print!("| test   | tokens/s (mean ± sd) | first run  |");
        if a.gpu_time {
            print!(" GPU ms/tok | tok/s (GPU) | CPU ms/tok not hidden |");
        }
        println!();
        print!("|--------|---------------------:|-----------:|");
        if a.gpu_time {
            print!("-----------:|------------:|----------------------:|");
        }
        println!();
    }
    if a.pp > 0 {
        let first = run_pp(&ctx, &model, &mut s, &depth, &prompt)?;
        // The first prompt's last logits are on the host: its next token could be drawn now.
        first_token.get_or_insert_with(cli::since_start);
        let reps = (0..a.reps).map(|_| run_pp(&ctx, &model, &mut s, &depth, &prompt)).collect::<Res<Vec<_>>>()?;
        report(&format!("pp{}{at}", a.pp), a.pp, &first, &reps, a.gpu_time);
    }
    if a.tg > 0 {
        depth.push(rng.u32(0..vocab));
        let first = run_tg(&ctx, &model, &mut s, &depth, a.tg, &mut first_token)?;
        let reps = (0..a.reps).map(|_| run_tg(&ctx, &model, &mut s, &depth, a.tg, &mut None)).collect::<Res<Vec<_>>>()?;
        report(&format!("tg{}{at}", a.tg), a.tg, &first, &reps, a.gpu_time);
    }
    if let Some(at) = first_token {
        println!(
            "\ntime to first token: {at:.2} s from process start (device and file {t_ctx:.2} s, weights {load_s:.2} s, pipelines {warm_s:.2} s, then the first {}; pipeline cache: {})",
            if a.pp > 0 { format!("pp{} run", a.pp) } else { "tg step".to_string() },
            a.common.pipeline_cache.as_ref().map_or("off".to_string(), |p| p.display().to_string())
        );
    }
    if a.profile {
        // The depth's context without the token `tg` added to it.
        let depth = &depth[..a.depth];
        if a.pp > 0 {
            profile(&ctx, &model, &mut s, chunk, depth, &format!("profile: a {chunk}-token chunk{at} after the runs above"))?;
        }
        profile(&ctx, &model, &mut s, 0, depth, &format!("profile: one decode step{at}"))?;
    }
    Ok(())
}

fn main() {
    cli::process_start();
    cli::main_with(parse_args(), run);
}
