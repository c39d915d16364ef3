//! GGML Q6_K: 256 weights in a 210-byte block.
//!
//! Layout: `ql[128]`, `qh[64]`, `scales[16]` (i8), `d` (f16, last). Weight `i` (half
//! `h = i / 128`, `r = i % 128`) has low nibble `(ql[64 * h + r % 64] >> (4 * (r / 64))) & 15`
//! and high bits `(qh[32 * h + r % 32] >> (2 * (r / 32))) & 3`; code `q = (lo | hi << 4) - 32`
//! and weight = `(d * scales[i / 16]) * q`.
//!
//! `d * sc` (11 + 7 significand bits) times `q` (5 bits) is exact in f32: the dequantised value
//! has no rounding, in any product order.

use super::blocks::{crumb, crumb_words_gpu, nibble_words_gpu, random_scale256};
use super::gguf::GgmlType;
use super::weight::{dequantize_blocks, f16_at, first_nonfinite_f16, le16, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 210;

/// The signed code (-32..=31) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> i32 {
    let (h, r) = (i / 128, i % 128);
    let lo = (b[64 * h + r % 64] >> (4 * (r / 64))) & 15;
    let hi = crumb(b, 128, i);
    (lo | hi << 4) as i32 - 32
}

/// The signed scale of sub-block `s` (16 weights).
#[inline]
fn scale(b: &[u8; BLOCK_BYTES], s: usize) -> f32 {
    b[192 + s] as i8 as f32
}

/// Dequantises one block, bit-exactly as gguf-py.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = f16_at(b, 208);
    for s in 0..16 {
        let ds = d * scale(b, s);
        for l in 0..16 {
            out[16 * s + l] = ds * code(b, 16 * s + l) as f32;
        }
    }
}

/// Per weight, `|d * sc * q|` (the value is exact, so this is `|w|`).
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = f16_at(b, 208).abs();
    for s in 0..16 {
        let ds = d * scale(b, s).abs();
        for l in 0..16 {
            out[16 * s + l] = ds * code(b, 16 * s + l).unsigned_abs() as f32;
        }
    }
}

crate::testkit_pub! {
    /// A random block with a finite `d`: mostly realistic positive values, sometimes zero,
    /// negative or an f16 subnormal; random scales and codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut b = [0u8; BLOCK_BYTES];
        rng.fill(&mut b[..208]);
        b[208..].copy_from_slice(&random_scale256(rng, 1e-3).to_le_bytes());
        b
    }
}

/// GPU layout (per row, `nb = k / 256` blocks): 13 vec4 per block - 8 of `ql` (vec4 `u` = `ql`
/// words `u, 8 + u, 16 + u, 24 + u`), 4 of `qh` (vec4 `v` = `qh` words `2v, 8 + 2v, 2v + 1,
/// 9 + 2v`), 1 of scales - then the `nb` f16 `d` (block `2i`: low half of word `i`), padded to a
/// whole vec4. An item is 32 weights: positions `4u .. 4u + 3` of the eight 32-weight quarters.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q6_k",
    ggml_type: Some(GgmlType::Q6_K),
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 32,
    gpu_row_words: |k| 52 * (k / 256) + (k / 256).div_ceil(8) * 4,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[208]),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_q6_k.wgsl"),
    native: native_gemv!("q6_k"),
    native_gemm: Some(super::NativeGemm { msl: include_str!("../../msl/mm_gemm_quant.metal"), entry: "mm_gemm_q6_k" }),
    native_q8: Some(super::NativeGemv { msl: include_str!("../../msl/mm_gemv_q8.metal"), entries: native_gemv_entries!("mm_gemv_q8_q6_k") }),
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (blocks, ds) = dst.split_at_mut(52 * nb);
    for (b, (blk, d)) in src.chunks_exact(BLOCK_BYTES).zip(blocks.chunks_exact_mut(52)).enumerate() {
        nibble_words_gpu(&blk[..128], &mut d[..32]);
        crumb_words_gpu(&blk[128..192], &mut d[32..48]);
        pack_words(&blk[192..208], &mut d[48..]);
        ds[b / 2] |= (le16(blk, 208) as u32) << (16 * (b % 2));
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
        b[208..].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        let sc: [i8; 16] = std::array::from_fn(|s| (s as i8 - 8) * 15);
        for s in 0..16 {
            b[192 + s] = sc[s] as u8;
        }
        let codes: [u8; 256] = std::array::from_fn(|i| (i as u8).wrapping_mul(29).wrapping_add(i as u8 >> 6) % 64);
        for i in 0..256 {
            let (h, r) = (i / 128, i % 128);
            b[64 * h + r % 64] |= (codes[i] & 15) << (4 * (r / 64));
            b[128 + 32 * h + r % 32] |= (codes[i] >> 4) << (2 * (r / 32));
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&b, &mut out);
        for i in 0..256 {
            assert_eq!(out[i], 0.5 * sc[i / 16] as f32 * (codes[i] as f32 - 32.0), "{i}");
        }
    }

    #[test]
    fn validation_and_lengths() {
        crate::formats::weight::check_validation_and_lengths(&FORMAT, &[208]);
    }
}
