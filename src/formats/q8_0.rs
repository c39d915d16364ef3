//! GGML Q8_0: 32 weights in a 34-byte block, `w = d * q` (f16 `d`, int8 `q`), computed in f32
//! (exact: an 11-bit by 8-bit product).
//!
//! GPU layout (per row, `nb = k / 32` blocks): the row's `k` code bytes first (`k / 4` words,
//! block after block), then the `nb` scales as f16 pairs (block 2i low), padded to a whole
//! vec4. An item is 16 weights: one vec4 of codes; its scale is half `item / 2` of the scale
//! area. The 34-byte blocks are thereby split into 16-byte-aligned parts, read once each.

use super::gguf::GgmlType;
use super::weight::{first_nonfinite_f16, le16, pack_bytes, random_f16_scale, WeightFormat};
use half::f16;

/// Weights per block.
pub const QK: usize = 32;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 34;

pub const FORMAT: WeightFormat = WeightFormat {
    name: "q8_0",
    ggml_type: Some(GgmlType::Q8_0),
    block_weights: QK,
    block_bytes: BLOCK_BYTES,
    item_weights: 16,
    gpu_row_words,
    relayout_row,
    dequantize,
    magnitudes,
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[0]),
    random_blocks,
    wgsl: include_str!("../../wgsl/fmt_q8_0.wgsl"),
    native: native_gemv!("q8_0"),
    native_gemm: Some(super::NativeGemm { msl: include_str!("../../msl/mm_gemm_quant.metal"), entry: "mm_gemm_q8_0" }),
    native_q8: Some(super::NativeGemv { msl: include_str!("../../msl/mm_gemv_q8.metal"), entries: native_gemv_entries!("mm_gemv_q8_q8_0") }),
};

fn gpu_row_words(k: usize) -> usize {
    k / 4 + (k / QK).div_ceil(8) * 4
}

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (codes, scales) = dst.split_at_mut(nb * QK / 4);
    let mut d = Vec::with_capacity(2 * nb);
    for (b, blk) in src.chunks_exact(BLOCK_BYTES).enumerate() {
        pack_bytes(&blk[2..], &mut codes[8 * b..8 * b + 8]);
        d.extend_from_slice(&blk[..2]);
    }
    pack_bytes(&d, scales);
}

fn dequantize(src: &[u8], out: &mut [f32]) {
    for (blk, o) in src.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(QK)) {
        let d = f16::from_bits(le16(blk, 0)).to_f32();
        for (v, &q) in o.iter_mut().zip(&blk[2..]) {
            *v = d * (q as i8) as f32;
        }
    }
}

fn magnitudes(src: &[u8], out: &mut [f64]) {
    for (blk, o) in src.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(QK)) {
        let d = f16::from_bits(le16(blk, 0)).to_f64().abs();
        for (v, &q) in o.iter_mut().zip(&blk[2..]) {
            *v = d * ((q as i8) as f64).abs();
        }
    }
}

fn random_blocks(rng: &mut fastrand::Rng, count: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(count * BLOCK_BYTES);
    for _ in 0..count {
        v.extend_from_slice(&random_f16_scale(rng).to_le_bytes());
        v.extend((0..QK).map(|_| rng.u8(..)));
    }
    v
}
