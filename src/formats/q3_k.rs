//! GGML Q3_K: 256 weights in a 110-byte block.
//!
//! Layout: `hmask[32]`, `qs[64]`, 12 bytes of packed 6-bit scales, `d` (f16, last). Weight `i`
//! (half `h = i / 128`, `r = i % 128`) has low bits `(qs[32 * h + r % 32] >> (2 * (r / 32))) & 3`
//! and high bit `(hmask[i % 32] >> (i / 32)) & 1`; its code is `low - 4` when the high bit is
//! clear and `low` when it is set. Sub-block `s = i / 16` has the signed scale
//! `(lo_s | hi_s << 4) - 32` with `lo_s` = nibble `s / 8` of byte `s % 8` (low nibble first)
//! and `hi_s = (byte[8 + s % 4] >> (2 * (s / 4))) & 3`; weight = `(d * scale) * code`.
//!
//! `d * scale * code` (11 + 6 + 3 significand bits) is exact in f32: no rounding at all.

use super::blocks::{crumb, crumb_words_gpu, random_scale256};
use super::gguf::GgmlType;
use super::weight::{dequantize_blocks, f16_at, first_nonfinite_f16, le16, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 110;

/// The signed code (-4..=3) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> i32 {
    let low = crumb(b, 32, i);
    let high = (b[i % 32] >> (i / 32)) & 1;
    low as i32 - if high == 0 { 4 } else { 0 }
}

/// The signed 6-bit scale (-32..=31) of sub-block `s` (16 weights).
#[inline]
fn scale(b: &[u8; BLOCK_BYTES], s: usize) -> i32 {
    let sb = &b[96..108];
    let lo = (sb[s % 8] >> (4 * (s / 8))) & 15;
    let hi = (sb[8 + s % 4] >> (2 * (s / 4))) & 3;
    (lo | hi << 4) as i32 - 32
}

/// Dequantises one block, bit-exactly as gguf-py.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = f16_at(b, 108);
    for s in 0..16 {
        let dl = d * scale(b, s) as f32;
        for l in 0..16 {
            out[16 * s + l] = dl * code(b, 16 * s + l) as f32;
        }
    }
}

/// Per weight, `|d * scale * code|` (the value is exact, so this is `|w|`).
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = f16_at(b, 108).abs();
    for s in 0..16 {
        let dl = d * scale(b, s).unsigned_abs() as f32;
        for l in 0..16 {
            out[16 * s + l] = dl * code(b, 16 * s + l).unsigned_abs() as f32;
        }
    }
}

crate::testkit_pub! {
    /// A random block with a finite `d`: mostly realistic positive values, sometimes zero,
    /// negative or an f16 subnormal; random scales and codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut b = [0u8; BLOCK_BYTES];
        rng.fill(&mut b[..108]);
        b[108..].copy_from_slice(&random_scale256(rng, 5e-3).to_le_bytes());
        b
    }
}

/// GPU layout (per block, 7 vec4 = 112 bytes, blocks of a row contiguous): vec4 0 = the 12
/// scale bytes and `d` (low half of the fourth word); vec4s 1..4 = `qs` (vec4 `v` = `qs` words
/// `2v, 8 + 2v, 2v + 1, 9 + 2v`); vec4s 5, 6 = `hmask`. An item is 32 weights: positions
/// `4u .. 4u + 3` of the eight 32-weight quarters.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q3_k",
    ggml_type: Some(GgmlType::Q3_K),
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 32,
    gpu_row_words: |k| 28 * (k / 256),
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[108]),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_q3_k.wgsl"),
    native: native_gemv!("q3_k"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    for (blk, d) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(28)) {
        pack_words(&blk[96..108], &mut d[..3]);
        d[3] = le16(blk, 108) as u32;
        crumb_words_gpu(&blk[32..96], &mut d[4..20]);
        pack_words(&blk[..32], &mut d[20..]);
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
        b[108..].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        let sc: [i32; 16] = std::array::from_fn(|s| s as i32 * 4 - 32 + (s as i32 % 3));
        for s in 0..16 {
            let u = (sc[s] + 32) as u8;
            b[96 + s % 8] |= (u & 15) << (4 * (s / 8));
            b[96 + 8 + s % 4] |= (u >> 4) << (2 * (s / 4));
        }
        let codes: [i32; 256] = std::array::from_fn(|i| (i as i32 * 5 + (i as i32 >> 4)) % 8 - 4);
        for i in 0..256 {
            let (h, r) = (i / 128, i % 128);
            let u = (codes[i] + 4) as u8; // 0..7: bit 2 set means "no -4 offset"
            b[32 + 32 * h + r % 32] |= (u & 3) << (2 * (r / 32));
            b[i % 32] |= (u >> 2) << (i / 32);
        }
        for s in 0..16 {
            assert_eq!(scale(&b, s), sc[s]);
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&b, &mut out);
        for i in 0..256 {
            assert_eq!(out[i], 0.5 * sc[i / 16] as f32 * codes[i] as f32, "{i}");
        }
    }

    #[test]
    fn validation_and_lengths() {
        crate::formats::weight::check_validation_and_lengths(&FORMAT, &[108]);
    }
}
