//! `gemma3`: Gemma 3 (text). Gemma 2's block ([`super::gemma2`]) with a per-head RMSNorm of q
//! and k (`attn_q_norm`, `attn_k_norm`), five windowed layers to each global one (layer `l` is
//! windowed unless `l % 6 == 5`, llama.cpp's pattern), and the windowed layers' own RoPE base
//! (`gemma3.rope.freq_base_swa`, absent = 10000, unscaled). The 27B model (62 layers) takes
//! `1 / sqrt(hidden / heads)` as its attention scale. As llama.cpp: windows only where
//! `gemma3.attention.sliding_window` sets one (the local RoPE base with them), the final
//! soft-cap where the file sets one, and no attention soft-cap (llama.cpp reads no such key
//! for gemma3; Gemma 3 has none).

use super::{Meta, Spec, Window, WindowLayers};
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    let window = m.sliding_window()?.map(|size| Window { size, layers: WindowLayers::Pattern(6) });
    Ok(Spec {
        qk_norm: true,
        final_softcap: m.f("final_logit_softcapping")?.filter(|&c| c != 0.0).map(|c| c as f32),
        rope_base_local: window.map(|_| m.f("rope.freq_base_swa")).transpose()?.map(|b| b.unwrap_or(10000.0)),
        window,
        ..super::gemma2::gemma(m, 62)?
    })
}
