//! `gemma2`: Gemma 2. Pre- and post-norms around attention and the FFN (`post_attention_norm`,
//! `post_ffw_norm`; llama.cpp's converter stores every Gemma norm weight as `1 + w`, so they are
//! plain RMSNorms here), a GELU-tanh gated FFN, token embeddings scaled by `sqrt(hidden)`, NeoX
//! RoPE, soft-capped attention scores and final logits (`gemma2.attn_logit_softcapping`,
//! `gemma2.final_logit_softcapping`) and a sliding window on every other layer (even layers,
//! `gemma2.attention.sliding_window`), as llama.cpp runs it: where the file leaves a key out,
//! llama.cpp's defaults (window 4096, soft-caps 50 and 30), and the windowed layers' RoPE base
//! `gemma2.rope.freq_base_swa` where the file sets one. The attention scale is
//! `1 / sqrt(head_dim)` (`query_pre_attn_scalar` is not in the file; llama.cpp takes
//! `1 / sqrt(hidden / heads)` for the 27B model, recognised by its 46 layers).

use super::{Glu, Meta, Spec, Window, WindowLayers};
use crate::kernels::rope::PairLayout;
use crate::model::error::{ModelError, Result};

/// llama.cpp's Gemma 2 values for keys a file leaves out: the window, the attention and the
/// final soft-cap.
const DEFAULT_WINDOW: usize = 4096;
const DEFAULT_ATTN_SOFTCAP: f64 = 50.0;
const DEFAULT_FINAL_SOFTCAP: f64 = 30.0;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    // llama.cpp windows every even layer and soft-caps both the scores and the logits of every
    // gemma2 file, taking its defaults where a key is absent.
    let positive = |suffix: &str, default: f64| -> Result<f64> {
        match m.f(suffix)? {
            Some(v) if v <= 0.0 => Err(ModelError::BadKey { key: m.key(suffix), reason: format!("{v} must be > 0") }),
            v => Ok(v.unwrap_or(default)),
        }
    };
    let size = positive("attention.sliding_window", DEFAULT_WINDOW as f64)? as usize;
    Ok(Spec {
        attn_softcap: Some(positive("attn_logit_softcapping", DEFAULT_ATTN_SOFTCAP)? as f32),
        final_softcap: Some(positive("final_logit_softcapping", DEFAULT_FINAL_SOFTCAP)? as f32),
        window: Some(Window { size, layers: WindowLayers::Pattern(2) }),
        rope_base_local: m.f("rope.freq_base_swa")?,
        ..gemma(m, 46)?
    })
}

/// The Gemma 2 / Gemma 3 block without windows or soft-caps: the 27B model's attention scale at
/// `layers_27b` layers.
pub(super) fn gemma(m: &Meta, layers_27b: usize) -> Result<Spec> {
    let hidden = m.u("embedding_length")?.unwrap_or(0);
    let heads = m.u("attention.head_count")?.unwrap_or(0);
    let attn_scale = (m.u("block_count")? == Some(layers_27b) && heads > 0).then(|| 1.0 / ((hidden / heads) as f32).sqrt());
    Ok(Spec { glu: Glu::GeluTanh, post_norms: true, embed_scale: Some((hidden as f32).sqrt()), attn_scale, ..Spec::new(m, PairLayout::HalfSplit)? })
}
