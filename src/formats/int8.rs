//! INT8: this library's symmetric 8-bit format as a weight-matrix format (no GGUF type).
//!
//! Block of 32 weights, 36 bytes: `d` (f32, little-endian), then 32 int8 codes `q` (-128..=127),
//! weight `i` in byte `4 + i`. Weight = `d * q`, one f32 multiplication.
//!
//! A per-row (or per-tensor) scale is held as the row's scale repeated in each of its blocks.
//! Zero points have no place here: symmetric codes only (an asymmetric matrix is converted by
//! dequantising it and quantising again, or by folding `-zero * scale` into a bias).
//!
//! A block is invalid when `d` is NaN, infinite or an f32 subnormal (reported as
//! [`FormatError::NonFiniteScale`](super::FormatError::NonFiniteScale)), as in
//! [`super::int4`]: a GPU may flush subnormal operands.
//!
//! GPU layout (per row, `nb = k / 32` blocks): the row's `k` code bytes first (`k / 4` words,
//! block after block), then the `nb` scales as f32 words, padded to a whole vec4. An item is 16
//! weights: one vec4 of codes; its scale is word `item / 2` of the scale area.

use super::int4::{random_scale, scale, valid_scale};
use super::weight::{dequantize_blocks, magnitudes_blocks, pack_bytes, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 32;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 36;

/// One block from its scale and its 32 codes (two's-complement bytes).
pub fn block(d: f32, codes: &[u8; 32]) -> [u8; BLOCK_BYTES] {
    let mut b = [0u8; BLOCK_BYTES];
    b[..4].copy_from_slice(&d.to_le_bytes());
    b[4..].copy_from_slice(codes);
    b
}

/// Dequantises one block: `d * q` in f32.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = scale(b);
    for (o, &q) in out.iter_mut().zip(&b[4..]) {
        *o = d * f32::from(q as i8);
    }
}

/// Per weight, `|d * q|` (the only operand; the value is one rounding of it).
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = scale(b).abs();
    for (o, &q) in out.iter_mut().zip(&b[4..]) {
        *o = d * f32::from(q as i8).abs();
    }
}

crate::testkit_pub! {
    /// A random valid block: a random valid scale (see [`super::int4`]), random codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut codes = [0u8; 32];
        rng.fill(&mut codes);
        block(random_scale(rng), &codes)
    }
}

pub const FORMAT: WeightFormat = WeightFormat {
    name: "int8",
    ggml_type: None,
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 16,
    gpu_row_words: |k| k / 4 + (k / 32).div_ceil(4) * 4,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| src.chunks_exact(BLOCK_BYTES).position(|b| !valid_scale(scale(b))),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_int8.wgsl"),
    native: native_gemv!("int8"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (codes, scales) = dst.split_at_mut(nb * BLOCK_WEIGHTS / 4);
    for (b, blk) in src.chunks_exact(BLOCK_BYTES).enumerate() {
        pack_bytes(&blk[4..], &mut codes[8 * b..8 * b + 8]);
        scales[b] = scale(blk).to_bits();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block() {
        let codes: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37));
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&block(0.1, &codes), &mut out);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, 0.1 * ((i as u8).wrapping_mul(37) as i8) as f32);
        }
    }

    #[test]
    fn validation_and_lengths() {
        let bad = [f32::INFINITY, f32::NAN, f32::from_bits(0x8000_0001)];
        crate::formats::weight::check_invalid_scales(&FORMAT, &bad.map(|v| (0, v.to_le_bytes())));
    }
}
