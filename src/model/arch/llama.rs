//! `llama`: Llama 2/3/3.1 and Mistral files. The converter permutes the q/k rows of each head
//! so that RoPE rotates adjacent pairs `(2i, 2i+1)` (llama.cpp's "normal" RoPE,
//! [`PairLayout::Interleaved`]); Llama 3.1 files carry `rope_freqs.weight` (read by
//! [`crate::model::config`]). q/k/v biases where block 0 has `attn_q.bias`; a sliding window
//! where `llama.attention.sliding_window` sets one (Mistral).

use super::{Meta, Spec};
use crate::kernels::rope::PairLayout;
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    Ok(Spec { qkv_bias: m.has_block_tensor("attn_q.bias"), window: m.sliding_window()?, ..Spec::new(m, PairLayout::Interleaved)? })
}
