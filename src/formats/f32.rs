//! F32 weights: one 4-byte IEEE value per weight (ggml type 0).
//!
//! GPU layout: the row as is (`k` words, any `k`), zero-padded to a whole vec4; an item is one
//! vec4 (4 weights).

use super::gguf::GgmlType;
use super::weight::{pack_words, WeightFormat};

pub const FORMAT: WeightFormat = WeightFormat {
    name: "f32",
    ggml_type: Some(GgmlType::F32),
    block_weights: 1,
    block_bytes: 4,
    item_weights: 4,
    gpu_row_words: |k| k.div_ceil(4) * 4,
    relayout_row: pack_words,
    dequantize,
    magnitudes,
    first_invalid_block: |_| None,
    random_blocks,
    wgsl: include_str!("../../wgsl/fmt_f32.wgsl"),
    native: native_gemv!("f32"),
    native_gemm: None,
    native_q8: None,
};

fn dequantize(src: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

fn magnitudes(src: &[u8], out: &mut [f64]) {
    for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
        *o = (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).abs();
    }
}

/// Normal values with a random per-call magnitude.
fn random_blocks(rng: &mut fastrand::Rng, count: usize) -> Vec<u8> {
    let s = 10f32.powi(rng.i32(-3..3));
    (0..count).flat_map(|_| ((rng.f32() * 2.0 - 1.0) * s).to_le_bytes()).collect()
}
