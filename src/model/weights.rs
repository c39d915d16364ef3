//! Loading a model's weights from a (memory-mapped) GGUF file onto the GPU, tensor by tensor.
//!
//! Each matrix goes from its slice of the map straight to its GPU buffer
//! ([`super::linear::load`]), so host memory while loading stays at the map plus at most
//! one tensor being converted. The embedding table `token_embd.weight` stays in the map: each
//! step dequantises only its tokens' rows on the CPU ([`Weights::embed`]) and uploads them. It is
//! uploaded to the GPU only where it is also the LM head (tied embeddings, no `output.weight`).

use super::config::{expect_dims, Config};
use super::error::{ModelError, Result};
use super::mm::{self, WeightMatrix};
use crate::buffer::GpuBuffer;
use crate::context::Context;
use crate::formats::gguf::{GgmlType, GgufFile};

/// One transformer block.
pub struct Layer {
    pub attn_norm: GpuBuffer<f32>,
    /// The q, k and v projections as matrices whose rows, in order, are the rows of `[q; k; v]`:
    /// one matrix `[q_dim + 2 kv_dim, hidden]` where the three have one type, else one per run
    /// of equal types (e.g. `[q; k]` and `[v]` where v alone is Q6_K).
    pub qkv: Vec<WeightMatrix>,
    /// q/k/v biases (qwen2), concatenated `[q_dim + 2 kv_dim]`.
    pub qkv_bias: Option<GpuBuffer<f32>>,
    pub wo: WeightMatrix,
    pub ffn_norm: GpuBuffer<f32>,
    /// The gate and up projections.
    pub ffn_in: FfnIn,
    pub w_down: WeightMatrix,
}

/// The FFN's gate and up projections: one matrix of interleaved (gate, up) row pairs where both
/// have one type (a decode step then computes SwiGLU in the GEMV's epilogue), else two.
pub enum FfnIn {
    GateUp(WeightMatrix),
    Separate { gate: WeightMatrix, up: WeightMatrix },
}

impl FfnIn {
    /// The one or two matrices.
    pub fn matrices(&self) -> impl Iterator<Item = &WeightMatrix> {
        let (a, b) = match self {
            FfnIn::GateUp(w) => (w, None),
            FfnIn::Separate { gate, up } => (gate, Some(up)),
        };
        std::iter::once(a).chain(b)
    }
}

/// Every weight of a model, on the GPU except the embedding table.
pub struct Weights {
    pub layers: Vec<Layer>,
    pub output_norm: GpuBuffer<f32>,
    pub lm_head: WeightMatrix,
    /// `token_embd.weight`'s type and bytes per row (rows are read from the map).
    embd_type: GgmlType,
    embd_row_bytes: usize,
    /// Bytes of the matrices on the GPU plus the vectors.
    pub bytes: u64,
}

/// Loading progress: tensors and bytes done out of the totals, and the tensor just loaded.
pub struct Progress<'a> {
    pub tensors_done: usize,
    pub tensors_total: usize,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub name: &'a str,
}

fn bad(name: &str, reason: String) -> ModelError {
    ModelError::BadTensor { name: name.into(), reason }
}

/// Bytes of a tensor as stored.
fn stored_bytes(file: &GgufFile, name: &str) -> Result<u64> {
    let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    t.n_bytes.ok_or_else(|| bad(name, format!("ggml type {:?} has no known size", t.ggml_type)))
}

/// A 1-D tensor of `len` values (F32, F16 or BF16) uploaded as f32.
fn vector(ctx: &Context, file: &GgufFile, name: &str, len: usize) -> Result<GpuBuffer<f32>> {
    vectors(ctx, file, &[(name, len)])
}

/// 1-D tensors `(name, len)` uploaded as one f32 vector, concatenated in order.
fn vectors(ctx: &Context, file: &GgufFile, parts: &[(&str, usize)]) -> Result<GpuBuffer<f32>> {
    // Shapes first: nothing is allocated from a length the file's tensors do not back.
    for &(name, len) in parts {
        expect_dims(file, name, &[len])?;
    }
    let total = parts.iter().try_fold(0usize, |a, &(_, len)| a.checked_add(len)).ok_or_else(|| ModelError::Argument("vector lengths overflow".into()))?;
    let mut v = vec![0f32; total];
    let mut at = 0;
    for &(name, len) in parts {
        let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        mm::dequantize(t.ggml_type, file.tensor_data(t)?, &mut v[at..at + len]).map_err(|e| bad(name, e.to_string()))?;
        at += len;
    }
    Ok(ctx.upload(&v)?)
}

/// The q, k, v matrices (`names`, `[rows[i], k]` each): one matrix per run of equal types,
/// rows concatenated ([`Layer::qkv`]).
fn qkv(ctx: &Context, file: &GgufFile, names: &[String; 3], rows: [usize; 3], k: usize) -> Result<Vec<WeightMatrix>> {
    let mut types = Vec::with_capacity(3);
    for (name, n) in names.iter().zip(rows) {
        expect_dims(file, name, &[k, n])?;
        types.push(file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?.ggml_type);
    }
    let mut out = Vec::with_capacity(3);
    let mut i = 0;
    while i < 3 {
        let run = (i..3).take_while(|&j| types[j] == types[i]).count();
        let group: Vec<&str> = names[i..i + run].iter().map(String::as_str).collect();
        out.push(WeightMatrix::from_gguf_concat(ctx, file, &group).map_err(|e| load_error(group[0], e))?);
        i += run;
    }
    Ok(out)
}

/// A matrix `[n, k]` (`dims = [k, n]` in the file).
fn matrix(ctx: &Context, file: &GgufFile, name: &str, n: usize, k: usize) -> Result<WeightMatrix> {
    expect_dims(file, name, &[k, n])?;
    mm::load(ctx, file, name).map_err(|e| load_error(name, e))
}

fn load_error(name: &str, e: crate::Error) -> ModelError {
    match e {
        crate::Error::Format(s) | crate::Error::Shape(s) | crate::Error::Argument(s) => bad(name, s),
        crate::Error::UnsupportedType { ggml_type, .. } => bad(name, format!("ggml type {ggml_type:?} is not supported")),
        e => ModelError::Gpu(e),
    }
}

/// The gate and up matrices `[n, k]`, interleaved into one where their types match.
fn ffn_in(ctx: &Context, file: &GgufFile, gate: &str, up: &str, n: usize, k: usize) -> Result<FfnIn> {
    expect_dims(file, gate, &[k, n])?;
    expect_dims(file, up, &[k, n])?;
    let same = file.tensor(gate).zip(file.tensor(up)).is_some_and(|(g, u)| g.ggml_type == u.ggml_type);
    if same {
        Ok(FfnIn::GateUp(WeightMatrix::from_gguf_interleaved(ctx, file, gate, up).map_err(|e| load_error(gate, e))?))
    } else {
        Ok(FfnIn::Separate { gate: matrix(ctx, file, gate, n, k)?, up: matrix(ctx, file, up, n, k)? })
    }
}

impl Weights {
    /// Names of every tensor [`Weights::load`] uploads, in load order.
    pub fn tensor_names(cfg: &Config) -> Vec<String> {
        Self::tensor_shapes(cfg).into_iter().map(|(n, _)| n).collect()
    }

    /// Every tensor [`Weights::load`] uploads, in load order, with its expected dims (`ne0`
    /// first). Do not call it with a [`Config`] not read from a file ([`Config::from_gguf`]
    /// bounds `layers` by the file's tensor count).
    pub fn tensor_shapes(cfg: &Config) -> Vec<(String, Vec<usize>)> {
        let (h, q, kv, f) = (cfg.hidden, cfg.q_dim(), cfg.kv_dim(), cfg.ffn);
        let mut v = Vec::new();
        for l in 0..cfg.layers {
            let mut t = |s: &str, dims: &[usize]| v.push((format!("blk.{l}.{s}"), dims.to_vec()));
            t("attn_norm.weight", &[h]);
            t("attn_q.weight", &[h, q]);
            t("attn_k.weight", &[h, kv]);
            t("attn_v.weight", &[h, kv]);
            if cfg.qkv_bias {
                t("attn_q.bias", &[q]);
                t("attn_k.bias", &[kv]);
                t("attn_v.bias", &[kv]);
            }
            t("attn_output.weight", &[q, h]);
            t("ffn_norm.weight", &[h]);
            t("ffn_gate.weight", &[h, f]);
            t("ffn_up.weight", &[h, f]);
            t("ffn_down.weight", &[f, h]);
        }
        v.push(("output_norm.weight".into(), vec![h]));
        v.push((if cfg.tied_embeddings { "token_embd.weight" } else { "output.weight" }.into(), vec![h, cfg.vocab]));
        v
    }

    /// Upload every weight, calling `progress` after each tensor. Every tensor's presence and
    /// shape is checked, and an untied embedding table's block scales validated, before
    /// anything is uploaded.
    pub fn load(ctx: &Context, file: &GgufFile, cfg: &Config, progress: &mut dyn FnMut(&Progress)) -> Result<Weights> {
        if cfg.layers.saturating_mul(super::config::MIN_BLOCK_TENSORS) > file.tensors().len() {
            return Err(ModelError::Argument(format!("a config of {} blocks for a file of {} tensors", cfg.layers, file.tensors().len())));
        }
        let shapes = Self::tensor_shapes(cfg);
        let mut total = 0u64;
        for (n, dims) in &shapes {
            expect_dims(file, n, dims)?;
            total = total.checked_add(stored_bytes(file, n)?).ok_or_else(|| bad(n, "sizes overflow".into()))?;
        }
        let embd_name = "token_embd.weight";
        expect_dims(file, embd_name, &[cfg.hidden, cfg.vocab])?;
        let embd = file.tensor(embd_name).ok_or_else(|| ModelError::MissingTensor(embd_name.into()))?;
        let embd_type = embd.ggml_type;
        let embd_format = crate::formats::format_of(embd_type).map_err(|_| bad(embd_name, format!("ggml type {embd_type:?} is not a supported weight format")))?;
        let embd_row_bytes = embd_format.bytes_for(cfg.hidden).ok_or_else(|| bad(embd_name, format!("type {embd_type:?}: rows of {} values are not whole blocks", cfg.hidden)))?;
        // The table is read row by row on the CPU: its block scales are validated here, once, as
        // the upload of every matrix validates its own.
        if !cfg.tied_embeddings {
            embd_format.validate(file.tensor_data(embd)?).map_err(|e| bad(embd_name, e.to_string()))?;
        }
        let (h, q, kv, f) = (cfg.hidden, cfg.q_dim(), cfg.kv_dim(), cfg.ffn);
        let tensors_total = shapes.len();
        let mut done = (0usize, 0u64);
        let mut gpu_bytes = 0u64;
        let mut step = |name: &str| -> Result<()> {
            done.0 += 1;
            done.1 += stored_bytes(file, name)?;
            progress(&Progress { tensors_done: done.0, tensors_total, bytes_done: done.1, bytes_total: total, name });
            Ok(())
        };
        macro_rules! load {
            ($e:expr, $name:expr) => {{
                let v = $e;
                step($name.as_ref())?;
                v
            }};
        }
        macro_rules! mat {
            ($name:expr, $n:expr, $k:expr) => {{
                let owned = $name;
                let name: &str = owned.as_ref();
                let m = matrix(ctx, file, name, $n, $k)?;
                gpu_bytes += m.bytes();
                step(name)?;
                m
            }};
        }
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = |s: &str| format!("blk.{l}.{s}");
            let attn_norm = load!(vector(ctx, file, &p("attn_norm.weight"), h)?, p("attn_norm.weight"));
            let names = [p("attn_q.weight"), p("attn_k.weight"), p("attn_v.weight")];
            let qkv = qkv(ctx, file, &names, [q, kv, kv], h)?;
            gpu_bytes += qkv.iter().map(|m| m.bytes()).sum::<u64>();
            for name in &names {
                step(name)?;
            }
            let qkv_bias = if cfg.qkv_bias {
                let names = [p("attn_q.bias"), p("attn_k.bias"), p("attn_v.bias")];
                let v = vectors(ctx, file, &[(&names[0], q), (&names[1], kv), (&names[2], kv)])?;
                for name in &names {
                    step(name)?;
                }
                Some(v)
            } else {
                None
            };
            let wo = mat!(p("attn_output.weight"), h, q);
            let ffn_norm = load!(vector(ctx, file, &p("ffn_norm.weight"), h)?, p("ffn_norm.weight"));
            let ffn_in = ffn_in(ctx, file, &p("ffn_gate.weight"), &p("ffn_up.weight"), f, h)?;
            gpu_bytes += ffn_in.matrices().map(|m| m.bytes()).sum::<u64>();
            step(&p("ffn_gate.weight"))?;
            step(&p("ffn_up.weight"))?;
            let w_down = mat!(p("ffn_down.weight"), h, f);
            layers.push(Layer { attn_norm, qkv, qkv_bias, wo, ffn_norm, ffn_in, w_down });
        }
        let output_norm = load!(vector(ctx, file, "output_norm.weight", h)?, "output_norm.weight");
        let head = if cfg.tied_embeddings { "token_embd.weight" } else { "output.weight" };
        let lm_head = mat!(head, cfg.vocab, h);
        let vectors = cfg.layers as u64 * 4 * (2 * h + if cfg.qkv_bias { q + 2 * kv } else { 0 }) as u64 + 4 * h as u64;
        Ok(Weights { layers, output_norm, lm_head, embd_type, embd_row_bytes, bytes: gpu_bytes + vectors })
    }

    /// The formats of the matrices (each once).
    pub fn formats(&self) -> Vec<&'static crate::formats::WeightFormat> {
        let mut v: Vec<&'static crate::formats::WeightFormat> = Vec::new();
        for w in self.layers.iter().flat_map(|l| l.qkv.iter().chain([&l.wo, &l.w_down]).chain(l.ffn_in.matrices())).chain([&self.lm_head]) {
            if !v.iter().any(|f| std::ptr::eq(*f, w.format())) {
                v.push(w.format());
            }
        }
        v
    }

    /// The embedding rows of `tokens`, dequantised on the CPU from the mapped file into `out`
    /// (`tokens.len() * hidden` values).
    pub fn embed(&self, file: &GgufFile, cfg: &Config, tokens: &[u32], out: &mut [f32]) -> Result<()> {
        let name = "token_embd.weight";
        let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        let data = file.tensor_data(t)?;
        if out.len() != tokens.len() * cfg.hidden {
            return Err(ModelError::Argument(format!("embedding output of {} values for {} tokens", out.len(), tokens.len())));
        }
        for (&tok, row) in tokens.iter().zip(out.chunks_exact_mut(cfg.hidden)) {
            if tok as usize >= cfg.vocab {
                return Err(ModelError::BadToken { token: tok, vocab: cfg.vocab });
            }
            let start = tok as usize * self.embd_row_bytes;
            let bytes = data.get(start..start + self.embd_row_bytes).ok_or_else(|| bad(name, format!("row {tok} outside the tensor")))?;
            mm::dequantize(self.embd_type, bytes, row).map_err(|e| bad(name, e.to_string()))?;
        }
        Ok(())
    }
}
