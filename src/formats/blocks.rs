//! CPU helpers that several block formats share: where their codes sit in a block, the word
//! orders of their GPU layouts, and the random scales of their test blocks. Each helper states
//! the layout it reads; a format module uses it only where its layout is that one.

use half::f16;

use super::weight::le32;

/// Bits 0..4 of the code of weight `i` (0..32) of a 32-weight block whose 16 nibble bytes start
/// at byte `at`: byte `at + i % 16`, low nibble for `i < 16`, high nibble for `i >= 16` (Q4_0,
/// Q4_1, Q5_0, Q5_1).
#[inline]
pub(crate) fn nibble32(b: &[u8], at: usize, i: usize) -> u8 {
    let byte = b[at + i % 16];
    if i < 16 {
        byte & 15
    } else {
        byte >> 4
    }
}

/// Bit 4 of the code of weight `i` (0..32): bit `i` of the little-endian u32 at byte `at` (the
/// `qh` of Q5_0, Q5_1).
#[inline]
pub(crate) fn bit32(b: &[u8], at: usize, i: usize) -> u8 {
    ((le32(b, at) >> i) & 1) as u8
}

/// The 2-bit field of weight `i` (0..256) in a 64-byte array at byte `at` that holds each
/// 128-weight half `h = i / 128` in 32 bytes: byte `at + 32h + r % 32`, bits `2 (r / 32)`, with
/// `r = i % 128` (Q2_K and Q3_K `qs`, Q6_K `qh`).
#[inline]
pub(crate) fn crumb(b: &[u8], at: usize, i: usize) -> u8 {
    let (h, r) = (i / 128, i % 128);
    (b[at + 32 * h + r % 32] >> (2 * (r / 32))) & 3
}

/// GPU order of a 64-byte array of 2-bit fields laid out as [`crumb`] reads them: GPU word
/// `4v + c` (`dst`, 16 words) = source word `2v + c / 2 + 8 (c % 2)` (`src`, 64 bytes), so vec4
/// `v` holds words `2v, 8 + 2v, 2v + 1, 9 + 2v`: bytes `8v .. 8v + 7` of both halves' 32 bytes
/// (Q2_K and Q3_K `qs`, Q6_K `qh`).
pub(crate) fn crumb_words_gpu(src: &[u8], dst: &mut [u32]) {
    for (gw, w) in dst[..16].iter_mut().enumerate() {
        *w = le32(src, 4 * (2 * (gw / 4) + (gw % 4) / 2 + 8 * (gw % 2)));
    }
}

/// GPU order of a 128-byte nibble array: the 4 x 8 matrix of its 32 words transposed, GPU word
/// `4u + c` (`dst`, 32 words) = source word `8c + u` (`src`, 128 bytes), so vec4 `u` holds word
/// `u` of each 32-byte quarter of `src` (Q4_K and Q5_K `qs`, Q6_K `ql`).
pub(crate) fn nibble_words_gpu(src: &[u8], dst: &mut [u32]) {
    for (gw, w) in dst[..32].iter_mut().enumerate() {
        *w = le32(src, 4 * (8 * (gw % 4) + gw / 4));
    }
}

/// A random Q4_0 or Q5_0 block of `B` bytes: a finite f16 scale `d` at byte 0 (mostly a
/// realistic positive or negative scale, sometimes zero or an f16 subnormal), random bytes after.
pub(crate) fn random_block_d<const B: usize>(rng: &mut fastrand::Rng) -> [u8; B] {
    let mut b = [0u8; B];
    b[0..2].copy_from_slice(&random_scale32(rng, 5e-2, true).to_le_bytes());
    rng.fill(&mut b[2..]);
    b
}

/// A random Q4_1 or Q5_1 block of `B` bytes: finite f16 `d` at byte 0 and `m` at byte 2, mostly
/// realistic (`d` > 0, `m` of either sign), sometimes zero or f16 subnormals; random bytes after.
pub(crate) fn random_block_dm<const B: usize>(rng: &mut fastrand::Rng) -> [u8; B] {
    let mut b = [0u8; B];
    b[0..2].copy_from_slice(&random_scale32(rng, 5e-2, false).to_le_bytes());
    b[2..4].copy_from_slice(&random_scale32(rng, 0.5, true).to_le_bytes());
    rng.fill(&mut b[4..]);
    b
}

/// Random finite f16 bits for the scales of Q4_0, Q4_1, Q5_0 and Q5_1 test blocks: 1 in 16 zero
/// (either sign) or subnormal, else in 1e-4..`max` (negative half of the time when `signed`).
fn random_scale32(rng: &mut fastrand::Rng, max: f32, signed: bool) -> u16 {
    if rng.u32(0..16) == 0 {
        return [0x0000, 0x8000, 0x0001, 0x03ff, 0x0200][rng.usize(0..5)];
    }
    let v = f16::from_f32(1e-4 + rng.f32() * max).to_bits();
    if signed && rng.bool() {
        v | 0x8000
    } else {
        v
    }
}

/// Random finite f16 bits for the super-block scales of K-quant test blocks: 1 in 16 zero
/// (either sign), subnormal or negative, else in 1e-5..`max`.
pub(crate) fn random_scale256(rng: &mut fastrand::Rng, max: f32) -> u16 {
    if rng.u32(0..16) == 0 {
        return [0x0000, 0x8000, 0x0001, 0x03ff, 0x0200, 0x9400][rng.usize(0..6)];
    }
    f16::from_f32(1e-5 + rng.f32() * max).to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source word `w` holds the value `w`: the GPU orders as their docs state them.
    #[test]
    fn gpu_word_orders() {
        let src: Vec<u8> = (0..32u32).flat_map(|w| w.to_le_bytes()).collect();
        let (mut crumbs, mut nibbles) = ([0u32; 16], [0u32; 32]);
        crumb_words_gpu(&src, &mut crumbs);
        nibble_words_gpu(&src, &mut nibbles);
        assert_eq!(crumbs, [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]);
        assert_eq!(nibbles[..12], [0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26]);
        assert_eq!(nibbles[28..], [7, 15, 23, 31]);
    }
}
