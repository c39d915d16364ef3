//! BF16 weights: the high 16 bits of an f32 per weight (ggml type 30); widened exactly.
//!
//! GPU layout: as F16 (two per word, rows padded to 8 weights); an item is one vec4 (8 weights).

use super::gguf::GgmlType;
use super::weight::{le16, pack_bytes, WeightFormat};

pub const FORMAT: WeightFormat = WeightFormat {
    name: "bf16",
    ggml_type: Some(GgmlType::BF16),
    block_weights: 1,
    block_bytes: 2,
    item_weights: 8,
    gpu_row_words: |k| k.div_ceil(8) * 4,
    relayout_row: pack_bytes,
    dequantize,
    magnitudes,
    first_invalid_block: |_| None,
    random_blocks,
    wgsl: include_str!("../../wgsl/fmt_bf16.wgsl"),
    native: native_gemv!("bf16"),
    native_gemm: None,
    native_q8: None,
};

/// The f32 of bf16 bits `b`.
pub fn to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

fn dequantize(src: &[u8], out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = to_f32(le16(src, 2 * i));
    }
}

fn magnitudes(src: &[u8], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = (to_f32(le16(src, 2 * i)) as f64).abs();
    }
}

/// Finite bf16 values of wide-ranging magnitude (exponents within +-2^20 of 1, subnormal-free).
fn random_blocks(rng: &mut fastrand::Rng, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|_| {
            let e = rng.u16(107..147); // biased exponent
            let b = (rng.u16(0..2) << 15) | (e << 7) | rng.u16(0..128);
            b.to_le_bytes()
        })
        .collect()
}
