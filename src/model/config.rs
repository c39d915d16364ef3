//! Model hyper-parameters read from a GGUF file's own metadata and tensor shapes.
//!
//! Keys (`{arch}` = `general.architecture`): `{arch}.block_count`, `{arch}.embedding_length`,
//! `{arch}.feed_forward_length`, `{arch}.attention.head_count`, `{arch}.attention.head_count_kv`
//! (absent = head_count), `{arch}.attention.layer_norm_rms_epsilon`, `{arch}.context_length`,
//! `{arch}.attention.key_length` / `value_length` (absent = embedding_length / head_count),
//! `{arch}.rope.freq_base` (absent = 10000, llama.cpp's default), `{arch}.rope.scaling.type`
//! (`none`, `linear` with `{arch}.rope.scaling.factor`, `yarn` with the factor and
//! `{arch}.rope.scaling.original_context_length`; others are rejected by name), and
//! `rope_freqs.weight` (head_dim / 2 f32 divisors of the base frequencies: Llama 3.1's llama3
//! scaling, precomputed by the converter).
//! The vocabulary size comes from `token_embd.weight`'s shape.
//!
//! What differs between architectures (tensors of a block, RoPE pair layout, norms, windows,
//! ...) is the architecture module's [`Spec`] ([`super::arch`]), held by [`Config::spec`] (and
//! reachable as fields of the config itself: `config.layout` is `config.spec.layout`).

use super::error::{ModelError, Result};
use crate::formats::gguf::{GgufFile, MetaValue};
use crate::kernels::rope::{RopeConfig, RopeScaling};
use std::sync::Arc;

pub use super::arch::{Arch, Spec};

/// RoPE frequency scaling as the file states it.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScalingKind {
    None,
    /// Positions divided by `factor`.
    Linear {
        factor: f64,
    },
    /// YaRN (Hugging Face's definition, see [`RopeScaling::Yarn`]).
    Yarn {
        factor: f64,
        original_context: usize,
    },
}

/// Everything the forward pass needs to know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    /// The context length the model was trained for (`{arch}.context_length`).
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_theta: f64,
    pub rope_scaling: RopeScalingKind,
    /// Per-pair frequency divisors (`rope_freqs.weight`), if the file has them.
    pub rope_freqs: Option<Vec<f32>>,
    /// No `output.weight`: the LM head is `token_embd.weight`.
    pub tied_embeddings: bool,
    /// The architecture's description of the blocks.
    pub spec: Spec,
}

impl std::ops::Deref for Config {
    type Target = Spec;
    /// The fields of [`Config::spec`] read as the config's own (`config.layout`).
    fn deref(&self) -> &Spec {
        &self.spec
    }
}

pub(crate) fn key_u(file: &GgufFile, key: &str) -> Result<Option<usize>> {
    match file.get(key) {
        None => Ok(None),
        Some(v) => {
            let n = v.as_u64().ok_or_else(|| ModelError::BadKey { key: key.into(), reason: format!("expected an unsigned integer, found {:?}", v.value_type()) })?;
            usize::try_from(n).map(Some).map_err(|_| ModelError::BadKey { key: key.into(), reason: format!("{n} does not fit usize") })
        }
    }
}

fn need_u(file: &GgufFile, key: &str) -> Result<usize> {
    let v = key_u(file, key)?.ok_or_else(|| ModelError::MissingKey(key.into()))?;
    if v == 0 {
        return Err(ModelError::BadKey { key: key.into(), reason: "must be > 0".into() });
    }
    Ok(v)
}

pub(crate) fn key_f(file: &GgufFile, key: &str) -> Result<Option<f64>> {
    match file.get(key) {
        None => Ok(None),
        Some(v) => {
            let f = v
                .as_f64()
                .or_else(|| v.as_u64().map(|u| u as f64))
                .ok_or_else(|| ModelError::BadKey { key: key.into(), reason: format!("expected a number, found {:?}", v.value_type()) })?;
            if !f.is_finite() {
                return Err(ModelError::BadKey { key: key.into(), reason: format!("{f} is not finite") });
            }
            Ok(Some(f))
        }
    }
}

pub(crate) fn key_str<'a>(file: &'a GgufFile, key: &str) -> Result<Option<&'a str>> {
    match file.get(key) {
        None => Ok(None),
        Some(MetaValue::String(s)) => Ok(Some(s)),
        Some(v) => Err(ModelError::BadKey { key: key.into(), reason: format!("expected a string, found {:?}", v.value_type()) }),
    }
}

/// The dims of tensor `name` (`ne0` first), or [`ModelError::MissingTensor`].
pub(crate) fn tensor_dims(file: &GgufFile, name: &str) -> Result<Vec<usize>> {
    let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    t.dims.iter().map(|&d| usize::try_from(d).map_err(|_| ModelError::BadTensor { name: name.into(), reason: format!("dimension {d} does not fit usize") })).collect()
}

/// Check that tensor `name` has exactly `dims` (`ne0` first).
pub(crate) fn expect_dims(file: &GgufFile, name: &str, dims: &[usize]) -> Result<()> {
    let got = tensor_dims(file, name)?;
    if got != dims {
        return Err(ModelError::BadTensor { name: name.into(), reason: format!("shape {got:?}, expected {dims:?}") });
    }
    Ok(())
}

impl Config {
    /// Read the configuration of `file` (metadata and tensor shapes; no tensor data except
    /// `rope_freqs.weight`).
    pub fn from_gguf(file: &GgufFile) -> Result<Config> {
        let arch_name = key_str(file, "general.architecture")?.ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let arch = Arch::from_name(arch_name).ok_or_else(|| ModelError::UnknownArchitecture(arch_name.into()))?;
        let a = arch.name();
        let k = |s: &str| format!("{a}.{s}");
        let layers = need_u(file, &k("block_count"))?;
        let hidden = need_u(file, &k("embedding_length"))?;
        let ffn = need_u(file, &k("feed_forward_length"))?;
        let heads = need_u(file, &k("attention.head_count"))?;
        let kv_heads = match key_u(file, &k("attention.head_count_kv"))? {
            None => heads,
            Some(0) => return Err(ModelError::BadKey { key: k("attention.head_count_kv"), reason: "must be > 0".into() }),
            Some(v) => v,
        };
        if heads % kv_heads != 0 {
            return Err(ModelError::BadKey { key: k("attention.head_count_kv"), reason: format!("{kv_heads} does not divide head_count {heads}") });
        }
        let context_length = need_u(file, &k("context_length"))?;
        let rms_eps = key_f(file, &k("attention.layer_norm_rms_epsilon"))?.ok_or_else(|| ModelError::MissingKey(k("attention.layer_norm_rms_epsilon")))?;
        if rms_eps.is_nan() || rms_eps < 0.0 || !(rms_eps as f32).is_finite() {
            return Err(ModelError::BadKey { key: k("attention.layer_norm_rms_epsilon"), reason: format!("{rms_eps} must be >= 0 and finite as f32") });
        }
        let head_dim = match key_u(file, &k("attention.key_length"))? {
            Some(v) => v,
            None => {
                if hidden % heads != 0 {
                    return Err(ModelError::BadKey { key: k("attention.head_count"), reason: format!("{heads} does not divide embedding_length {hidden}") });
                }
                hidden / heads
            }
        };
        if let Some(v) = key_u(file, &k("attention.value_length"))? {
            if v != head_dim {
                return Err(ModelError::BadKey { key: k("attention.value_length"), reason: format!("{v} differs from the head dim {head_dim} (not implemented)") });
            }
        }
        if head_dim < 2 || head_dim % 2 != 0 || head_dim > crate::kernels::rope::MAX_HEAD_DIM {
            return Err(ModelError::BadKey { key: k("attention.head_count"), reason: format!("head dim {head_dim} must be even and 2..=256") });
        }
        let rope_theta = key_f(file, &k("rope.freq_base"))?.unwrap_or(10_000.0);
        if rope_theta.is_nan() || rope_theta <= 1.0 {
            return Err(ModelError::BadKey { key: k("rope.freq_base"), reason: format!("{rope_theta} must be > 1") });
        }
        let factor = key_f(file, &k("rope.scaling.factor"))?.filter(|&f| f != 0.0);
        let rope_scaling = match key_str(file, &k("rope.scaling.type"))? {
            None | Some("linear") => match factor {
                Some(f) if f != 1.0 => {
                    if f.is_nan() || f <= 0.0 {
                        return Err(ModelError::BadKey { key: k("rope.scaling.factor"), reason: format!("{f} must be > 0") });
                    }
                    RopeScalingKind::Linear { factor: f }
                }
                _ => RopeScalingKind::None,
            },
            Some("none") => RopeScalingKind::None,
            Some("yarn") => {
                let factor = factor.ok_or_else(|| ModelError::MissingKey(k("rope.scaling.factor")))?;
                if factor <= 0.0 {
                    return Err(ModelError::BadKey { key: k("rope.scaling.factor"), reason: format!("{factor} must be > 0") });
                }
                let original_context = need_u(file, &k("rope.scaling.original_context_length"))?;
                RopeScalingKind::Yarn { factor, original_context }
            }
            Some(other) => return Err(ModelError::BadKey { key: k("rope.scaling.type"), reason: format!("scaling {other:?} is not implemented") }),
        };
        let spec = arch.describe(&super::arch::Meta { file, arch: a, head_dim })?;
        // Every block has at least the spec's tensors: a count the file's tensor table cannot
        // hold is rejected before anything is sized from it.
        let per_block = spec.min_block_tensors();
        let most = file.tensors().len() / per_block;
        if layers > most {
            return Err(ModelError::BadKey {
                key: k("block_count"),
                reason: format!("{layers} blocks, but the file's {} tensors hold at most {most} ({per_block} per block)", file.tensors().len()),
            });
        }
        let embd = tensor_dims(file, "token_embd.weight")?;
        if embd.len() != 2 || embd[0] != hidden {
            return Err(ModelError::BadTensor { name: "token_embd.weight".into(), reason: format!("shape {embd:?}, expected [{hidden}, vocab]") });
        }
        let vocab = embd[1];
        if vocab == 0 {
            return Err(ModelError::BadTensor { name: "token_embd.weight".into(), reason: format!("shape {embd:?}: no rows (vocabulary of 0)") });
        }
        let embd_type = file.tensor("token_embd.weight").map(|t| t.ggml_type).ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
        if crate::formats::format_of(embd_type).is_err() {
            return Err(ModelError::BadTensor { name: "token_embd.weight".into(), reason: format!("ggml type {embd_type:?} is not a supported weight format") });
        }
        // q, k and v widths: checked products, and bound to the file by blk.0's projections (the
        // loader checks every block's shapes before uploading).
        let width = |n: usize, what: &str| n.checked_mul(head_dim).ok_or_else(|| ModelError::BadKey { key: k(what), reason: format!("{n} heads x head dim {head_dim} overflows") });
        let (q_dim, kv_dim) = (width(heads, "attention.head_count")?, width(kv_heads, "attention.head_count_kv")?);
        kv_dim
            .checked_mul(2)
            .and_then(|v| v.checked_add(q_dim))
            .ok_or_else(|| ModelError::BadKey { key: k("attention.head_count"), reason: "q + k + v widths overflow".into() })?;
        let widths = super::weights::Widths { hidden, q: q_dim, kv: kv_dim, ffn, head_dim };
        for (name, dims) in super::weights::BlockTensors::new(&spec, 0, widths).all() {
            expect_dims(file, name, dims)?;
        }
        let rope_freqs = match file.tensor("rope_freqs.weight") {
            None => None,
            Some(t) => {
                let name = "rope_freqs.weight";
                expect_dims(file, name, &[head_dim / 2])?;
                if t.ggml_type != crate::formats::gguf::GgmlType::F32 {
                    return Err(ModelError::BadTensor { name: name.into(), reason: format!("type {:?}, expected F32", t.ggml_type) });
                }
                let v: Vec<f32> = file.tensor_data(t)?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                if let Some(bad) = v.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
                    return Err(ModelError::BadTensor { name: name.into(), reason: format!("divisor {bad} must be finite and > 0") });
                }
                Some(v)
            }
        };
        if matches!(rope_scaling, RopeScalingKind::Yarn { .. }) {
            if spec.rope_dims < head_dim {
                return Err(ModelError::Unsupported { arch: a.into(), what: "YaRN scaling of partial rotary embeddings".into() });
            }
            let divisors = if rope_freqs.is_some() { Some("rope_freqs.weight") } else { spec.rope_factors.as_ref().map(|_| "rope_factors_short.weight") };
            if let Some(name) = divisors {
                return Err(ModelError::BadTensor { name: name.into(), reason: "per-pair RoPE divisors together with YaRN scaling are not implemented".into() });
            }
        }
        let tied_embeddings = file.tensor("output.weight").is_none();
        let config = Config {
            arch,
            layers,
            hidden,
            ffn,
            heads,
            kv_heads,
            head_dim,
            vocab,
            context_length,
            rms_eps: rms_eps as f32,
            rope_theta,
            rope_scaling,
            rope_freqs,
            tied_embeddings,
            spec,
        };
        // The RoPE parameters as the kernels will check them (short and long contexts), so a
        // bad value fails here.
        for context in [0, usize::MAX] {
            config
                .rope_config_for(context)
                .validate()
                .map_err(|e| ModelError::BadKey { key: k(if config.rope_freqs.is_some() { "rope.freq_base" } else { "rope.scaling.factor" }), reason: e.to_string() })?;
        }
        Ok(config)
    }

    /// The cos/sin table of a partial rotary embedding (`rope_dims < head_dim`) for positions
    /// `0..context` (`None` for a whole-head one, whose table the GPU builds): the rotated pairs
    /// `i < rope_dims / 2` as [`Config::rope_config_for`] describes them (cos and sin times its
    /// attention factor), the others `(1, 0)`, as llama.cpp leaves the dims past the rotary
    /// ones untouched (the attention factor scales only the rotated ones, which one factor
    /// over every pair of a GPU-built table could not express). Computed in f64.
    pub fn rope_table(&self, context: usize) -> Option<Vec<[f32; 2]>> {
        let (d, r) = (self.head_dim, self.spec.rope_dims);
        if r >= d {
            return None;
        }
        let cfg = self.rope_config_for(context);
        let (inv, att) = (cfg.inv_freq(), cfg.attention_factor());
        let mut t = Vec::with_capacity(context.saturating_mul(d / 2));
        for pos in 0..context {
            t.extend(inv.iter().enumerate().map(|(i, f)| {
                let a = pos as f64 * f;
                if i < r / 2 {
                    [(att * a.cos()) as f32, (att * a.sin()) as f32]
                } else {
                    [1.0, 0.0]
                }
            }));
        }
        Some(t)
    }

    /// Width of the q projection (`heads * head_dim`).
    pub fn q_dim(&self) -> usize {
        self.heads.saturating_mul(self.head_dim)
    }

    /// Width of the k and v projections (`kv_heads * head_dim`).
    pub fn kv_dim(&self) -> usize {
        self.kv_heads.saturating_mul(self.head_dim)
    }

    /// [`Config::rope_config_for`] the trained context (`context_length`).
    pub fn rope_config(&self) -> RopeConfig {
        self.rope_config_for(self.context_length)
    }

    /// The RoPE frequencies for a session of `context` positions:
    /// `inv_freq_i = rope_theta^(-2i/d) / (divisor_i * linear factor)`, the divisors being
    /// `rope_freqs` or the spec's LongRoPE factors (the long ones where `context` exceeds their
    /// original context; cos and sin then multiplied by their attention factor). Per-pair
    /// divisors are expressed as [`RopeScaling::LongRope`] with equal short and long factors,
    /// which is exactly that division.
    pub fn rope_config_for(&self, context: usize) -> RopeConfig {
        let d = self.head_dim;
        let r = self.spec.rope_dims.min(d);
        let divisors = match (&self.rope_freqs, &self.spec.rope_factors) {
            (Some(f), _) => Some((&f[..], 1.0)),
            (None, Some(rf)) => Some((if context > rf.original_context { &rf.long[..] } else { &rf.short[..] }, rf.attention_factor)),
            (None, None) => None,
        };
        let scaling = if divisors.is_some() || r < d {
            let (f, attention) = divisors.unwrap_or((&[], 1.0));
            let lin = if let RopeScalingKind::Linear { factor } = &self.rope_scaling { *factor } else { 1.0 };
            let div: Arc<[f64]> = (0..d / 2)
                .map(|i| {
                    if i >= r / 2 {
                        // Unrotated pairs: `Config::rope_table` writes them as (1, 0).
                        return 1.0;
                    }
                    let v = f.get(i).map_or(1.0, |&v| v as f64) * lin;
                    // The table's base frequency is rope_theta^(-2i/d); rotary pair i of r
                    // dims turns at rope_theta^(-2i/r).
                    if r < d {
                        v * self.rope_theta.powf(2.0 * i as f64 / r as f64 - 2.0 * i as f64 / d as f64)
                    } else {
                        v
                    }
                })
                .collect();
            RopeScaling::LongRope { short_factor: div.clone(), long_factor: div, factor: 1.0, original_max_position_embeddings: 1, attention_factor: Some(attention), seq_len: 0 }
        } else {
            match &self.rope_scaling {
                RopeScalingKind::None => RopeScaling::Default,
                RopeScalingKind::Linear { factor } => RopeScaling::Linear { factor: *factor },
                RopeScalingKind::Yarn { factor, original_context } => RopeScaling::yarn(*factor, *original_context),
            }
        };
        RopeConfig::new(d, self.rope_theta, scaling)
    }
}
