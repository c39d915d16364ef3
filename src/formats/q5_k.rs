//! GGML Q5_K: 256 weights in a 176-byte block.
//!
//! Layout: `d` (f16), `dmin` (f16), 12 bytes of packed 6-bit scales and mins (as Q4_K, see
//! [`super::q4k::get_scale_min`]), `qh[32]`, `qs[128]`. Weight `i` (sub-block `j = i / 32`,
//! `l = i % 32`) has low nibble `(qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15` and fifth bit
//! `(qh[l] >> j) & 1`; weight = `(d * sc_j) * q - dmin * m_j`.
//!
//! `d * sc_j * q` (11 + 6 + 5 significand bits) and `dmin * m_j` are exact in f32, so the
//! subtraction is the only rounding: any product order, or a fused multiply-add, gives the same
//! bits.

use super::blocks::{nibble_words_gpu, random_scale256};
use super::gguf::GgmlType;
use super::q4k::get_scale_min;
use super::weight::{dequantize_blocks, f16_at, first_nonfinite_f16, le32, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 176;

/// The 5-bit code (0..=31) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> u8 {
    let (j, l) = (i / 32, i % 32);
    let lo = (b[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
    let hi = (b[16 + l] >> j) & 1;
    lo | hi << 4
}

/// The scale bytes of a block.
fn scales(b: &[u8; BLOCK_BYTES]) -> [u8; 12] {
    b[4..16].try_into().expect("12 bytes")
}

/// Dequantises one block, bit-exactly as gguf-py.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, dmin, s) = (f16_at(b, 0), f16_at(b, 2), scales(b));
    for j in 0..8 {
        let (sc, m) = get_scale_min(j, &s);
        let (d1, m1) = (d * sc as f32, dmin * m as f32);
        for l in 0..32 {
            out[32 * j + l] = d1 * code(b, 32 * j + l) as f32 - m1;
        }
    }
}

/// Per weight, `|d * sc * q| + |dmin * m|`: the magnitudes of the terms summed into the weight.
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, dmin, s) = (f16_at(b, 0).abs(), f16_at(b, 2).abs(), scales(b));
    for j in 0..8 {
        let (sc, m) = get_scale_min(j, &s);
        let (d1, m1) = (d * sc as f32, dmin * m as f32);
        for l in 0..32 {
            out[32 * j + l] = d1 * code(b, 32 * j + l) as f32 + m1;
        }
    }
}

crate::testkit_pub! {
    /// A random block with finite `d` and `dmin`: mostly realistic positive values, sometimes
    /// zero, negative or an f16 subnormal; random scales and codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..2].copy_from_slice(&random_scale256(rng, 2e-3).to_le_bytes());
        b[2..4].copy_from_slice(&random_scale256(rng, 2e-3).to_le_bytes());
        rng.fill(&mut b[4..]);
        b
    }
}

/// GPU layout (per block, 11 vec4 = 176 bytes, blocks of a row contiguous): vec4 0 = bytes 0..16
/// (`d | dmin << 16`, the 12 scale bytes); vec4s 1..8 = the 128 nibble bytes with the 4 x 8
/// matrix of nibble words transposed (component `pp` of vec4 `1 + wi` = nibble word `8pp + wi`:
/// positions `4wi .. 4wi + 3` of sub-blocks `2pp`, `2pp + 1`), as Q4_K; vec4s 9, 10 = the `qh`
/// words in the order 0, 4, 1, 5, 2, 6, 3, 7. An item is a quad (64 weights): positions
/// `4u .. 4u + 3` and `4u + 16 .. 4u + 19` of all eight sub-blocks.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q5_k",
    ggml_type: Some(GgmlType::Q5_K),
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 64,
    gpu_row_words: |k| k / 256 * 44,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[0, 2]),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_q5_k.wgsl"),
    native: native_gemv!("q5_k"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    for (blk, d) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(44)) {
        pack_words(&blk[..16], &mut d[..4]);
        nibble_words_gpu(&blk[48..], &mut d[4..36]);
        // GPU words 36.. = qh words 0, 4, 1, 5, 2, 6, 3, 7.
        for (gw, w) in d[36..].iter_mut().enumerate() {
            *w = le32(blk, 16 + 4 * (gw / 2 + 4 * (gw % 2)));
        }
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices are layout positions
mod tests {
    use super::super::q4k::pack_scale_min;
    use super::*;
    use half::f16;

    #[test]
    fn known_block() {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        b[2..4].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
        let sc = [1, 2, 3, 4, 40, 50, 60, 63];
        let m = [0, 1, 2, 3, 33, 44, 55, 63];
        b[4..16].copy_from_slice(&pack_scale_min(&sc, &m));
        let codes: [u8; 256] = std::array::from_fn(|i| (i as u8).wrapping_mul(13).wrapping_add(i as u8 >> 5) % 32);
        for i in 0..256 {
            let (j, l) = (i / 32, i % 32);
            b[48 + 32 * (j / 2) + l] |= (codes[i] & 15) << (4 * (j % 2));
            b[16 + l] |= (codes[i] >> 4) << j;
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&b, &mut out);
        for i in 0..256 {
            let j = i / 32;
            assert_eq!(out[i], 0.5 * sc[j] as f32 * codes[i] as f32 - 0.25 * m[j] as f32, "{i}");
        }
    }

    #[test]
    fn validation_and_lengths() {
        crate::formats::weight::check_validation_and_lengths(&FORMAT, &[0, 2]);
    }
}
