//! GGML Q2_K: 256 weights in an 84-byte block.
//!
//! Layout: `scales[16]` (low nibble: scale, high nibble: min of sub-block `s`, 16 weights
//! each), `qs[64]`, `d` (f16), `dmin` (f16). Weight `i` (half `h = i / 128`, `r = i % 128`) has
//! the 2-bit code `(qs[32 * h + r % 32] >> (2 * (r / 32))) & 3`; weight =
//! `(d * sc) * q - dmin * m` with `sc`, `m` from `scales[i / 16]`.
//!
//! `d * sc * q` (11 + 4 + 2 significand bits) and `dmin * m` are exact in f32, so the
//! subtraction is the only rounding (a fused multiply-add gives the same bits).

use super::blocks::{crumb, crumb_words_gpu, random_scale256};
use super::gguf::GgmlType;
use super::weight::{dequantize_blocks, f16_at, first_nonfinite_f16, le32, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 84;

/// The 2-bit code of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> u8 {
    crumb(b, 16, i)
}

/// Dequantises one block, bit-exactly as gguf-py.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    for s in 0..16 {
        let dl = d * (b[s] & 15) as f32;
        let ml = dmin * (b[s] >> 4) as f32;
        for l in 0..16 {
            out[16 * s + l] = dl * code(b, 16 * s + l) as f32 - ml;
        }
    }
}

/// Per weight, `|d * sc * q| + |dmin * m|`: the magnitudes of the terms summed into the weight.
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let (d, dmin) = (f16_at(b, 80).abs(), f16_at(b, 82).abs());
    for s in 0..16 {
        let dl = d * (b[s] & 15) as f32;
        let ml = dmin * (b[s] >> 4) as f32;
        for l in 0..16 {
            out[16 * s + l] = dl * code(b, 16 * s + l) as f32 + ml;
        }
    }
}

crate::testkit_pub! {
    /// A random block with finite `d` and `dmin`: mostly realistic positive values, sometimes
    /// zero, negative or an f16 subnormal; random scales and codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut b = [0u8; BLOCK_BYTES];
        rng.fill(&mut b[..80]);
        b[80..82].copy_from_slice(&random_scale256(rng, 2e-2).to_le_bytes());
        b[82..84].copy_from_slice(&random_scale256(rng, 2e-2).to_le_bytes());
        b
    }
}

/// GPU layout (per row, `nb = k / 256` blocks): 5 vec4 per block - the 16 scale bytes, then 4 of
/// `qs` (vec4 `v` = `qs` words `2v, 8 + 2v, 2v + 1, 9 + 2v`) - then one word per block
/// (`d | dmin << 16`), padded to a whole vec4. An item is 32 weights: positions `4u .. 4u + 3`
/// of the eight 32-weight quarters.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q2_k",
    ggml_type: Some(GgmlType::Q2_K),
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 32,
    gpu_row_words: |k| 20 * (k / 256) + (k / 256).div_ceil(4) * 4,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[80, 82]),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_q2_k.wgsl"),
    native: native_gemv!("q2_k"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (blocks, heads) = dst.split_at_mut(20 * nb);
    for (b, (blk, d)) in src.chunks_exact(BLOCK_BYTES).zip(blocks.chunks_exact_mut(20)).enumerate() {
        pack_words(&blk[..16], &mut d[..4]);
        crumb_words_gpu(&blk[16..80], &mut d[4..]);
        heads[b] = le32(blk, 80);
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
        b[80..82].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        b[82..84].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
        for s in 0..16 {
            b[s] = (s as u8) | ((15 - s as u8) << 4);
        }
        let codes: [u8; 256] = std::array::from_fn(|i| (i as u8).wrapping_mul(7).wrapping_add(i as u8 >> 5) % 4);
        for i in 0..256 {
            let (h, r) = (i / 128, i % 128);
            b[16 + 32 * h + r % 32] |= codes[i] << (2 * (r / 32));
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&b, &mut out);
        for i in 0..256 {
            let s = i / 16;
            assert_eq!(out[i], 0.5 * s as f32 * codes[i] as f32 - 0.25 * (15 - s) as f32, "{i}");
        }
    }

    #[test]
    fn validation_and_lengths() {
        crate::formats::weight::check_validation_and_lengths(&FORMAT, &[80, 82]);
    }
}
