//! `qwen3`: qwen2's block without the q/k/v biases and with a per-head RMSNorm of q and of k
//! (`attn_q_norm`, `attn_k_norm`, `[head_dim]` each, the layer's RMS epsilon) between the
//! projections and RoPE; NeoX RoPE ([`PairLayout::HalfSplit`]).

use super::{Meta, Spec};
use crate::kernels::rope::PairLayout;
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    Ok(Spec { qk_norm: true, ..Spec::new(m, PairLayout::HalfSplit)? })
}
