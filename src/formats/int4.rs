//! INT4: this library's symmetric 4-bit group format as a weight-matrix format (no GGUF type).
//!
//! Block of 32 weights, 20 bytes: `d` (f32, little-endian), then 16 bytes of codes; byte `i`
//! holds weight `2i` in its low nibble and weight `2i + 1` in its high nibble, each a
//! two's-complement nibble `q` in -8..=7. Weight = `d * q`, one f32 multiplication.
//!
//! This is the signed, zero-less case of the INT4 family ([`crate::kernels::int4`]) with groups
//! of 32: the same nibble order (even column low) and code convention, and its f32 group scale
//! unchanged, so `HostInt4::to_int4_blocks` converts a matrix of that family into these blocks
//! losslessly and the dequantised values equal the family's `(q - 0) * scale`, rounded once to
//! f32. (A group size that is a multiple of 32 is split into blocks that repeat its scale.)
//!
//! A block is invalid when `d` is NaN, infinite or an f32 subnormal (reported as
//! [`FormatError::NonFiniteScale`](super::FormatError::NonFiniteScale)): a GPU may flush
//! subnormal operands, which would break the bit-exact GPU dequantiser. With a normal or zero
//! `d`, `d * q` is never subnormal.
//!
//! GPU layout (per row, `nb = k / 32` blocks): `nb` vec4s of code bytes (block `b`: vec4 `b`),
//! then the `nb` scales as f32 words (block `b`: word `b`), padded to a whole vec4. An item is
//! one block.

use super::weight::{dequantize_blocks, le32, magnitudes_blocks, pack_words, WeightFormat};

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 32;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 20;

/// The f32 scale of a block (its first 4 bytes; also INT8's).
#[inline]
pub(crate) fn scale(b: &[u8]) -> f32 {
    f32::from_bits(le32(b, 0))
}

/// Whether `d` is a valid block scale: finite and normal or zero.
#[inline]
pub fn valid_scale(d: f32) -> bool {
    d.is_finite() && (d == 0.0 || d.is_normal())
}

/// The signed code (-8..=7) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> i32 {
    let nib = (b[4 + i / 2] >> (4 * (i % 2))) & 15;
    i32::from(nib ^ 8) - 8
}

/// One block from its scale and its 16 code bytes (the INT4 family's byte layout).
pub fn block(d: f32, codes: &[u8; 16]) -> [u8; BLOCK_BYTES] {
    let mut b = [0u8; BLOCK_BYTES];
    b[..4].copy_from_slice(&d.to_le_bytes());
    b[4..].copy_from_slice(codes);
    b
}

/// Dequantises one block: `d * q` in f32.
pub fn dequantize_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = scale(b);
    *out = std::array::from_fn(|i| d * code(b, i) as f32);
}

/// Per weight, `|d * q|` (the only operand; the value is one rounding of it).
pub fn magnitudes_block(b: &[u8; BLOCK_BYTES], out: &mut [f32; BLOCK_WEIGHTS]) {
    let d = scale(b).abs();
    *out = std::array::from_fn(|i| d * code(b, i).unsigned_abs() as f32);
}

/// A random valid f32 scale: mostly in ±(1e-4..5e-2), sometimes zero (either sign) or a
/// normal value of exponent 2^-87 .. 2^72.
pub(crate) fn random_scale(rng: &mut fastrand::Rng) -> f32 {
    match rng.u32(0..16) {
        0 => [0.0, -0.0][rng.usize(0..2)],
        // Any sign and mantissa, exponents 2^-87 .. 2^72: products with codes and activations
        // stay normal f32 (GPUs may flush subnormal results to zero, e.g. NVIDIA under Vulkan).
        1 => f32::from_bits((rng.u32(..) & 0x807f_ffff) | (rng.u32(40..200) << 23)),
        _ => {
            let v = 1e-4 + rng.f32() * 5e-2;
            if rng.bool() {
                -v
            } else {
                v
            }
        }
    }
}

crate::testkit_pub! {
    /// A random valid block: a random valid scale, random codes.
    pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
        let mut codes = [0u8; 16];
        rng.fill(&mut codes);
        block(random_scale(rng), &codes)
    }
}

pub const FORMAT: WeightFormat = WeightFormat {
    name: "int4",
    ggml_type: None,
    block_weights: BLOCK_WEIGHTS,
    block_bytes: BLOCK_BYTES,
    item_weights: 32,
    gpu_row_words: |k| 4 * (k / 32) + (k / 32).div_ceil(4) * 4,
    relayout_row,
    dequantize: |src, out| dequantize_blocks(src, out, dequantize_block),
    magnitudes: |src, out| magnitudes_blocks(src, out, magnitudes_block),
    first_invalid_block: |src| src.chunks_exact(BLOCK_BYTES).position(|b| !valid_scale(scale(b))),
    random_blocks: |rng, count| (0..count).flat_map(|_| random_block(rng)).collect(),
    wgsl: include_str!("../../wgsl/fmt_int4.wgsl"),
    native: native_gemv!("int4"),
    native_gemm: None,
    native_q8: None,
};

fn relayout_row(src: &[u8], dst: &mut [u32]) {
    let nb = src.len() / BLOCK_BYTES;
    let (codes, scales) = dst.split_at_mut(4 * nb);
    for (b, blk) in src.chunks_exact(BLOCK_BYTES).enumerate() {
        pack_words(&blk[4..], &mut codes[4 * b..4 * b + 4]);
        scales[b] = scale(blk).to_bits();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block() {
        let mut codes = [0u8; 16];
        for (i, c) in codes.iter_mut().enumerate() {
            *c = (i as u8) | ((15 - i as u8) << 4);
        }
        let mut out = [0f32; BLOCK_WEIGHTS];
        dequantize_block(&block(-0.375, &codes), &mut out);
        let q = |n: u8| if n >= 8 { n as f32 - 16.0 } else { n as f32 };
        for i in 0..16u8 {
            assert_eq!(out[2 * i as usize], -0.375 * q(i));
            assert_eq!(out[2 * i as usize + 1], -0.375 * q(15 - i));
        }
    }

    #[test]
    fn validation_and_lengths() {
        let bad = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::from_bits(1), -f32::MIN_POSITIVE / 2.0];
        crate::formats::weight::check_invalid_scales(&FORMAT, &bad.map(|v| (0, v.to_le_bytes())));
    }
}
