//! `phi3`: Phi-3, Phi-3.5 and Phi-4-mini files. One `attn_qkv` matrix whose rows are
//! `[q; k; v]` (older conversions: separate `attn_q/k/v`) and one `ffn_up` of `2 ffn` rows, the
//! gate's first (Hugging Face's `Phi3MLP` splits `gate_up_proj`'s output in two halves, gate
//! then up); NeoX RoPE ([`PairLayout::HalfSplit`]). LongRoPE files carry
//! `rope_factors_short.weight` / `rope_factors_long.weight` (per-pair frequency divisors; the
//! long ones where the context exceeds `phi3.rope.scaling.original_context_length`, as
//! llama.cpp chooses them) and `phi3.rope.scaling.attn_factor` (cos and sin are multiplied by
//! it). `phi3.attention.sliding_window` is not applied: llama.cpp turns Phi's windows off
//! (src/models/phi3.cpp, with a warning), so the runner matches it and records the window as
//! [`Spec::ignored_window`].

use super::{FfnTensors, Meta, QkvTensors, RopeFactors, Spec};
use crate::kernels::rope::PairLayout;
use crate::model::error::{ModelError, Result};

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    let base = Spec::new(m, PairLayout::HalfSplit)?;
    let pairs = base.rope_dims / 2;
    let (short, long) = (m.pair_factors("rope_factors_short.weight", pairs)?, m.pair_factors("rope_factors_long.weight", pairs)?);
    let attention_factor = m.f("rope.scaling.attn_factor")?;
    if let Some(a) = attention_factor {
        if a.is_nan() || a <= 0.0 {
            return Err(ModelError::BadKey { key: m.key("rope.scaling.attn_factor"), reason: format!("{a} must be > 0") });
        }
    }
    let rope_factors = match (short, long) {
        (Some(short), Some(long)) => {
            let original_context = match m.u("rope.scaling.original_context_length")? {
                Some(n) => n,
                None => m.u("context_length")?.ok_or_else(|| ModelError::MissingKey(m.key("context_length")))?,
            };
            Some(RopeFactors { short, long, original_context, attention_factor: attention_factor.unwrap_or(1.0) })
        }
        (None, None) => None,
        (s, _) => {
            let missing = if s.is_none() { "rope_factors_short.weight" } else { "rope_factors_long.weight" };
            return Err(ModelError::MissingTensor(missing.into()));
        }
    };
    let qkv = if m.has_block_tensor("attn_qkv.weight") { QkvTensors::Fused } else { QkvTensors::Separate };
    Ok(Spec {
        qkv,
        qkv_bias: qkv == QkvTensors::Separate && m.has_block_tensor("attn_q.bias"),
        ffn: FfnTensors::FusedGateUp,
        ignored_window: m.sliding_window()?,
        rope_factors,
        ..base
    })
}
