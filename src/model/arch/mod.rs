//! Architectures: what one model family's blocks hold and do, read from a file's metadata.
//!
//! Each architecture is one module (`llama.rs`, `qwen2.rs`, ...) with a `describe` function that
//! reads the keys and tensors only that family has and returns its [`Spec`]: the RoPE pair
//! layout, which tensors a block stores (separate or fused q/k/v, separate or fused gate/up,
//! biases, per-head q/k norms) and what the forward pass does with them (GLU kind, sliding
//! windows). The hyper-parameters every family shares (layers, widths, heads, RoPE base and
//! scaling) are read once in [`super::config`]; the weights loader ([`super::weights`]) and the
//! layer loop ([`super::forward`]) follow the spec and know no architecture by name.
//!
//! What an architecture asks for and the runner does not implement is a typed error,
//! [`ModelError::Unsupported`], naming the architecture and the piece, raised while the
//! configuration is read, before any GPU memory is allocated.
//!
//! Adding an architecture: write `<name>.rs` with `pub(super) fn describe(m: &Meta) ->
//! Result<Spec>`, add a variant to [`Arch`] and one row to `ARCHITECTURES`. A feature the
//! existing fields do not cover (e.g. post-attention norms) is a new field of [`Spec`] (default
//! off in `Spec::new`), its tensors in [`super::weights::BlockTensors`] and its step in
//! `record_layer` (src/model/forward/layer.rs).

mod gemma2;
mod gemma3;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;

use super::config::{key_f, key_u, tensor_dims};
use super::error::{ModelError, Result};
use crate::formats::gguf::{GgmlType, GgufFile};
use crate::kernels::rope::PairLayout;

/// The architectures the runner implements (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arch {
    /// Llama 2/3/3.1 and Mistral files.
    Llama,
    Qwen2,
    Qwen3,
    /// Phi-3, Phi-3.5 and Phi-4-mini files.
    Phi3,
    Gemma2,
    Gemma3,
}

/// An architecture module's description function.
type Describe = fn(&Meta) -> Result<Spec>;

/// Each architecture: its variant, its `general.architecture` name and its description.
const ARCHITECTURES: &[(Arch, &str, Describe)] = &[
    (Arch::Llama, "llama", llama::describe),
    (Arch::Qwen2, "qwen2", qwen2::describe),
    (Arch::Qwen3, "qwen3", qwen3::describe),
    (Arch::Phi3, "phi3", phi3::describe),
    (Arch::Gemma2, "gemma2", gemma2::describe),
    (Arch::Gemma3, "gemma3", gemma3::describe),
];

impl Arch {
    /// The `general.architecture` string.
    pub fn name(self) -> &'static str {
        ARCHITECTURES.iter().find(|a| a.0 == self).map_or("?", |a| a.1)
    }

    /// The architecture named `name`, if implemented.
    pub fn from_name(name: &str) -> Option<Arch> {
        ARCHITECTURES.iter().find(|a| a.1 == name).map(|a| a.0)
    }

    /// The names of every implemented architecture.
    pub fn names() -> impl Iterator<Item = &'static str> {
        ARCHITECTURES.iter().map(|a| a.1)
    }

    /// Describe the model of `m` (this architecture's keys and tensors).
    pub(crate) fn describe(self, m: &Meta) -> Result<Spec> {
        let f = ARCHITECTURES.iter().find(|a| a.0 == self).map(|a| a.2).ok_or_else(|| ModelError::UnknownArchitecture(self.name().into()))?;
        let mut spec = f(m)?;
        spec.check(self, m)?;
        if spec.rope_dims < m.head_dim {
            // Partial NeoX rotary: the loader moves each q/k head's pairs next to each other.
            spec.layout = PairLayout::Interleaved;
        }
        Ok(spec)
    }
}

/// What an architecture module reads from: the file, the architecture's key prefix and the
/// shared hyper-parameters already read.
pub(crate) struct Meta<'a> {
    pub file: &'a GgufFile,
    pub arch: &'static str,
    pub head_dim: usize,
}

impl Meta<'_> {
    /// The full name of key `{arch}.{suffix}`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }
    /// An unsigned key `{arch}.{suffix}`, if present.
    pub fn u(&self, suffix: &str) -> Result<Option<usize>> {
        key_u(self.file, &self.key(suffix))
    }
    /// A numeric key `{arch}.{suffix}`, if present (finite).
    pub fn f(&self, suffix: &str) -> Result<Option<f64>> {
        key_f(self.file, &self.key(suffix))
    }
    /// Whether block 0 has tensor `blk.0.{suffix}`.
    pub fn has_block_tensor(&self, suffix: &str) -> bool {
        self.file.tensor(&format!("blk.0.{suffix}")).is_some()
    }
    /// `{arch}.attention.sliding_window` (absent or 0: none).
    pub fn sliding_window(&self) -> Result<Option<usize>> {
        Ok(self.u("attention.sliding_window")?.filter(|&w| w > 0))
    }
    /// A per-pair F32 vector tensor (`head_dim / 2` values, finite and > 0), if present.
    pub fn pair_factors(&self, name: &str, pairs: usize) -> Result<Option<Vec<f32>>> {
        let Some(t) = self.file.tensor(name) else { return Ok(None) };
        let bad = |reason: String| ModelError::BadTensor { name: name.into(), reason };
        let dims = tensor_dims(self.file, name)?;
        if dims != [pairs] {
            return Err(bad(format!("shape {dims:?}, expected [{pairs}]")));
        }
        if t.ggml_type != GgmlType::F32 {
            return Err(bad(format!("type {:?}, expected F32", t.ggml_type)));
        }
        let v: Vec<f32> = self.file.tensor_data(t)?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if let Some(x) = v.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(bad(format!("factor {x} must be finite and > 0")));
        }
        Ok(Some(v))
    }
}

/// How a block stores the q, k and v projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkvTensors {
    /// `attn_q`, `attn_k`, `attn_v`.
    Separate,
    /// One `attn_qkv` whose rows are `[q; k; v]`.
    Fused,
}

/// How a block stores the FFN's gate and up projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnTensors {
    /// `ffn_gate` and `ffn_up`.
    Separate,
    /// One `ffn_up` of `2 ffn` rows: the gate's rows first, then the up rows.
    FusedGateUp,
}

/// The gated linear unit of the FFN: `act(gate) * up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Glu {
    /// `silu(g) = g / (1 + exp(-g))` (SwiGLU).
    Silu,
    /// GELU's tanh approximation (GeGLU, Gemma).
    GeluTanh,
}

/// Which layers a sliding window applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowLayers {
    All,
    /// Layer `l` is windowed where `l % n < n - 1`: every n-th layer (the last of each group of
    /// n) attends globally (llama.cpp's swa pattern: Gemma 2 n = 2, Gemma 3 n = 6).
    Pattern(usize),
}

/// A sliding attention window: a query at position `p` sees keys at `p - size < j <= p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub size: usize,
    pub layers: WindowLayers,
}

impl Window {
    /// The window of layer `l`, if it has one.
    pub fn of_layer(&self, l: usize) -> Option<usize> {
        match self.layers {
            WindowLayers::All => Some(self.size),
            WindowLayers::Pattern(n) => (n > 0 && l % n < n - 1).then_some(self.size),
        }
    }
}

/// Per-pair RoPE frequency divisors for short and long contexts (`rope_factors_short` /
/// `rope_factors_long`, Phi-3's LongRoPE): the long ones where the session's context exceeds
/// `original_context`. `attention_factor` multiplies cos and sin.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeFactors {
    pub short: Vec<f32>,
    pub long: Vec<f32>,
    pub original_context: usize,
    pub attention_factor: f64,
}

/// An architecture's description of one model (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// RoPE pairs as the kernels rotate them: `Interleaved` where the converter permuted the q/k
    /// rows (llama) or the loader did (partial NeoX rotary, see `rope_dims`), else `HalfSplit`
    /// (NeoX).
    pub layout: PairLayout,
    pub qkv: QkvTensors,
    /// q/k/v projections carry biases (`attn_{q,k,v}.bias`).
    pub qkv_bias: bool,
    /// Per-head RMSNorm of q and k over `head_dim` before RoPE (`attn_q_norm`, `attn_k_norm`,
    /// `[head_dim]` each).
    pub qk_norm: bool,
    pub ffn: FfnTensors,
    pub glu: Glu,
    /// The sliding attention window, where the architecture applies the file's.
    pub window: Option<Window>,
    /// A window the file sets (`{arch}.attention.sliding_window`) that llama.cpp does not apply
    /// to this architecture, and so neither does the runner: llama files (Mistral v0.1's 4096)
    /// and phi3 files (Phi-3-mini-4k's 2047) attend over the whole context. Past this many
    /// positions the logits differ from those of the checkpoint's own (windowed) attention; a
    /// caller can say so (`generate` warns where its context is longer).
    pub ignored_window: Option<usize>,
    /// LongRoPE factors, if the file has them.
    pub rope_factors: Option<RopeFactors>,
    /// Rotary dimensions (`{arch}.rope.dimension_count`), `head_dim` unless the file says less.
    /// Fewer (NeoX pairs `(i, i + rope_dims / 2)`, the dims past `rope_dims` unrotated, e.g.
    /// Phi-4-mini): the loader reorders each q and k head's rows so that those pairs are
    /// adjacent, which leaves every attention score as it was (q and k alike), and RoPE rotates
    /// interleaved pairs, the ones past `rope_dims / 2` not at all
    /// ([`crate::model::Config::rope_table`]). Implemented for fused q/k/v without biases or
    /// q/k norms.
    pub rope_dims: usize,
    /// RMSNorms of the attention and FFN outputs before their residual adds
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// Token embeddings scaled by this (Gemma: `sqrt(hidden)`).
    pub embed_scale: Option<f32>,
    /// Softmax scale of the attention scores (`None`: `1 / sqrt(head_dim)`).
    pub attn_scale: Option<f32>,
    /// Soft-cap of the attention scores (`cap * tanh(s / cap)`).
    pub attn_softcap: Option<f32>,
    /// Soft-cap of the final logits.
    pub final_softcap: Option<f32>,
    /// RoPE base of the windowed layers, where it differs (Gemma 3's local layers; no scaling).
    pub rope_base_local: Option<f64>,
}

impl Spec {
    /// The plain pre-norm block (llama's): separate q/k/v without biases, separate gate and
    /// up, SiLU, RoPE over the whole head in `layout`, no window.
    pub(crate) fn new(m: &Meta, layout: PairLayout) -> Result<Spec> {
        Ok(Spec {
            layout,
            qkv: QkvTensors::Separate,
            qkv_bias: false,
            qk_norm: false,
            ffn: FfnTensors::Separate,
            glu: Glu::Silu,
            window: None,
            ignored_window: None,
            rope_factors: None,
            rope_dims: m.u("rope.dimension_count")?.unwrap_or(m.head_dim),
            post_norms: false,
            embed_scale: None,
            attn_scale: None,
            attn_softcap: None,
            final_softcap: None,
            rope_base_local: None,
        })
    }

    /// The number of tensors each block of this spec has.
    pub fn min_block_tensors(&self) -> usize {
        super::weights::BlockTensors::new(self, 0, Default::default()).all().count()
    }

    /// [`ModelError::Unsupported`] for what the forward pass does not implement.
    fn check(&self, arch: Arch, m: &Meta) -> Result<()> {
        let unsupported = |what: String| Err(ModelError::Unsupported { arch: arch.name().into(), what });
        if self.rope_dims != m.head_dim {
            let r = self.rope_dims;
            let reorderable = self.layout == PairLayout::HalfSplit && self.qkv == QkvTensors::Fused && !self.qkv_bias && !self.qk_norm;
            if !(reorderable && r > 0 && r % 2 == 0 && r < m.head_dim) {
                return unsupported(format!("partial rotary embeddings ({r} of {} head dimensions) in this block layout", m.head_dim));
            }
        }
        // llama.cpp multiplies cos and sin by this key's value for any architecture; only
        // LongRoPE factors carry it here.
        if let Some(a) = m.f("rope.scaling.attn_factor")?.filter(|&a| a != 1.0) {
            if self.rope_factors.is_none() {
                return unsupported(format!("a RoPE attention factor ({a}) without rope_factors tensors"));
            }
        }
        if self.qkv == QkvTensors::Fused && self.qkv_bias {
            return unsupported("biases of a fused q/k/v projection".into());
        }
        Ok(())
    }
}
