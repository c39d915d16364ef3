//! GGML Q5_1: 32 weights in a 24-byte block.
//!
//! Layout: `d` (f16), `m` (f16), `qh` (4 bytes, a little-endian u32 whose bit `i` is bit 4 of
//! weight `i`'s code), then 16 bytes of low nibbles: byte `i` holds weight `i` in its low
//! nibble and weight `i + 16` in its high nibble. Weight = `d * code + m`.
//!
//! `d * code` is exact in f32 (11-bit by 5-bit significands); the addition of `m` is the only
//! rounding (a fused multiply-add gives the same bits).

use super::blocks::{bit32, nibble32, random_block_dm};
use super::gguf::GgmlType;
use super::weight::{dequantize_blocks, f16_at, first_nonfinite_f16, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 32;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 24;

/// The unsigned code (0..=31) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> u8 {
    nibble32(b, 8, i) | bit32(b, 4, i) << 4
}

/// Dequantises one block, bit-exactly as gguf-py.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    *out = std::array::from_fn(|i| d * code(b, i) as f32 + m);
}

/// Per weight, `|d * code| + |m|`: the magnitudes of the terms summed into the weight.
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, m) = (f16_at(b, 0).abs(), f16_at(b, 2).abs());
    *out = std::array::from_fn(|i| d * code(b, i) as f32 + m);
}

crate::testkit_pub! {
    /// A random block with finite `d` and `m`: mostly realistic (`d` > 0, `m` of either sign),
    /// sometimes zero or f16 subnormals; random codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        random_block_dm(rng)
    }
}

/// GPU layout (per row, `nb = k / 32` blocks): `nb` vec4s of low-nibble bytes (block `b`: vec4
/// `b`), then two head words per block (`qh`, `d | m << 16`), padded to a whole vec4. An item is
/// one block.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q5_1",
    ggml_type: Some(GgmlType::Q5_1),
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 32,
    gpu_row_words: |k| 4 * (k / 32) + (k / 32).div_ceil(2) * 4,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[0, 2]),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_q5_1.wgsl"),
    native: native_gemv!("q5_1"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (codes, heads) = dst.split_at_mut(4 * nb);
    for (b, blk) in src.chunks_exact(BLOCK_BYTES).enumerate() {
        pack_words(&blk[8..], &mut codes[4 * b..4 * b + 4]);
        pack_words(&blk[4..8], &mut heads[2 * b..2 * b + 1]);
        pack_words(&blk[..4], &mut heads[2 * b + 1..2 * b + 2]);
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices are layout positions
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn known_block() {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..2].copy_from_slice(&f16::from_f32(0.125).to_bits().to_le_bytes());
        b[2..4].copy_from_slice(&f16::from_f32(-2.0).to_bits().to_le_bytes());
        let codes: [u8; 32] = std::array::from_fn(|i| ((i * 11 + 5) % 32) as u8);
        let mut qh = 0u32;
        for i in 0..32 {
            qh |= ((codes[i] >> 4) as u32) << i;
        }
        b[4..8].copy_from_slice(&qh.to_le_bytes());
        for i in 0..16 {
            b[8 + i] = (codes[i] & 15) | ((codes[i + 16] & 15) << 4);
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&b, &mut out);
        for i in 0..32 {
            assert_eq!(out[i], 0.125 * codes[i] as f32 - 2.0, "{i}");
        }
    }

    #[test]
    fn validation_and_lengths() {
        crate::formats::weight::check_validation_and_lengths(&FORMAT, &[0, 2]);
    }
}
