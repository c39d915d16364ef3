//! Generate text from a GGUF model (any architecture of `model::arch`: llama, qwen2, qwen3, phi3, gemma2, gemma3) with the crate's kernels.
//!
//! ```text
//! cargo run --release --example generate -- MODEL.gguf -p "prompt" [-n 128] [--temp T] [--top-k K]
//!     [--top-p P] [--seed S] [--kv f16|turboquant] [--ctx N] [--chunk N] [--print-tokens]
//!     [--dump-logits FILE.npy] [--no-bos] [--f32-activations] [--unfused-norm] [--cpu-sample] [--gpu-time]
//!     [--pipeline-cache FILE | --no-pipeline-cache]
//! cargo run --release --example generate -- MODEL.gguf --chat [-p MESSAGE] [--system TEXT] [--stop STR]...
//! ```
//!
//! `--help` describes every flag. Arguments are checked before anything is loaded (`-p` is
//! required; sampler values, `--ctx`, `--chunk`, and that `--dump-logits` can be written).
//! Pipelines are built before the prompt runs (the decode step's on a second thread) through the
//! on-disk pipeline cache (`cli::default_pipeline_cache`), and the time to the first generated
//! token is printed, measured from the start of `main`, with its parts. `-n 0` generates nothing;
//! generation stops when the KV cache is full (`--ctx`), every mode emitting the same count
//! there: as many tokens as the cache has free positions after the prompt.
//!
//! Loads the weights tensor by tensor from the memory-mapped file (progress on stderr; the file
//! must not change while the example runs), prints
//! the GPU memory it holds (weights, KV cache, work buffers), streams the generated text, then
//! prompt tokens/s (prefill in chunks: GEMM + prefill attention) and decode tokens/s, and the
//! kernel variant chosen for each kernel the forward pass uses. `--temp 0` is greedy (the
//! default): the token is chosen and its embedding looked up on the GPU
//! (`Session::decode_greedy`), so steps run ahead of the host. Sampling with a temperature and
//! `--top-k` 1..=256 draws each token on the GPU too, from the exact top-k candidates
//! (`Session::decode_sampled`). `--cpu-sample` chooses every token on the CPU instead: greedy
//! from the read-back logits (`Session::decode_stream`), sampled from the read-back top-k
//! candidates (`Session::decode_stream_top_k`); `--top-k 0` or above 256 always samples the
//! read-back logits on the CPU.
//! `--print-tokens` prints the prompt's token ids and the generated ids;
//! `--dump-logits FILE.npy` writes the logits of every prompt position as float32
//! `[prompt tokens, vocab]`. Decode steps multiply Q4_K weights by int8-rounded activations (as
//! llama.cpp's GPU backends do), each RMSNorm and that rounding in one dispatch;
//! `--f32-activations` keeps them in f32, `--unfused-norm` makes the norm and the rounding two
//! dispatches (for comparisons). `--gpu-time` times every prefill chunk and decode step on the GPU
//! and reports, per decode token, GPU time, the CPU time not hidden behind the GPU, end-to-end
//! tokens/s and the dispatches of a step.
//!
//! `--chat` talks to an instruct model through the file's own chat template
//! (`wgkernels::model::chat`): with `-p` the one message's reply is printed; without, each line
//! read from standard input is a user message and the reply follows it, the conversation kept in
//! the KV cache from turn to turn (only the new turn's tokens run). `--system` sets a system
//! message, `--stop` adds a stop string (repeatable); replies end at the vocabulary's
//! end-of-generation tokens. A file without a template gets the messages as raw text, with a
//! warning.

#[path = "common/cli.rs"]
mod cli;

use std::io::Write;
use std::time::Instant;
use wgkernels::model::chat::{Chat, Message, Stop};
use wgkernels::model::tokenizer::Tokenizer;
use wgkernels::model::{ops, KvKind, Model, ModelError, Sampler, SamplerConfig, Session, SessionOptions};

struct Args {
    model: String,
    common: cli::Common,
    prompt: String,
    n: usize,
    sampler: SamplerConfig,
    kv: KvKind,
    ctx: Option<usize>,
    chunk: usize,
    print_tokens: bool,
    dump_logits: Option<String>,
    bos: bool,
    f32_activations: bool,
    unfused_norm: bool,
    cpu_sample: bool,
    gpu_time: bool,
    chat: bool,
    /// With --chat: `-p`'s message (one-shot); `None`: messages from standard input.
    chat_message: Option<String>,
    system: Option<String>,
    stop: Vec<String>,
}

const HELP: &str = "\
usage: generate MODEL.gguf -p PROMPT [-n 128] [--temp T] [--top-k K] [--top-p P] [--seed S] [--kv f16|turboquant] [--ctx N] [--chunk N] [--print-tokens] [--dump-logits FILE.npy] [--no-bos] [--f32-activations] [--unfused-norm] [--cpu-sample] [--gpu-time] [--chat [--system TEXT] [--stop STR]...] [--pipeline-cache FILE | --no-pipeline-cache]

Generates text from a GGUF model (llama, qwen2, qwen3, phi3, gemma2, gemma3) on the GPU.

  MODEL.gguf             the model file (memory-mapped; it must not change while this runs)
  -p, --prompt TEXT      the prompt (required except with --chat; may be empty: then generation
                         starts from BOS). With --chat: the one user message to reply to
  -n N                   tokens to generate, at most (default 128; 0 generates nothing); with --chat,
                         per reply
  --temp T               sampling temperature, finite and >= 0 (default 0: greedy)
  --top-k K              sample from the K most likely tokens (default 40; 0: all). With 1..=256 the
                         GPU picks the candidates and only they are read back
  --top-p P              sample from the smallest set of tokens whose probability reaches P, in (0, 1]
                         (default 0.95)
  --seed S               sampler seed (default 0)
  --kv f16|turboquant    KV cache: f16, or TurboQuant 4-bit codes (default f16)
  --ctx N                KV cache positions (default: prompt + N, capped at the model's trained
                         context); generation stops when the cache is full. A warning is printed
                         past the trained context
  --chunk N              most prompt tokens per prefill batch (default 512)
  --print-tokens         print the prompt's and the generated token ids
  --dump-logits FILE     write the logits of every prompt position to FILE as float32 .npy
                         [prompt tokens, vocab] (checked to be writable before the model loads)
  --no-bos               do not start the prompt with the vocabulary's BOS token
  --f32-activations      multiply weights by f32 activations (default: int8-rounded in decode steps
                         and short chunks, as llama.cpp's GPU backends)
  --unfused-norm         RMSNorm and the int8 rounding as two dispatches (for comparisons)
  --cpu-sample           choose every token on the CPU: greedy from the read-back logits, sampled
                         from the read-back top-k candidates (default: on the GPU, for --temp 0
                         and for a top-k of 1 to 256); --cpu-greedy is the same
  --gpu-time             time prefill chunks and decode steps on the GPU
  --chat                 talk through the file's chat template (tokenizer.chat_template; without one
                         the messages go as raw text, with a warning): with -p, print the reply to
                         that message; without, read user messages from standard input, one per
                         line, and reply to each, keeping the conversation in the KV cache (only the
                         new turn's tokens run). Replies end at the vocabulary's end-of-generation
                         tokens. --ctx defaults to the trained context, at most 4096. Not with
                         --dump-logits or --no-bos (the template places BOS)
  --system TEXT          with --chat: a system message first
  --stop STR             with --chat: end a reply where STR appears (repeatable)";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        common: cli::Common { pipeline_cache: None },
        prompt: String::new(),
        n: 128,
        sampler: SamplerConfig { temperature: 0.0, top_k: 40, top_p: 0.95, seed: 0 },
        kv: KvKind::F16,
        ctx: None,
        chunk: 512,
        print_tokens: false,
        dump_logits: None,
        bos: true,
        f32_activations: false,
        unfused_norm: false,
        cpu_sample: false,
        gpu_time: false,
        chat: false,
        chat_message: None,
        system: None,
        stop: Vec::new(),
    };
    let mut prompt = None;
    (a.model, a.common) = cli::parse(HELP, std::env::args().skip(1), |f, v| {
        match f {
            "-p" | "--prompt" => prompt = Some(v.value(f)?),
            "-n" => a.n = v.value(f)?,
            "--temp" => a.sampler.temperature = v.value(f)?,
            "--top-k" => a.sampler.top_k = v.value(f)?,
            "--top-p" => a.sampler.top_p = v.value(f)?,
            "--seed" => a.sampler.seed = v.value(f)?,
            "--kv" => a.kv = v.kv(f)?,
            "--ctx" => a.ctx = Some(v.value(f)?),
            "--chunk" => a.chunk = v.value(f)?,
            "--print-tokens" => a.print_tokens = true,
            "--dump-logits" => a.dump_logits = Some(v.value(f)?),
            "--no-bos" => a.bos = false,
            "--f32-activations" => a.f32_activations = true,
            "--unfused-norm" => a.unfused_norm = true,
            "--cpu-sample" | "--cpu-greedy" => a.cpu_sample = true,
            "--gpu-time" => a.gpu_time = true,
            "--chat" => a.chat = true,
            "--system" => a.system = Some(v.value(f)?),
            "--stop" => a.stop.push(v.value(f)?),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if a.chat {
        a.chat_message = prompt;
        for (set, flag) in [(a.dump_logits.is_some(), "--dump-logits"), (!a.bos, "--no-bos")] {
            if set {
                return Err(format!("{flag} does not go with --chat (the chat template places BOS)"));
            }
        }
    } else {
        a.prompt = prompt.ok_or_else(|| format!("-p PROMPT is required (it may be empty: -p \"\")\n{}", HELP.lines().next().unwrap_or_default()))?;
        if a.system.is_some() || !a.stop.is_empty() {
            return Err("--system and --stop go with --chat".into());
        }
    }
    // Everything that can be checked without the model, checked before anything is loaded.
    Sampler::new(a.sampler).map_err(|e| e.to_string())?;
    if a.ctx == Some(0) {
        return Err("--ctx must be at least 1".into());
    }
    if a.chunk == 0 {
        return Err("--chunk must be at least 1".into());
    }
    if let Some(path) = &a.dump_logits {
        // Created (or truncated) now, so that an unwritable path fails before the model loads.
        std::fs::File::create(path).map_err(|e| format!("--dump-logits {path}: {e}"))?;
    }
    Ok(a)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn size(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", mib(b))
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

/// float32 .npy, C order, shape [rows, cols].
fn write_npy(path: &str, data: &[f32], rows: usize, cols: usize) -> std::io::Result<()> {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(bytemuck::cast_slice(data));
    std::fs::write(path, out)
}

fn run(a: Args) -> cli::Res<()> {
    let (ctx, file) = cli::open(&a.model, &a.common)?;
    let t_ctx = cli::since_start();
    let tok = Tokenizer::from_gguf(&file)?;
    let t0 = Instant::now();
    let mut last_pct = usize::MAX;
    let model = Model::load(&ctx, file, &mut |p| {
        let pct = (p.bytes_done * 100 / p.bytes_total.max(1)) as usize;
        if pct != last_pct || p.tensors_done == p.tensors_total {
            last_pct = pct;
            let bar = "#".repeat(pct / 4) + &" ".repeat(25 - pct / 4);
            eprint!("\rloading [{bar}] {pct:3}% {}/{} tensors {:.0}/{:.0} MiB  ", p.tensors_done, p.tensors_total, mib(p.bytes_done), mib(p.bytes_total));
        }
    })?;
    let load_s = t0.elapsed().as_secs_f64();
    eprintln!("\nloaded in {load_s:.1} s");
    let c = &model.config;
    eprintln!(
        "model: {} {} layers, hidden {}, heads {}/{} of {}, FFN {}, vocab {}, rope base {} ({:?}{}), {}, trained context {}",
        c.arch.name(),
        c.layers,
        c.hidden,
        c.heads,
        c.kv_heads,
        c.head_dim,
        c.ffn,
        c.vocab,
        c.rope_theta,
        c.rope_scaling,
        if c.rope_freqs.is_some() { ", rope_freqs" } else { "" },
        if c.tied_embeddings { "tied embeddings" } else { "separate LM head" },
        c.context_length
    );
    if a.chat {
        return run_chat(&a, &ctx, &model, &tok);
    }
    let mut prompt = tok.encode(&a.prompt, a.bos)?;
    if prompt.is_empty() {
        prompt = tok.bos().into_iter().collect();
    }
    if prompt.is_empty() {
        return Err("the prompt tokenises to nothing and the vocabulary has no BOS".into());
    }
    let context = a.ctx.unwrap_or_else(|| (prompt.len() + a.n).min(c.context_length).max(prompt.len() + 1));
    if context > c.context_length {
        eprintln!(
            "warning: a context of {context} positions exceeds the {} the model was trained for: past it, output quality is not what the model was made for",
            c.context_length
        );
    }
    let mut session = new_session(&a, &ctx, &model, context, a.dump_logits.is_some())?;
    if a.print_tokens {
        println!("prompt tokens ({}): {:?}", prompt.len(), prompt);
    }
    let mut sampler = Sampler::new(a.sampler)?;
    // Greedy decoding, and sampling with a top-k the GPU chooses, pick each token on the GPU.
    let gpu_choice = !a.cpu_sample && (a.sampler.temperature == 0.0 || (1..=ops::TOP_K_MAX).contains(&a.sampler.top_k));
    // Tokens chosen on the GPU have their embedding rows looked up there: the table is uploaded
    // here too, not inside the first decode step's time.
    let warm_s = cli::warm_up(&ctx, &model, &session, prompt.len(), gpu_choice && a.n > 0)?;
    eprintln!("{} pipelines built{} in {warm_s:.2} s (not counted below)", ctx.built_pipelines().len(), if gpu_choice && a.n > 0 { " and embedding table uploaded" } else { "" });
    let t1 = Instant::now();
    let logits = session.prefill(&ctx, &model, &prompt)?;
    let prefill_s = t1.elapsed().as_secs_f64();
    if let Some(path) = &a.dump_logits {
        write_npy(path, &logits, prompt.len(), c.vocab)?;
        eprintln!("wrote {path}: float32 [{}, {}]", prompt.len(), c.vocab);
    }
    let mut dec = tok.decoder(false);
    let mut generated = Vec::new();
    print!("{}", a.prompt);
    let mut decode_s = 0.0;
    // Seconds from process start to the first generated token on the host.
    let mut first_token = None;
    // Decode steps whose time decode_s covers.
    let steps;
    if gpu_choice {
        // Chosen on the GPU: every token, the first included, is chosen by its own step.
        let t = Instant::now();
        let mut failed = None;
        session.decode_sampled(&ctx, &model, &mut sampler, a.n, |next| {
            first_token.get_or_insert_with(cli::since_start);
            generated.push(next);
            let shown = dec.push(next).map_err(|e| e.to_string()).and_then(|text| {
                print!("{text}");
                std::io::stdout().flush().map_err(|e| e.to_string())
            });
            if let Err(e) = shown {
                failed = Some(e);
                return Ok(false);
            }
            Ok(!tok.is_eog(next))
        })?;
        decode_s = t.elapsed().as_secs_f64();
        steps = generated.len();
        if let Some(e) = failed {
            return Err(e.into());
        }
        if session.kv().remaining() <= 1 && generated.len() < a.n {
            eprintln!("\n[context of {context} tokens full]");
        }
    } else {
        // The first token comes from the prompt's logits; each later one from the previous
        // step's, with the next step recorded while the GPU runs the current one
        // (Session::decode_stream). Sampling with 0 < top-k <= ops::TOP_K_MAX reads back only
        // the top-k candidates the GPU chose (Session::decode_stream_top_k), else the logits.
        //
        // Every emitted token but the last takes a cache position; like the GPU path (whose
        // steps each place their chosen token in the cache), this one emits at most as many
        // tokens as the cache has free positions, so both emit the same count at a full cache.
        let gpu_top_k = (a.sampler.temperature > 0.0 && (1..=ops::TOP_K_MAX).contains(&a.sampler.top_k)).then_some(a.sampler.top_k);
        let room = a.n.min(session.kv().remaining());
        let mut emit = |next: u32| -> Result<Option<u32>, Box<dyn std::error::Error>> {
            first_token.get_or_insert_with(cli::since_start);
            generated.push(next);
            print!("{}", dec.push(next)?);
            std::io::stdout().flush()?;
            Ok((!tok.is_eog(next) && generated.len() < room).then_some(next))
        };
        let first = match room {
            0 => None,
            _ => emit(sampler.sample(&logits[logits.len() - c.vocab..])?)?,
        };
        if let Some(first) = first {
            let t = Instant::now();
            let mut failed = None;
            let mut step = |next: Result<u32, ModelError>| match next.map_err(Into::into).and_then(&mut emit) {
                Ok(t) => Ok(t),
                Err(e) => {
                    failed = Some(e);
                    Ok(None)
                }
            };
            match gpu_top_k {
                Some(k) => session.decode_stream_top_k(&ctx, &model, first, k, |cands| step(sampler.sample_top_k(cands)))?,
                None => session.decode_stream(&ctx, &model, first, |logits| step(sampler.sample(logits)))?,
            };
            decode_s = t.elapsed().as_secs_f64();
            if let Some(e) = failed {
                return Err(e);
            }
        }
        if room < a.n && generated.len() == room && !generated.last().is_some_and(|&t| tok.is_eog(t)) {
            eprintln!("\n[context of {context} tokens full]");
        }
        steps = generated.len().saturating_sub(1);
    }
    println!("{}", dec.finish());
    if a.print_tokens {
        println!("generated tokens ({}): {:?}", generated.len(), generated);
    }
    if let Some(at) = first_token {
        eprintln!(
            "time to first token: {at:.2} s from process start (device and file {t_ctx:.2} s, weights {load_s:.2} s, pipelines {warm_s:.2} s, prompt {prefill_s:.2} s; pipeline cache: {})",
            a.common.pipeline_cache.as_ref().map_or("off".to_string(), |p| p.display().to_string())
        );
    }
    eprintln!("prompt: {} tokens in {:.3} s = {:.1} tok/s (chunks of {})", prompt.len(), prefill_s, prompt.len() as f64 / prefill_s, session.options().chunk);
    if steps > 0 {
        eprintln!("decode: {steps} tokens in {decode_s:.3} s = {:.1} tok/s", steps as f64 / decode_s);
    }
    let (gp, gd) = session.gpu_seconds();
    if a.gpu_time && gp > 0.0 {
        eprintln!("GPU time: prefill {:.3} s ({:.0}% of its wall time)", gp, 100.0 * gp / prefill_s);
        if steps > 0 {
            let (g, w) = (gd / steps as f64, decode_s / steps as f64);
            eprintln!(
                "GPU time: decode {:.3} ms per token ({:.1} tok/s by GPU time); wall {:.3} ms per token, of which {:.3} ms ({:.0}% of the GPU time) not covered by the GPU",
                1e3 * g,
                1.0 / g,
                1e3 * w,
                1e3 * (w - g),
                100.0 * (w - g) / g
            );
            eprintln!(
                "decode per token: GPU {:.3} ms, CPU not hidden by the GPU {:.3} ms ({:.1}% of GPU), end to end {:.1} tok/s, {} dispatches per step",
                1e3 * g,
                1e3 * (w - g),
                100.0 * (w - g) / g,
                1.0 / w,
                session.decode_dispatches(&ctx, &model)?
            );
        }
    }
    // Which kernels have a hand-written MSL variant comes from each kernel's registered variants,
    // so the report says what would run Native on a Metal adapter wherever it runs.
    eprintln!("kernel variants (WGKERNELS_VARIANT / the probe example explain the choice; on Metal: what a Mac with the Native tier runs):");
    let used = wgkernels::model::kernels_used(&model, a.kv);
    let has_msl = |k: &wgkernels::caps::KernelInfo| k.variants.contains(&wgkernels::Variant::Native);
    for k in &used {
        let v = ctx.variant_for(k).map(|v| v.name().to_string()).unwrap_or_else(|e| format!("unsupported: {e}"));
        let metal = if has_msl(k) { "native (MSL) where its self-check passes" } else { "WGSL (naga's MSL)" };
        eprintln!("  {:<22} {v:<10} on Metal: {metal}", k.name);
    }
    let native: Vec<&str> = used.iter().filter(|k| has_msl(k)).map(|k| k.name).collect();
    eprintln!("native on Metal: {} of {} kernels: {}", native.len(), used.len(), native.join(", "));
    Ok(())
}

/// The session of `context` positions the flags ask for, its GPU memory printed.
fn new_session(a: &Args, ctx: &wgkernels::Context, model: &Model, context: usize, all_logits: bool) -> cli::Res<Session> {
    let session = Session::new(
        ctx,
        model,
        SessionOptions {
            context,
            kv: a.kv,
            chunk: a.chunk,
            all_logits,
            int8_activations: !a.f32_activations,
            fused_norm: !a.unfused_norm,
            gpu_timing: a.gpu_time,
            ..SessionOptions::default()
        },
    )?;
    eprintln!(
        "GPU memory: weights {}, KV cache {} ({context} positions, {}), work buffers {}",
        size(model.weights.bytes),
        size(session.kv().bytes()),
        a.kv.name(),
        size(session.scratch_bytes())
    );
    if let Some(w) = model.config.ignored_window.filter(|&w| context > w) {
        eprintln!(
            "note: the file sets a sliding window of {w} positions, which llama.cpp does not apply to {} files and neither does this runner: past {w} positions the model attends further back than it was trained to",
            model.config.arch.name()
        );
    }
    Ok(session)
}

/// `--chat`: a conversation through the file's chat template, one-shot (`-p`) or from standard
/// input, on one session whose cache carries the conversation.
fn run_chat(a: &Args, ctx: &wgkernels::Context, model: &Model, tok: &Tokenizer) -> cli::Res<()> {
    let c = &model.config;
    let mut chat = Chat::from_gguf(&model.file, tok)?;
    if chat.template().is_none() {
        eprintln!("warning: the file has no chat template (tokenizer.chat_template): the messages go to the model as raw text, one per line");
    }
    let eog: Vec<String> = tok.eog_tokens().iter().map(|&t| format!("{t} {:?}", tok.token_text(t).unwrap_or_default())).collect();
    eprintln!("replies end at the end-of-generation tokens [{}]{}", eog.join(", "), if a.stop.is_empty() { String::new() } else { format!(" and the stop strings {:?}", a.stop) });
    chat.set_stop_strings(a.stop.clone());
    if let Some(s) = &a.system {
        chat.push(Message::system(s.clone()));
    }
    let context = a.ctx.unwrap_or(c.context_length.min(4096));
    let mut session = new_session(a, ctx, model, context, false)?;
    let mut sampler = Sampler::new(a.sampler)?;
    let greedy = a.sampler.temperature == 0.0;
    let warm_s = cli::warm_up(ctx, model, &session, a.chunk.min(context), greedy && a.n > 0)?;
    eprintln!("{} pipelines built in {warm_s:.2} s", ctx.built_pipelines().len());
    let mut turn = |chat: &mut Chat, session: &mut Session, message: &str| -> cli::Res<()> {
        let t = Instant::now();
        let mut failed = None;
        let reply = chat.reply(ctx, model, session, tok, &mut sampler, message, a.n, |text| {
            print!("{text}");
            if let Err(e) = std::io::stdout().flush() {
                failed = Some(e);
                return Ok(false);
            }
            Ok(true)
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        println!();
        let end = match &reply.stop {
            Stop::EndOfGeneration(t) => format!("end of generation {:?}", tok.token_text(*t).unwrap_or_default()),
            Stop::StopString(s) => format!("stop string {s:?}"),
            Stop::MaxTokens => format!("{} tokens (-n)", a.n),
            Stop::ContextFull => format!("context of {context} tokens full"),
            Stop::Cancelled => "cancelled".to_string(),
        };
        if a.print_tokens {
            println!("generated tokens ({}): {:?}", reply.tokens.len(), reply.tokens);
        }
        eprintln!(
            "[{end}; {} new prompt tokens, {} reused from the cache; {} tokens in {:.2} s; cache {} of {context}]",
            reply.prompt_tokens,
            reply.reused_tokens,
            reply.tokens.len(),
            t.elapsed().as_secs_f64(),
            session.kv().pos()
        );
        Ok(())
    };
    match &a.chat_message {
        Some(m) => turn(&mut chat, &mut session, m)?,
        None => {
            use std::io::BufRead;
            eprint!("> ");
            for line in std::io::stdin().lock().lines() {
                let line = line?;
                if !line.trim().is_empty() {
                    match turn(&mut chat, &mut session, &line) {
                        // A template that refuses the conversation (e.g. a role it does not
                        // take) leaves the conversation as it was: say so and read on.
                        Err(e) if matches!(e.downcast_ref::<ModelError>(), Some(ModelError::ChatTemplate(_))) => eprintln!("error: {e}"),
                        r => r?,
                    }
                }
                eprint!("> ");
            }
            eprintln!();
        }
    }
    Ok(())
}

fn main() {
    cli::process_start();
    cli::main_with(parse_args(), run);
}
