//! `gemma3`: Gemma 3 (text). Gemma 2's block ([`super::gemma2`]) with a per-head RMSNorm of q
//! and k (`attn_q_norm`, `attn_k_norm`), five windowed layers to each global one (layer `l` is
//! windowed unless `l % 6 == 5`, llama.cpp's pattern), and the windowed layers' own RoPE base
//! (`gemma3.rope.freq_base_swa`, absent = 10000, unscaled). The 27B model (62 layers) takes
//! `1 / sqrt(hidden / heads)` as its attention scale. Soft-caps where the file has them.

use super::{Meta, Spec};
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    let spec = super::gemma2::gemma(m, 6, 62)?;
    Ok(Spec { qk_norm: true, rope_base_local: Some(m.f("rope.freq_base_swa")?.unwrap_or(10000.0)), ..spec })
}
