//! Loading a model's weights from a (memory-mapped) GGUF file onto the GPU, tensor by tensor.
//!
//! Each matrix goes from its slice of the map straight to its GPU buffer
//! ([`super::linear::load`]), so host memory while loading stays at the map plus at most
//! one tensor being converted. The embedding table `token_embd.weight` stays in the map: each
//! step dequantises only its tokens' rows on the CPU ([`Weights::embed`]) and uploads them. It is
//! uploaded to the GPU only where it is also the LM head (tied embeddings, no `output.weight`).

use super::arch::{FfnTensors, QkvTensors, Spec};
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
    /// Per-head RMSNorm weights of q and k, `[head_dim]` each (qwen3).
    pub qk_norm: Option<[GpuBuffer<f32>; 2]>,
    pub wo: WeightMatrix,
    pub ffn_norm: GpuBuffer<f32>,
    /// The gate and up projections.
    pub ffn_in: FfnIn,
    pub w_down: WeightMatrix,
    /// RMSNorm weights of the attention and FFN outputs (Gemma), `[hidden]` each.
    pub post_norms: Option<[GpuBuffer<f32>; 2]>,
}

/// A tensor's name and dims (`ne0` first).
pub type TensorShape = (String, Vec<usize>);

/// The widths a block's tensors are shaped by.
#[derive(Clone, Copy, Debug, Default)]
pub struct Widths {
    pub hidden: usize,
    /// `heads * head_dim`.
    pub q: usize,
    /// `kv_heads * head_dim`.
    pub kv: usize,
    pub ffn: usize,
    pub head_dim: usize,
}

impl Widths {
    pub fn of(cfg: &Config) -> Widths {
        Widths { hidden: cfg.hidden, q: cfg.q_dim(), kv: cfg.kv_dim(), ffn: cfg.ffn, head_dim: cfg.head_dim }
    }
}

/// The tensors of block `l` as a [`Spec`] names them, with their dims: what [`Weights::load`]
/// checks and uploads, in load order ([`BlockTensors::all`]).
pub struct BlockTensors {
    pub attn_norm: TensorShape,
    /// `attn_q`, `attn_k`, `attn_v` ([`QkvTensors::Separate`]) or `attn_qkv`.
    pub qkv: Vec<TensorShape>,
    /// The q, k, v biases, if any.
    pub qkv_bias: Vec<TensorShape>,
    /// `attn_q_norm`, `attn_k_norm`, if any.
    pub qk_norm: Vec<TensorShape>,
    pub wo: TensorShape,
    pub ffn_norm: TensorShape,
    /// `ffn_gate`, `ffn_up` ([`FfnTensors::Separate`]) or the fused `ffn_up`.
    pub ffn_in: Vec<TensorShape>,
    pub down: TensorShape,
    /// `post_attention_norm`, `post_ffw_norm`, if any.
    pub post_norms: Vec<TensorShape>,
}

impl BlockTensors {
    pub fn new(spec: &Spec, l: usize, w: Widths) -> BlockTensors {
        let t = |s: &str, dims: &[usize]| (format!("blk.{l}.{s}"), dims.to_vec());
        let Widths { hidden: h, q, kv, ffn: f, head_dim: d } = w;
        BlockTensors {
            attn_norm: t("attn_norm.weight", &[h]),
            qkv: match spec.qkv {
                QkvTensors::Separate => vec![t("attn_q.weight", &[h, q]), t("attn_k.weight", &[h, kv]), t("attn_v.weight", &[h, kv])],
                QkvTensors::Fused => vec![t("attn_qkv.weight", &[h, q.saturating_add(kv.saturating_mul(2))])],
            },
            qkv_bias: if spec.qkv_bias { vec![t("attn_q.bias", &[q]), t("attn_k.bias", &[kv]), t("attn_v.bias", &[kv])] } else { Vec::new() },
            qk_norm: if spec.qk_norm { vec![t("attn_q_norm.weight", &[d]), t("attn_k_norm.weight", &[d])] } else { Vec::new() },
            wo: t("attn_output.weight", &[q, h]),
            ffn_norm: t("ffn_norm.weight", &[h]),
            ffn_in: match spec.ffn {
                FfnTensors::Separate => vec![t("ffn_gate.weight", &[h, f]), t("ffn_up.weight", &[h, f])],
                FfnTensors::FusedGateUp => vec![t("ffn_up.weight", &[h, f.saturating_mul(2)])],
            },
            down: t("ffn_down.weight", &[f, h]),
            post_norms: if spec.post_norms { vec![t("post_attention_norm.weight", &[h]), t("post_ffw_norm.weight", &[h])] } else { Vec::new() },
        }
    }

    /// Every tensor, in load order.
    pub fn all(&self) -> impl Iterator<Item = (&str, &[usize])> {
        std::iter::once(&self.attn_norm)
            .chain(&self.qkv)
            .chain(&self.qkv_bias)
            .chain(&self.qk_norm)
            .chain([&self.wo, &self.ffn_norm])
            .chain(&self.ffn_in)
            .chain([&self.down])
            .chain(&self.post_norms)
            .map(|(n, d)| (n.as_str(), d.as_slice()))
    }
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
        crate::Error::InvalidData(s) | crate::Error::Shape(s) | crate::Error::Argument(s) => bad(name, s),
        crate::Error::UnsupportedType { ggml_type, .. } => bad(name, format!("ggml type {ggml_type:?} is not supported")),
        e => ModelError::Gpu(e),
    }
}

/// The gate and up matrices `[n, k]`, interleaved into one where their types match (the gated
/// unit then runs on the pairs: a GEMV epilogue, or [`super::ops::glu_pairs`]).
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

/// Tensor `name` of `[n, k]` (`dims = [k, n]`) as its type, bytes per row and bytes (checked:
/// `n` whole rows).
fn rows<'f>(file: &'f GgufFile, name: &str, n: usize, k: usize) -> Result<(GgmlType, usize, &'f [u8])> {
    expect_dims(file, name, &[k, n])?;
    let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    let format = crate::formats::format_of(t.ggml_type).map_err(|_| bad(name, format!("ggml type {:?} is not a supported weight format", t.ggml_type)))?;
    let row = format.bytes_for(k).ok_or_else(|| bad(name, format!("type {:?}: rows of {k} values are not whole blocks", t.ggml_type)))?;
    let data = file.tensor_data(t)?;
    if row.checked_mul(n) != Some(data.len()) {
        return Err(bad(name, format!("{} bytes for {n} rows of {row}", data.len())));
    }
    Ok((t.ggml_type, row, data))
}

/// A fused `[q; k; v]` tensor `name` whose q and k heads' NeoX rotary pairs `(i, i + r/2)`,
/// `i < r/2`, are moved next to each other, to rows `(2i, 2i + 1)` (the rows past `r` and the v
/// rows stay): q and k are reordered alike, so attention scores are unchanged, and RoPE then
/// rotates interleaved pairs ([`super::arch::Spec::rope_dims`]).
fn rotary_adjacent_qkv(ctx: &Context, file: &GgufFile, name: &str, w: Widths, r: usize) -> Result<WeightMatrix> {
    let (n, k, d) = (w.q + 2 * w.kv, w.hidden, w.head_dim);
    let (ty, row, data) = rows(file, name, n, k)?;
    if d == 0 || r > d || r % 2 != 0 {
        return Err(bad(name, format!("head dim {d}, rotary dims {r}")));
    }
    let mut out = Vec::with_capacity(data.len());
    for new in 0..n {
        let (head, j) = (new / d, new % d);
        let old = if new >= w.q + w.kv || j >= r {
            new
        } else if j % 2 == 0 {
            head * d + j / 2
        } else {
            head * d + r / 2 + j / 2
        };
        out.extend_from_slice(&data[old * row..(old + 1) * row]);
    }
    WeightMatrix::upload(ctx, ty, n, k, &out).map_err(|e| load_error(name, e))
}

/// A fused gate/up tensor `[2n, k]` (the gate's `n` rows first, then the up rows) as the
/// interleaved (gate, up) matrix of [`FfnIn::GateUp`].
fn fused_gate_up(ctx: &Context, file: &GgufFile, name: &str, n: usize, k: usize) -> Result<FfnIn> {
    let (ty, row, data) = rows(file, name, n.checked_mul(2).ok_or_else(|| bad(name, format!("2 x {n} rows overflow")))?, k)?;
    let half = row * n;
    let w = WeightMatrix::upload_interleaved(ctx, ty, n, k, &data[..half], &data[half..]).map_err(|e| load_error(name, e))?;
    Ok(FfnIn::GateUp(w))
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
        let mut v = Vec::new();
        for l in 0..cfg.layers {
            v.extend(BlockTensors::new(&cfg.spec, l, Widths::of(cfg)).all().map(|(n, d)| (n.to_string(), d.to_vec())));
        }
        v.push(("output_norm.weight".into(), vec![cfg.hidden]));
        v.push((if cfg.tied_embeddings { "token_embd.weight" } else { "output.weight" }.into(), vec![cfg.hidden, cfg.vocab]));
        v
    }

    /// Upload every weight, calling `progress` after each tensor. Every tensor's presence and
    /// shape is checked, and an untied embedding table's block scales validated, before
    /// anything is uploaded.
    pub fn load(ctx: &Context, file: &GgufFile, cfg: &Config, progress: &mut dyn FnMut(&Progress)) -> Result<Weights> {
        if cfg.layers.saturating_mul(cfg.spec.min_block_tensors()) > file.tensors().len() {
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
        let mut vector_bytes = 4 * h as u64;
        macro_rules! vec1 {
            ($t:expr) => {{
                let (name, dims): &TensorShape = $t;
                let v = vector(ctx, file, name, dims[0])?;
                vector_bytes += 4 * v.len() as u64;
                step(name)?;
                v
            }};
        }
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let bt = BlockTensors::new(&cfg.spec, l, Widths::of(cfg));
            let attn_norm = vec1!(&bt.attn_norm);
            let qkv = match &bt.qkv[..] {
                [(qn, _), (kn, _), (vn, _)] => qkv(ctx, file, &[qn.clone(), kn.clone(), vn.clone()], [q, kv, kv], h)?,
                [(name, _)] if cfg.spec.rope_dims < cfg.head_dim => vec![rotary_adjacent_qkv(ctx, file, name, Widths::of(cfg), cfg.spec.rope_dims)?],
                _ => vec![matrix(ctx, file, &bt.qkv[0].0, q + 2 * kv, h)?],
            };
            gpu_bytes += qkv.iter().map(|m| m.bytes()).sum::<u64>();
            for (name, _) in &bt.qkv {
                step(name)?;
            }
            let qkv_bias = if bt.qkv_bias.is_empty() {
                None
            } else {
                let parts: Vec<(&str, usize)> = bt.qkv_bias.iter().map(|(n, d)| (n.as_str(), d[0])).collect();
                let v = vectors(ctx, file, &parts)?;
                vector_bytes += 4 * v.len() as u64;
                for (name, _) in &parts {
                    step(name)?;
                }
                Some(v)
            };
            let qk_norm = match &bt.qk_norm[..] {
                [qn, kn] => Some([vec1!(qn), vec1!(kn)]),
                _ => None,
            };
            let wo = mat!(&bt.wo.0, h, q);
            let ffn_norm = vec1!(&bt.ffn_norm);
            let ffn_in = match &bt.ffn_in[..] {
                [(gate, _), (up, _)] => ffn_in(ctx, file, gate, up, f, h)?,
                _ => fused_gate_up(ctx, file, &bt.ffn_in[0].0, f, h)?,
            };
            gpu_bytes += ffn_in.matrices().map(|m| m.bytes()).sum::<u64>();
            for (name, _) in &bt.ffn_in {
                step(name)?;
            }
            let w_down = mat!(&bt.down.0, h, f);
            let post_norms = match &bt.post_norms[..] {
                [pa, pf] => Some([vec1!(pa), vec1!(pf)]),
                _ => None,
            };
            layers.push(Layer { attn_norm, qkv, qkv_bias, qk_norm, wo, ffn_norm, ffn_in, w_down, post_norms });
        }
        let output_norm = load!(vector(ctx, file, "output_norm.weight", h)?, "output_norm.weight");
        let head = if cfg.tied_embeddings { "token_embd.weight" } else { "output.weight" };
        let lm_head = mat!(head, cfg.vocab, h);
        Ok(Weights { layers, output_norm, lm_head, embd_type, embd_row_bytes, bytes: gpu_bytes + vector_bytes })
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
            if let Some(s) = cfg.embed_scale {
                row.iter_mut().for_each(|v| *v *= s);
            }
        }
        Ok(())
    }
}
