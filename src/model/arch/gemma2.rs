//! `gemma2`: Gemma 2. Pre- and post-norms around attention and the FFN (`post_attention_norm`,
//! `post_ffw_norm`; llama.cpp's converter stores every Gemma norm weight as `1 + w`, so they are
//! plain RMSNorms here), a GELU-tanh gated FFN, token embeddings scaled by `sqrt(hidden)`, NeoX
//! RoPE, soft-capped attention scores and final logits (`gemma2.attn_logit_softcapping`,
//! `gemma2.final_logit_softcapping`) and a sliding window on every other layer (even layers,
//! `gemma2.attention.sliding_window`), as llama.cpp runs it. The attention scale is
//! `1 / sqrt(head_dim)` (`query_pre_attn_scalar` is not in the file; llama.cpp takes
//! `1 / sqrt(hidden / heads)` for the 27B model, recognised by its 46 layers).

use super::{Glu, Meta, Spec, Window, WindowLayers};
use crate::kernels::rope::PairLayout;
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    gemma(m, 2, 46)
}

/// The Gemma 2 / Gemma 3 block: windows every `pattern`-th layer global, and the 27B model's
/// attention scale at `layers_27b` layers.
pub(super) fn gemma(m: &Meta, pattern: usize, layers_27b: usize) -> Result<Spec> {
    let hidden = m.u("embedding_length")?.unwrap_or(0);
    let heads = m.u("attention.head_count")?.unwrap_or(0);
    let attn_scale = (m.u("block_count")? == Some(layers_27b) && heads > 0).then(|| 1.0 / ((hidden / heads) as f32).sqrt());
    let cap = |key: &str| -> Result<Option<f32>> { Ok(m.f(key)?.filter(|&c| c > 0.0).map(|c| c as f32)) };
    Ok(Spec {
        glu: Glu::GeluTanh,
        post_norms: true,
        embed_scale: Some((hidden as f32).sqrt()),
        attn_scale,
        attn_softcap: cap("attn_logit_softcapping")?,
        final_softcap: cap("final_logit_softcapping")?,
        window: m.sliding_window()?.map(|size| Window { size, layers: WindowLayers::Pattern(pattern) }),
        ..Spec::new(m, PairLayout::HalfSplit)?
    })
}
