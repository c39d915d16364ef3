//! GGML Q6_K: 256 weights in a 210-byte block.
//!
//! Layout: `ql[128]`, `qh[64]`, `scales[16]` (i8), `d` (f16, last). Weight `i` (half
//! `h = i / 128`, `r = i % 128`) has low nibble `(ql[64 * h + r % 64] >> (4 * (r / 64))) & 15`
//! and high bits `(qh[32 * h + r % 32] >> (2 * (r / 32))) & 3`; code `q = (lo | hi << 4) - 32`
//! and weight = `(d * scales[i / 16]) * q`.
//!
//! `d * sc` (11 + 7 significand bits) times `q` (5 bits) is exact in f32: the dequantised value
//! has no rounding, in any product order.

use half::f16;

use super::FormatError;

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 210;

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// The signed code (-32..=31) of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> i32 {
    let (h, r) = (i / 128, i % 128);
    let lo = (b[64 * h + r % 64] >> (4 * (r / 64))) & 15;
    let hi = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
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

/// A random block with a finite `d`: mostly realistic positive values, sometimes zero,
/// negative or an f16 subnormal; random scales and codes.
pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
    let mut b = [0u8; BLOCK_BYTES];
    rng.fill(&mut b[..208]);
    let d = if rng.u32(0..16) == 0 { [0x0000, 0x8000, 0x0001, 0x03ff, 0x0200, 0x9400][rng.usize(0..6)] } else { f16::from_f32(1e-5 + rng.f32() * 1e-3).to_bits() };
    b[208..].copy_from_slice(&d.to_le_bytes());
    b
}

/// Checks that `bytes` is whole blocks with finite `d`. A non-finite one gives
/// [`FormatError::NonFinite`] with the index of the block's first weight.
pub fn validate(bytes: &[u8]) -> Result<(), FormatError> {
    if bytes.len() % BLOCK_BYTES != 0 {
        return Err(FormatError::NotBlockMultiple { what: "Q6_K data bytes", len: bytes.len() as u64, block: BLOCK_BYTES as u64 });
    }
    for (blk, b) in bytes.chunks_exact(BLOCK_BYTES).enumerate() {
        if !f16_at(b, 208).is_finite() {
            return Err(FormatError::NonFinite { index: blk * BLOCK_WEIGHTS });
        }
    }
    Ok(())
}

/// Dequantises whole blocks into `out` (`out.len()` = blocks * 256), after [`validate`].
pub fn dequantize(bytes: &[u8], out: &mut [f32]) -> Result<(), FormatError> {
    validate(bytes)?;
    let n = bytes.len() / BLOCK_BYTES;
    if out.len() != n * BLOCK_WEIGHTS {
        return Err(FormatError::NotBlockMultiple { what: "Q6_K output values", len: out.len() as u64, block: BLOCK_WEIGHTS as u64 });
    }
    for (b, o) in bytes.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(BLOCK_WEIGHTS)) {
        dequantize_block(b.try_into().expect("whole block"), o.try_into().expect("whole block"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices are layout positions
mod tests {
    use super::*;

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
        let mut rng = fastrand::Rng::with_seed(1);
        let mut bytes: Vec<u8> = (0..3).flat_map(|_| random_block(&mut rng)).collect();
        let mut out = vec![0f32; 3 * BLOCK_WEIGHTS];
        dequantize(&bytes, &mut out).unwrap();
        assert!(dequantize(&bytes, &mut out[1..]).is_err());
        assert!(matches!(validate(&bytes[..BLOCK_BYTES + 1]), Err(FormatError::NotBlockMultiple { .. })));
        bytes[BLOCK_BYTES + 209] = 0xfe; // block 1: d = NaN
        assert!(matches!(dequantize(&bytes, &mut out), Err(FormatError::NonFinite { index: 256 })));
    }

    #[test]
    fn magnitudes_bound_values() {
        let mut rng = fastrand::Rng::with_seed(2);
        for _ in 0..64 {
            let b = random_block(&mut rng);
            let (mut w, mut m) = ([0f32; BLOCK_WEIGHTS], [0f32; BLOCK_WEIGHTS]);
            dequantize_block(&b, &mut w);
            magnitudes_block(&b, &mut m);
            assert!(w.iter().zip(&m).all(|(w, m)| w.is_finite() && w.abs() <= *m));
        }
    }
}
