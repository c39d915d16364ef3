//! `llama`: Llama 2/3/3.1 and Mistral files. The converter permutes the q/k rows of each head
//! so that RoPE rotates adjacent pairs `(2i, 2i+1)` (llama.cpp's "normal" RoPE,
//! [`PairLayout::Interleaved`]); Llama 3.1 files carry `rope_freqs.weight` (read by
//! [`crate::model::config`]). q/k/v biases where block 0 has `attn_q.bias`.
//!
//! `llama.attention.sliding_window` (Mistral) is not applied: llama.cpp's llama architecture
//! never reads the key (its converter writes none for Mistral checkpoints, and a file that has
//! one still attends over the whole context there), so the runner matches llama.cpp and records
//! the window as [`Spec::ignored_window`].

use super::{Meta, Spec};
use crate::kernels::rope::PairLayout;
use crate::model::error::Result;

pub(super) fn describe(m: &Meta) -> Result<Spec> {
    Ok(Spec { qkv_bias: m.has_block_tensor("attn_q.bias"), ignored_window: m.sliding_window()?, ..Spec::new(m, PairLayout::Interleaved)? })
}
