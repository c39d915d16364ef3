//! The forward pass: a loaded [`Model`] and a [`Session`] (KV cache + work buffers) that records
//! a whole decode step, or a prefill chunk of up to `chunk` tokens, into one [`Batch`].
//!
//! Per layer (m tokens at positions `pos0..pos0 + m`; `x` is the residual stream `[m, hidden]`),
//! as the model's [`super::arch::Spec`] describes it:
//! RMSNorm; the q, k, v projections plus biases (qwen2), one matrix of rows `[q; k; v]` where
//! the three share a type ([`super::weights::Layer::qkv`]): a decode step's GEMV writes `qkv` and
//! attention reads q, k and v as views of it (where the device's storage offset alignment
//! allows; else, as in a prefill chunk's GEMM, `qkv` is split into q, k, v by one dispatch that
//! also adds the biases); the per-head RMSNorm of q and k (qwen3, gemma3; one dispatch for both,
//! [`elementwise::rmsnorm_qk`]); attention:
//! * prefill chunk: the chunk's keys are rotated and stored with its values into the cache
//!   ([`super::ops::kv_store`]), then the prefill kernel attends from the chunk's queries (rotated
//!   on load at `pos0 + t`) over cache positions `0..pos0 + m`, causally;
//! * decode step (m = 1): [`attention::decode`] rotates q and k, appends k and v to the cache and
//!   runs the split-K decode over positions `0..=pos`;
//!
//! then the output projection and residual add, RMSNorm, gate and up projections, SiLU gate,
//! down projection and residual add (with post-norms, gemma2 / gemma3: each projection's output
//! normalised, then added; in a decode step each such add and the RMSNorm after it are one
//! dispatch, [`q8::post_norm`]). Then the final RMSNorm and the LM head: for every row
//! (`all_logits`) or only the last one.
//!
//! All buffers are allocated once per session (sized by `chunk` and the context) and reused by
//! every step. The embedding rows of a step's tokens are dequantised on the CPU from the mapped
//! file and written into `x` before the batch runs; a prefill chunk's rows are looked up on the
//! GPU instead ([`mm::gather_rows`], the token ids written before the batch runs) where the
//! table is on the GPU ([`Model::gpu_embeddings_loaded`]). A decode step is one submit and one wait: its
//! batch starts with the copy of the embedding row from a host-writable buffer
//! ([`Batch::copy_from_host`]) and ends with the copy of the logits into a host-readable one
//! ([`Batch::copy_to_host`]); both are mapped again by the wait on the step.

use super::config::Config;
use super::error::{ModelError, Result};
use super::kv::{check_kind, KvCache, KvKind, LayerKv};
use super::mm::{self};
use super::ops;
use super::weights::{FfnIn, Progress, Weights};
use crate::batch::{Batch, BindCache, GpuTimer};
use crate::buffer::{GpuBuffer, HostReadback, HostUpload};
use crate::context::Context;
use crate::formats::gguf::GgufFile;
use crate::kernels::attention::{self, AttnShape, Decode, DecodeScratch, Prefill};
use crate::kernels::matmul::{has_integer_dot, Epilogue, GemvInput};
use crate::kernels::q8::{self, Q8Activations};
use crate::kernels::rope::{self, Positions, RopeConfig, RopeScaling, RopeTable};
use crate::kernels::{elementwise, turboquant as tq};
use layer::QkvViews;
use std::path::Path;

mod greedy;
mod layer;
mod top_k;

/// Dispatches in the first submission of a prefill chunk, each next one twice as many: the GPU
/// runs a part while the CPU records the next (a 512-token chunk of an 8B model is about 740
/// dispatches: six submissions).
const PREFILL_FIRST: usize = 16;

/// A model file and its weights on the GPU.
pub struct Model {
    pub file: GgufFile,
    pub config: Config,
    pub weights: Weights,
    /// The embedding table on the GPU, uploaded on first use ([`Model::gpu_embeddings`]).
    embd: std::sync::OnceLock<mm::WeightMatrix>,
    /// Unique per loaded model in the process: a [`Session`] runs only with the model it was
    /// made for.
    id: u64,
}

/// The ids of [`Model`]s loaded so far.
static MODEL_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Model {
    /// Read the configuration and upload the weights of an opened file.
    pub fn load(ctx: &Context, file: GgufFile, progress: &mut dyn FnMut(&Progress)) -> Result<Model> {
        let config = Config::from_gguf(&file)?;
        let weights = Weights::load(ctx, &file, &config, progress)?;
        // The weights' copies run now, as part of loading, not inside the first prefill.
        ctx.finish_uploads()?;
        let id = MODEL_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Model { file, config, weights, embd: std::sync::OnceLock::new(), id })
    }

    /// The embedding table as a GPU matrix (for [`Session::decode_greedy`] and
    /// [`Session::decode_sampled`], which look the chosen tokens' rows up on the GPU): the LM
    /// head itself where the model ties them, else
    /// `token_embd.weight`, uploaded on the first call (its size in GPU memory again, e.g.
    /// 282 MiB for a Q4_K Llama-3-8B table).
    pub fn gpu_embeddings(&self, ctx: &Context) -> Result<&mm::WeightMatrix> {
        if self.config.tied_embeddings {
            return Ok(&self.weights.lm_head);
        }
        if let Some(w) = self.embd.get() {
            return Ok(w);
        }
        let w = mm::WeightMatrix::from_gguf(ctx, &self.file, "token_embd.weight")?;
        ctx.finish_uploads()?;
        Ok(self.embd.get_or_init(|| w))
    }

    /// The embedding table on the GPU if it is there already (tied embeddings, or after
    /// [`Model::gpu_embeddings`]): [`Session::prefill`] then looks a prompt's rows up on the GPU
    /// instead of dequantising them on the CPU.
    pub fn gpu_embeddings_loaded(&self) -> Option<&mm::WeightMatrix> {
        if self.config.tied_embeddings {
            Some(&self.weights.lm_head)
        } else {
            self.embd.get()
        }
    }

    /// Read `path` into memory ([`GgufFile::open`]) and [`Model::load`] it. A file that is no
    /// valid GGUF file is [`ModelError::File`], naming the path. The whole file is read (its
    /// weights are then uploaded tensor by tensor); to avoid that copy on a large model, see
    /// [`Model::open_mapped`].
    pub fn open(ctx: &Context, path: impl AsRef<Path>, progress: &mut dyn FnMut(&Progress)) -> Result<Model> {
        let path = path.as_ref();
        Self::load(ctx, GgufFile::open(path).map_err(|e| Self::file_error(path, e))?, progress)
    }

    /// [`Model::open`] over a memory map of the file ([`GgufFile::open_mapped`]): a 4 GB model
    /// is paged in as its tensors are uploaded, never copied into RAM as a whole.
    ///
    /// # Safety
    ///
    /// [`GgufFile::open_mapped`]'s contract: the file must not be truncated or modified while
    /// the returned `Model` is alive (the model keeps the map for its tied or untied
    /// embedding rows).
    pub unsafe fn open_mapped(ctx: &Context, path: impl AsRef<Path>, progress: &mut dyn FnMut(&Progress)) -> Result<Model> {
        let path = path.as_ref();
        // SAFETY: the caller upholds the mapping's contract, stated above.
        let file = unsafe { GgufFile::open_mapped(path) }.map_err(|e| Self::file_error(path, e))?;
        Self::load(ctx, file, progress)
    }

    /// An I/O error names its path already; any other error of the file gets the path.
    fn file_error(path: &Path, e: crate::formats::FormatError) -> ModelError {
        match e {
            e @ crate::formats::FormatError::Io(_) => ModelError::Format(e),
            error => ModelError::File { path: path.to_path_buf(), error },
        }
    }
}

/// What a [`Session`] is sized for.
#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    /// Positions the KV cache holds (prompt + generated tokens).
    pub context: usize,
    pub kv: KvKind,
    /// Most tokens per prefill batch (default 512: on an H100 a 516-token prompt of a
    /// Llama-3-8B-shaped Q4_K model ran at 1250-1490 tokens/s in chunks of 512, 690 in chunks of
    /// 64; the work buffers grow with it, ~130 MiB at 512 for that model).
    pub chunk: usize,
    /// Keep the logits of every prompt position (a `[chunk, vocab]` buffer), not only the last.
    pub all_logits: bool,
    /// Decode steps, and prefill chunks of at most [`crate::kernels::matmul::GEMM_Q8_MAX_M`]
    /// (16) tokens, multiply weights of formats with an integer dot (Q4_K, Q6_K, Q8_0, Q4_0) by
    /// activations rounded to int8 per block of 32 (one quantisation per matrix input, shared by
    /// q/k/v and by gate/up), as llama.cpp's GPU backends do; faster, and within the int8
    /// rounding of the f32 path (so such a prefill chunk's logits differ from the f32 path's by
    /// that rounding, as a decode step's do). Other formats, longer prefill chunks and the
    /// logits of every position (`all_logits`) always use f32 activations. A NaN or an infinity
    /// in the activations gives NaN logits on both paths.
    pub int8_activations: bool,
    /// With `int8_activations`, a decode step computes each RMSNorm and the int8 quantisation of
    /// its output in one dispatch ([`q8::rmsnorm_quantize`]) instead of two; and in a model with
    /// post-norms (Gemma) each post-norm's residual add and the RMSNorm after it (with its
    /// quantisation where wanted) are one dispatch ([`q8::post_norm`], hidden size a multiple
    /// of 32) instead of two (default on; off is for comparisons).
    pub fused_norm: bool,
    /// Time every prefill chunk and decode step on the GPU (timestamp queries, where the adapter
    /// has them): [`Session::gpu_seconds`]. Costs a small readback per batch.
    pub gpu_timing: bool,
    /// Decode steps [`Session::decode_greedy`] and [`Session::decode_sampled`] record into one
    /// submission (1..=8, default 4):
    /// more amortise the fixed cost of a queue submission (GPU idle time between submissions)
    /// over several tokens, and hand the tokens to `emit` in groups of that size; after `emit`
    /// says stop, up to twice this many steps in flight still run.
    pub greedy_steps: usize,
    /// Prefill chunks of at least [`crate::kernels::matmul::wide::WIDE_MIN_M`] tokens multiply
    /// through the two-pass Matrix GEMM ([`crate::kernels::matmul::gemm_staged`]) where the
    /// adapter runs the GEMM as Matrix: faster, same numerics, and work buffers of f16 copies of
    /// the largest weight matrix and of a chunk's longest input rows (~240 MiB for a
    /// Llama-3-8B-shaped model; [`Session::scratch_bytes`] counts them). Default on; off is for
    /// comparisons and tight memory.
    pub wide_gemm: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            context: 2048,
            kv: KvKind::F16,
            chunk: 512,
            all_logits: false,
            int8_activations: true,
            fused_norm: true,
            gpu_timing: false,
            greedy_steps: 4,
            wide_gemm: true,
        }
    }
}

/// Activations of one batch of up to `chunk` tokens.
struct Scratch {
    x: GpuBuffer<f32>,
    xn: GpuBuffer<f32>,
    q: GpuBuffer<f32>,
    k: GpuBuffer<f32>,
    v: GpuBuffer<f32>,
    attn: GpuBuffer<f32>,
    tmp: GpuBuffer<f32>,
    gate: GpuBuffer<f32>,
    up: GpuBuffer<f32>,
    /// The q/k/v projections' output rows `[chunk, q_dim + 2 kv_dim]`.
    qkv: GpuBuffer<f32>,
    /// Views of `qkv`'s first row (`None` where the device's storage offset alignment does not
    /// allow them): q, k and v, and the rows of every run of them (`(start, end, view)`), so a
    /// decode step's projections write where attention reads, with no copy.
    qkv_views: Option<QkvViews>,
    /// q and k after their per-head RMSNorm `[chunk, q_dim]`, `[chunk, kv_dim]` (architectures
    /// with q/k norms).
    qk: Option<[GpuBuffer<f32>; 2]>,
    /// The residual `[hidden]` between the two post-norms of a decode step's layer, where each
    /// post-norm folds into the RMSNorm after it ([`q8::post_norm`]; models with post-norms,
    /// `fused_norm` on, hidden a multiple of 32).
    x2: Option<GpuBuffer<f32>>,
    /// The last row of `x` (when only the last position's logits are wanted).
    last: GpuBuffer<f32>,
    logits: GpuBuffer<f32>,
    decode: DecodeScratch,
    /// int8 activations of the decode GEMV inputs of width hidden, q_dim and ffn (where the
    /// width is a multiple of 256, which the integer dot needs).
    q8: [Option<Q8Activations>; 3],
    /// The same for the GEMM inputs of prefill chunks of 2..=16 tokens (`min(chunk, 16)` rows).
    q8_rows: [Option<Q8Activations>; 3],
    /// The two-pass Matrix GEMM's work buffers (`wide_gemm`, where it can apply).
    gemm: Option<mm::GemmScratch>,
    /// A prefill chunk's token ids, for the embedding lookup on the GPU.
    toks: GpuBuffer<u32>,
    bytes: u64,
}

/// A KV cache and the work buffers of the forward pass, for one sequence, of the [`Model`] it
/// was made for: every method taking a model returns [`ModelError::ForeignModel`] for another.
pub struct Session {
    /// [`Model::id`] of the model the session was made for.
    model: u64,
    opts: SessionOptions,
    kv: KvCache,
    table: RopeTable,
    /// The RoPE table of the windowed layers, where their base differs.
    table_local: Option<RopeTable>,
    s: Scratch,
    bind: std::sync::Arc<BindCache>,
    host_x: Vec<f32>,
    /// The logits `[vocab]` of the last decode step, and the host-readable buffer each step's
    /// batch copies them into (so a step is one submit and one wait).
    logits: Vec<f32>,
    readback: HostReadback<f32>,
    /// A decode step's embedding row, copied into `x` at the start of the step's batch.
    upload: HostUpload<f32>,
    /// Timestamp queries shared by every batch (`gpu_timing`, where the adapter has them).
    timer: Option<GpuTimer>,
    /// Where the logits of the last position run so far start in `s.logits` (`None`: nothing
    /// has run, or [`Session::decode_greedy`] left them stale).
    logits_row: Option<usize>,
    /// [`Session::decode_greedy`]'s ring of token slots and their host readbacks.
    greedy: greedy::Ring,
    /// [`Session::decode_stream_top_k`]'s top-k buffers, readback and candidates.
    top: top_k::TopK,
    /// GPU nanoseconds of the prefill chunks and decode steps run so far (`gpu_timing`).
    gpu_ns: [f64; 2],
}

/// The two-pass GEMM's work buffers for prefill chunks of `opts.chunk` tokens, sized for the
/// layer matrices that the context multiplies as Matrix at that m (`None` if none does, or
/// `wide_gemm` is off, or chunks are too short for the two-pass path).
fn gemm_scratch(ctx: &Context, model: &Model, opts: SessionOptions) -> Result<Option<mm::GemmScratch>> {
    if !opts.wide_gemm {
        return Ok(None);
    }
    let mut shapes = Vec::new();
    for l in &model.weights.layers {
        let ffn: Vec<&mm::WeightMatrix> = match &l.ffn_in {
            FfnIn::GateUp(w) => vec![w],
            FfnIn::Separate { gate, up } => vec![gate, up],
        };
        for w in l.qkv.iter().chain([&l.wo, &l.w_down]).chain(ffn) {
            if !shapes.contains(&(w.n(), w.k())) && mm::wide::applies(ctx, w.format(), opts.chunk, w.k())? {
                shapes.push((w.n(), w.k()));
            }
        }
    }
    if shapes.is_empty() {
        return Ok(None);
    }
    Ok(Some(mm::GemmScratch::new(ctx, opts.chunk, &shapes)?))
}

/// int8 activation storage for a GEMV input of width `k`, when the session uses them and `k`
/// allows the integer dot.
fn q8_slot(ctx: &Context, opts: SessionOptions, k: usize) -> Result<Option<Q8Activations>> {
    Ok(if opts.int8_activations && k % 256 == 0 { Some(Q8Activations::alloc(ctx, k)?) } else { None })
}

/// [`q8_slot`] for the prefill chunks of several tokens that [`crate::kernels::matmul::gemm_q8`]
/// takes (none when every chunk is one token).
fn q8_rows_slot(ctx: &Context, opts: SessionOptions, k: usize) -> Result<Option<Q8Activations>> {
    let rows = opts.chunk.min(crate::kernels::matmul::GEMM_Q8_MAX_M);
    Ok(if opts.int8_activations && k % 256 == 0 && rows > 1 { Some(Q8Activations::alloc_rows(ctx, k, rows)?) } else { None })
}

fn mul(a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| ModelError::Argument(format!("{a} x {b} overflows")))
}

impl Session {
    /// Allocate the cache (`opts.context` positions), the RoPE table and the work buffers.
    pub fn new(ctx: &Context, model: &Model, opts: SessionOptions) -> Result<Session> {
        let c = &model.config;
        if opts.chunk == 0 {
            return Err(ModelError::Argument("chunk = 0".into()));
        }
        check_kind(c, opts.kv)?;
        // The TurboQuant attention kernel has no score soft-cap.
        if opts.kv == KvKind::TurboQuant && c.attn_softcap.is_some() {
            return Err(ModelError::Unsupported { arch: c.arch.name().into(), what: "attention soft-capping with a TurboQuant KV cache".into() });
        }
        let chunk = opts.chunk.min(opts.context.max(1));
        let opts = SessionOptions { chunk, ..opts };
        let kv = KvCache::new(ctx, c, opts.kv, opts.context)?;
        let table = match c.rope_table(opts.context) {
            None => RopeTable::build(ctx, c.rope_config_for(opts.context), opts.context)?,
            Some(host) => {
                let mut t = RopeTable::new(ctx, c.rope_config_for(opts.context), opts.context)?;
                t.set_buffer(ctx.upload(&host)?)?;
                t
            }
        };
        // The windowed layers' own RoPE base (Gemma 3), unscaled.
        let table_local = match c.rope_base_local {
            Some(base) => Some(RopeTable::build(ctx, RopeConfig::new(c.head_dim, base, RopeScaling::Default), opts.context)?),
            None => None,
        };
        let logit_rows = if opts.all_logits { chunk } else { 1 };
        // x, xn, q, k, v, attn, tmp, gate, up (up also holds a chunk's interleaved (gate, up) pairs).
        let sizes = [c.hidden, c.hidden, c.q_dim(), c.kv_dim(), c.kv_dim(), c.q_dim(), c.hidden, c.ffn, mul(2, c.ffn)?];
        let mut bufs = Vec::with_capacity(sizes.len());
        let mut bytes = 0u64;
        for n in sizes {
            let len = mul(chunk, n)?;
            bufs.push(ctx.alloc::<f32>(len)?);
            bytes += 4 * len as u64;
        }
        let n3 = mul(2, c.kv_dim())?.checked_add(c.q_dim()).ok_or_else(|| ModelError::Argument("q + k + v widths overflow".into()))?;
        let qkv = ctx.alloc::<f32>(mul(chunk, n3)?)?;
        bytes += 4 * qkv.len() as u64;
        let qkv_views = QkvViews::new(ctx, &qkv, c.q_dim(), c.kv_dim())?;
        let qk = if c.qk_norm { Some([ctx.alloc::<f32>(mul(chunk, c.q_dim())?)?, ctx.alloc::<f32>(mul(chunk, c.kv_dim())?)?]) } else { None };
        bytes += qk.iter().flatten().map(|b| 4 * b.len() as u64).sum::<u64>();
        let x2 = if c.post_norms && opts.fused_norm && c.hidden % q8::QB == 0 { Some(ctx.alloc::<f32>(c.hidden)?) } else { None };
        bytes += x2.as_ref().map_or(0, |b| 4 * b.len() as u64);
        let logits = ctx.alloc::<f32>(mul(logit_rows, c.vocab)?)?;
        bytes += 4 * (logit_rows * c.vocab + c.hidden) as u64;
        let shape = AttnShape::new(c.heads, c.kv_heads, c.head_dim);
        let decode = DecodeScratch::new(ctx, shape)?;
        bytes += 4 * (c.heads * c.head_dim * (attention::MAX_CHUNKS + 1) + 2 * c.heads * attention::MAX_CHUNKS) as u64;
        let mut it = bufs.into_iter();
        let mut next = || it.next().expect("nine buffers");
        let mut s = Scratch {
            x: next(),
            xn: next(),
            q: next(),
            k: next(),
            v: next(),
            attn: next(),
            tmp: next(),
            gate: next(),
            up: next(),
            qkv,
            qkv_views,
            qk,
            x2,
            last: ctx.alloc(c.hidden)?,
            logits,
            decode,
            q8: [q8_slot(ctx, opts, c.hidden)?, q8_slot(ctx, opts, c.q_dim())?, q8_slot(ctx, opts, c.ffn)?],
            q8_rows: [q8_rows_slot(ctx, opts, c.hidden)?, q8_rows_slot(ctx, opts, c.q_dim())?, q8_rows_slot(ctx, opts, c.ffn)?],
            gemm: gemm_scratch(ctx, model, opts)?,
            toks: ctx.alloc(chunk)?,
            bytes,
        };
        s.bytes += s.gemm.as_ref().map_or(0, |g| g.bytes());
        // int8 activations: 2 bytes per column in each of the two orders.
        s.bytes += s.q8.iter().chain(&s.q8_rows).flatten().map(|q| 4 * (q.rows() * q.k()) as u64).sum::<u64>();
        let readback = ctx.host_readback(c.vocab)?;
        let upload = ctx.host_upload(c.hidden)?;
        let timer = if opts.gpu_timing { ctx.gpu_timer() } else { None };
        let host_x = Vec::with_capacity(mul(chunk, c.hidden)?);
        let greedy = greedy::Ring::new(ctx, opts.gpu_timing, opts.greedy_steps)?;
        let top = top_k::TopK::new(ctx, c.vocab)?;
        s.bytes += top.bytes();
        Ok(Session {
            model: model.id,
            opts,
            kv,
            table,
            table_local,
            s,
            bind: Default::default(),
            host_x,
            logits: vec![0.0; c.vocab],
            readback,
            upload,
            timer,
            logits_row: None,
            greedy,
            top,
            gpu_ns: [0.0; 2],
        })
    }

    pub fn options(&self) -> &SessionOptions {
        &self.opts
    }
    pub fn kv(&self) -> &KvCache {
        &self.kv
    }
    /// GPU bytes of the work buffers (activations, logits, decode scratch).
    pub fn scratch_bytes(&self) -> u64 {
        self.s.bytes
    }
    /// GPU seconds of the prefill chunks and of the decode steps run so far, with
    /// [`SessionOptions::gpu_timing`] on an adapter with timestamp queries (else zero).
    pub fn gpu_seconds(&self) -> (f64, f64) {
        (self.gpu_ns[0] * 1e-9, self.gpu_ns[1] * 1e-9)
    }

    fn new_batch<'c>(&self, ctx: &'c Context) -> Batch<'c> {
        match &self.timer {
            Some(t) => ctx.timed_batch_with(t),
            None => ctx.batch(),
        }
    }

    /// Wait for `sub`, adding its GPU time to slot `i` of `gpu_ns` when timed.
    fn finish_timed(gpu_ns: &mut [f64; 2], i: usize, timing: bool, sub: crate::batch::Submitted) -> Result<()> {
        if timing {
            gpu_ns[i] += sub.gpu_ns()?.unwrap_or(0.0);
        } else {
            sub.wait()?;
        }
        Ok(())
    }

    /// [`ModelError::ForeignModel`] unless `model` is the one the session was made for.
    fn check_model(&self, model: &Model) -> Result<()> {
        if model.id == self.model {
            Ok(())
        } else {
            Err(ModelError::ForeignModel)
        }
    }

    /// Forget the sequence (the cache keeps its buffers).
    pub fn reset(&mut self) {
        self.kv.clear();
        self.logits_row = None;
    }

    /// Keep the first `keep` positions of the sequence and forget the rest: the next token goes
    /// to position `keep`, and what the cache holds of positions `0..keep` is used as it is (a
    /// conversation whose new rendering shares only a prefix with the cached one runs only what
    /// follows that prefix). The last logits are forgotten with the positions (a
    /// [`Session::decode_greedy`] needs a prefill or decode step first).
    /// [`ModelError::TruncatePastEnd`] where `keep` exceeds the positions written.
    pub fn truncate(&mut self, keep: usize) -> Result<()> {
        let len = self.kv.pos();
        if keep > len {
            return Err(ModelError::TruncatePastEnd { keep, len });
        }
        self.kv.truncate(keep);
        self.logits_row = None;
        Ok(())
    }

    /// Check the tokens and write their embeddings into `x`.
    fn embed(&mut self, ctx: &Context, model: &Model, tokens: &[u32]) -> Result<()> {
        self.embed_host(model, tokens)?;
        ctx.write(&self.s.x, &self.host_x)?;
        Ok(())
    }

    /// Record the embedding lookup of `m` tokens whose ids `idx` holds on the GPU from the table
    /// `embd` (the model's, on the GPU) into `x`, scaled where the model scales its embeddings.
    fn record_lookup(&self, b: &mut Batch, model: &Model, embd: &mm::WeightMatrix, idx: &GpuBuffer<u32>, m: usize) -> Result<()> {
        mm::gather_rows(b, embd, idx, m, &self.s.x)?;
        if let Some(s) = model.config.embed_scale {
            elementwise::scale_inplace(b, &self.s.x, m * model.config.hidden, s)?;
        }
        Ok(())
    }

    /// Check the tokens and dequantise their embeddings into `host_x`.
    fn embed_host(&mut self, model: &Model, tokens: &[u32]) -> Result<()> {
        let c = &model.config;
        self.host_x.resize(tokens.len() * c.hidden, 0.0);
        model.weights.embed(&model.file, c, tokens, &mut self.host_x)
    }

    /// Run `tokens` (a prompt, or its continuation) through the model at the cache's next
    /// positions, in chunks of at most `chunk` tokens, one batch each. Returns the logits of the
    /// last token `[vocab]`, or with `all_logits` of every token `[tokens, vocab]`.
    /// A prompt longer than the room left is [`ModelError::ContextFull`] before anything runs.
    pub fn prefill(&mut self, ctx: &Context, model: &Model, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_model(model)?;
        let c = &model.config;
        if tokens.is_empty() {
            return Err(ModelError::Argument("no tokens".into()));
        }
        self.kv.check_room(tokens.len())?;
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(ModelError::BadToken { token: t, vocab: c.vocab });
        }
        let mut out = Vec::new();
        let parts = tokens.len().div_ceil(self.opts.chunk);
        let gpu_embd = model.gpu_embeddings_loaded().filter(|_| c.hidden % 4 == 0);
        // Bind groups kept across chunks and calls: a chunk's dispatches differ from the last
        // one's only where they depend on its first position.
        let cache = self.bind.clone();
        for (i, part) in tokens.chunks(self.opts.chunk).enumerate() {
            let pos0 = self.kv.pos();
            // Without all_logits only the last chunk needs the final norm, LM head and readback.
            let head = self.opts.all_logits || i + 1 == parts;
            match gpu_embd {
                Some(_) => ctx.write(&self.s.toks, part)?,
                None => self.embed(ctx, model, part)?,
            }
            let mut b = self.new_batch(ctx).with_cache(&cache).submit_early(PREFILL_FIRST);
            if let Some(embd) = gpu_embd {
                self.record_lookup(&mut b, model, embd, &self.s.toks, part.len())?;
            }
            // The last position's logits go out through the session's readback, copied in this
            // batch (no extra submit); every position's through a read of the buffer.
            let last_only = head && !self.opts.all_logits;
            if head {
                self.record_chunk(&mut b, model, part.len(), pos0, self.opts.all_logits)?;
            } else {
                self.record_layers(&mut b, model, part.len(), pos0)?;
            }
            if last_only {
                b.copy_to_host(&self.s.logits, c.vocab, &self.readback)?;
            }
            let running = b.submit()?;
            if last_only {
                self.readback.request_map()?;
            }
            // Wait, and read (so unmap) the readback even when the wait failed.
            let waited = Self::finish_timed(&mut self.gpu_ns, 0, self.opts.gpu_timing, running);
            if last_only {
                out.resize(c.vocab, 0.0);
                self.readback.read_into(ctx, &mut out)?;
            }
            waited?;
            self.kv.advance(part.len())?;
            if head {
                self.logits_row = Some(if self.opts.all_logits { (part.len() - 1) * c.vocab } else { 0 });
                if self.opts.all_logits {
                    out.extend_from_slice(&ctx.read(&self.s.logits)?[..part.len() * c.vocab]);
                }
            }
        }
        Ok(out)
    }

    /// Build every GPU pipeline a prefill of `prompt_len` tokens and the decode steps after it
    /// will use, by recording (never submitting) a prefill chunk of each size the prompt is split
    /// into, decode steps at the first, middle and last position of the cache (the attention's
    /// split and merge passes depend on the context's length) and, with the embedding table on
    /// the GPU ([`Model::gpu_embeddings_loaded`]: load it first), the lookup of a row. Pipelines
    /// are otherwise built on first use, which would count in the first chunk's or step's time.
    /// Nothing runs; the cache is unchanged.
    pub fn warm_up(&self, ctx: &Context, model: &Model, prompt_len: usize) -> Result<()> {
        let full = prompt_len.min(self.opts.chunk);
        let last = prompt_len % self.opts.chunk;
        for m in [full, last].into_iter().filter(|&m| m > 1 && m <= self.kv.capacity()) {
            self.record_chunk(&mut ctx.batch(), model, m, 0, false)?;
        }
        if let Some(end) = self.kv.capacity().checked_sub(1) {
            let mut b = ctx.batch();
            let mut positions = vec![0, end / 2, end];
            positions.dedup();
            for pos in positions {
                self.record_decode(&mut b, model, pos)?;
            }
            if let Some(embd) = model.gpu_embeddings_loaded() {
                self.record_lookup(&mut b, model, embd, self.greedy.first_slot(), 1)?;
            }
            ops::argmax(&mut b, &self.s.logits, 0, model.config.vocab, self.greedy.first_slot())?;
            self.top.record(&mut b, &self.s.logits, model.config.vocab, 1)?;
            ops::draw(&mut b, self.top.out(), 1, 1.0, 1.0, 0.0, self.greedy.first_slot())?;
        }
        Ok(())
    }

    /// One decode step: `token` at the cache's next position; returns its logits `[vocab]`
    /// (a copy of [`Session::logits`]).
    pub fn decode(&mut self, ctx: &Context, model: &Model, token: u32) -> Result<Vec<f32>> {
        self.check_model(model)?;
        let pos = self.kv.check_room(1)?;
        let cache = self.bind.clone();
        let step = self.record_step(ctx, model, pos, &cache, None)?;
        self.run_step(ctx, model, token, step, None, |_| Ok(()))?;
        Ok(self.logits.clone())
    }

    /// The logits `[vocab]` of the last [`Session::decode`] or [`Session::decode_stream`] step
    /// ([`Session::decode_stream_top_k`] leaves them as they were).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Dispatches of one decode step (recorded, never submitted).
    pub fn decode_dispatches(&self, ctx: &Context, model: &Model) -> Result<usize> {
        let mut b = ctx.batch();
        self.record_decode(&mut b, model, 0)?;
        Ok(b.len())
    }

    /// A decode step for the token at `pos`, recorded and finished: it starts with the copy of
    /// the embedding row from the host upload into `x` (written before the submit) and ends
    /// with the copy of the logits into the host readback, in the same command buffer (with
    /// `top_k`, the top-k of the logits and the copy of its candidates instead).
    fn record_step<'c>(&self, ctx: &'c Context, model: &Model, pos: usize, cache: &'c BindCache, top_k: Option<usize>) -> Result<crate::batch::Recorded<'c>> {
        let mut b = self.new_batch(ctx).with_cache(cache);
        b.copy_from_host(&self.upload, model.config.hidden, &self.s.x)?;
        self.record_decode(&mut b, model, pos)?;
        match top_k {
            None => b.copy_to_host(&self.s.logits, model.config.vocab, &self.readback)?,
            Some(k) => self.top.record(&mut b, &self.s.logits, model.config.vocab, k)?,
        }
        Ok(b.finish()?)
    }

    /// Run a step of [`Session::record_step`] for `token`: write its embedding into the host
    /// upload, submit, advance the cache, run `ahead` (work for the CPU while the GPU runs the
    /// step), then wait once (the batch, its timer and the maps of the logits' readback and of
    /// the upload for the next step) and read the logits into `self.logits` (with `top_k`, a
    /// step of `record_step` with the same `top_k`: the candidates into `self.top`).
    fn run_step<R>(&mut self, ctx: &Context, model: &Model, token: u32, step: crate::batch::Recorded, top_k: Option<usize>, ahead: impl FnOnce(&Self) -> Result<R>) -> Result<R> {
        self.embed_host(model, &[token])?;
        self.upload.write(ctx, &self.host_x)?;
        let running = step.submit()?;
        self.kv.advance(1)?;
        self.logits_row = Some(0);
        match top_k {
            None => self.readback.request_map()?,
            Some(_) => self.top.back.request_map()?,
        }
        self.upload.request_map()?;
        let r = ahead(self);
        // Wait and unmap even when `ahead` failed, so the readback is free for the next step.
        let waited = Self::finish_timed(&mut self.gpu_ns, 1, self.opts.gpu_timing, running);
        let read = match top_k {
            None => self.readback.read_into(ctx, &mut self.logits).map_err(ModelError::from),
            Some(k) => self.top.read(ctx, k),
        };
        waited?;
        read?;
        r
    }

    /// Decode a stream of tokens: `first` at the cache's next position, then each token `next`
    /// returns from the previous step's logits `[vocab]` (`None` stops), until `next` stops or
    /// the cache is full. While the GPU runs a step, the CPU records and finishes the next one
    /// ([`Batch::finish`]); each step's batch ends with the copy of its logits into a host-readable
    /// buffer, so between two steps lie only one wait, the read of the mapped logits, `next`, the
    /// embedding upload and the submit. No GPU buffer is created per step (the logits' readback,
    /// the timer and the bind groups are the session's). Returns the steps run (the logits of
    /// each went to `next`).
    pub fn decode_stream(&mut self, ctx: &Context, model: &Model, first: u32, mut next: impl FnMut(&[f32]) -> Result<Option<u32>>) -> Result<usize> {
        self.stream(ctx, model, first, None, |s| next(&s.logits))
    }

    /// The loop of [`Session::decode_stream`] (`top_k` None: `next` reads `self.logits`) and
    /// of [`Session::decode_stream_top_k`] (`top_k` Some: `next` reads `self.top`).
    fn stream(&mut self, ctx: &Context, model: &Model, first: u32, top_k: Option<usize>, mut next: impl FnMut(&Self) -> Result<Option<u32>>) -> Result<usize> {
        self.check_model(model)?;
        let vocab = model.config.vocab;
        let known = |t: u32| if (t as usize) < vocab { Ok(t) } else { Err(ModelError::BadToken { token: t, vocab }) };
        let mut token = known(first)?;
        let mut pos = self.kv.check_room(1)?;
        let cache = self.bind.clone();
        let mut step = self.record_step(ctx, model, pos, &cache, top_k)?;
        let mut steps = 0;
        loop {
            let record_next = |this: &Self| if this.kv.remaining() > 0 { this.record_step(ctx, model, pos + 1, &cache, top_k).map(Some) } else { Ok(None) };
            let ahead = self.run_step(ctx, model, token, step, top_k, record_next)?;
            steps += 1;
            let (Some(t), Some(r)) = (next(self)?, ahead) else { break };
            token = known(t)?;
            step = r;
            pos += 1;
        }
        Ok(steps)
    }

    /// Record a prefill chunk of `m` tokens at positions `pos0..pos0 + m` (their embeddings
    /// already in `x`): every layer, the final norm and the LM head (`all`: every row; else the
    /// last). The cache position is not advanced (the caller does once the batch ran).
    pub fn record_chunk(&self, b: &mut Batch, model: &Model, m: usize, pos0: usize, all: bool) -> Result<()> {
        self.check_model(model)?;
        if m == 0 || m > self.opts.chunk {
            return Err(ModelError::Argument(format!("chunk of {m} tokens (1..={})", self.opts.chunk)));
        }
        if all && !self.opts.all_logits {
            return Err(ModelError::Argument("all logits asked of a session made without all_logits".into()));
        }
        self.record_layers(b, model, m, pos0)?;
        self.record_head(b, model, m, all, false)
    }

    /// Record the layers of a prefill chunk (no final norm or LM head): the cache positions
    /// `pos0..pos0 + m` are written, `x` holds the chunk's last hidden states.
    pub fn record_layers(&self, b: &mut Batch, model: &Model, m: usize, pos0: usize) -> Result<()> {
        self.check_model(model)?;
        if m == 0 || m > self.opts.chunk {
            return Err(ModelError::Argument(format!("chunk of {m} tokens (1..={})", self.opts.chunk)));
        }
        self.check_span(pos0, m)?;
        for l in 0..model.config.layers {
            self.record_layer(b, model, l, m, pos0, false)?;
        }
        Ok(())
    }

    /// Record a decode step for the token at `pos` (its embedding already in `x`).
    pub fn record_decode(&self, b: &mut Batch, model: &Model, pos: usize) -> Result<()> {
        self.check_model(model)?;
        self.check_span(pos, 1)?;
        for l in 0..model.config.layers {
            self.record_layer(b, model, l, 1, pos, true)?;
        }
        self.record_head(b, model, 1, false, self.s.x2.is_some())
    }

    /// The RoPE table of layer `l`: the windowed layers' own where the model has one.
    fn table_of(&self, c: &Config, l: usize) -> &RopeTable {
        match (&self.table_local, c.window.and_then(|w| w.of_layer(l))) {
            (Some(t), Some(_)) => t,
            _ => &self.table,
        }
    }

    fn check_span(&self, pos0: usize, m: usize) -> Result<()> {
        match pos0.checked_add(m) {
            Some(end) if end <= self.kv.capacity() => Ok(()),
            _ => Err(ModelError::ContextFull { needed: pos0.saturating_add(m), capacity: self.kv.capacity() }),
        }
    }
}
