//! `qwen2`: q/k/v biases; q/k rows unpermuted, so RoPE rotates `(i, i + d/2)` (NeoX,
//! [`PairLayout::HalfSplit`]); `output.weight` is usually absent and the LM head is
//! `token_embd.weight` (tied embeddings).

use super::{Meta, Spec};
use crate::kernels::rope::PairLayout;
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    Ok(Spec { qkv_bias: true, ..Spec::new(m, PairLayout::HalfSplit)? })
}
