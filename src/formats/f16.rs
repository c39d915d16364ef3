//! F16 weights: one IEEE half per weight (ggml type 1); gguf-py widens them exactly to f32.
//!
//! GPU layout: the row's halves packed two per word (even column low), the row padded with
//! zeros to a multiple of 8 weights; an item is one vec4 (8 weights).

use super::gguf::GgmlType;
use super::weight::{le16, pack_bytes, WeightFormat};
use half::f16;

pub const FORMAT: WeightFormat = WeightFormat {
    name: "f16",
    ggml_type: Some(GgmlType::F16),
    block_weights: 1,
    block_bytes: 2,
    item_weights: 8,
    gpu_row_words: |k| k.div_ceil(8) * 4,
    relayout_row: pack_bytes,
    dequantize,
    magnitudes,
    first_invalid_block: |_| None,
    random_blocks,
    wgsl: include_str!("../../wgsl/fmt_f16.wgsl"),
    native: native_gemv!("f16"),
    native_gemm: None,
    native_q8: None,
};

fn dequantize(src: &[u8], out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = f16::from_bits(le16(src, 2 * i)).to_f32();
    }
}

fn magnitudes(src: &[u8], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = f16::from_bits(le16(src, 2 * i)).to_f64().abs();
    }
}

/// Any finite half (subnormals and extremes included) most of the time, else a value near 1.
fn random_blocks(rng: &mut fastrand::Rng, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|_| {
            let b = if rng.u32(0..4) == 0 { rng.u16(..) & !0x4000 } else { f16::from_f32(rng.f32() * 2.0 - 1.0).to_bits() };
            b.to_le_bytes()
        })
        .collect()
}
