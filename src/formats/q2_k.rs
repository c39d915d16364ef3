//! GGML Q2_K: 256 weights in an 84-byte block.
//!
//! Layout: `scales[16]` (low nibble: scale, high nibble: min of sub-block `s`, 16 weights
//! each), `qs[64]`, `d` (f16), `dmin` (f16). Weight `i` (half `h = i / 128`, `r = i % 128`) has
//! the 2-bit code `(qs[32 * h + r % 32] >> (2 * (r / 32))) & 3`; weight =
//! `(d * sc) * q - dmin * m` with `sc`, `m` from `scales[i / 16]`.
//!
//! `d * sc * q` (11 + 4 + 2 significand bits) and `dmin * m` are exact in f32, so the
//! subtraction is the only rounding (a fused multiply-add gives the same bits).

use half::f16;

use super::FormatError;

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 84;

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// The 2-bit code of weight `i` of a block.
#[inline]
fn code(b: &[u8; BLOCK_BYTES], i: usize) -> u8 {
    let (h, r) = (i / 128, i % 128);
    (b[16 + 32 * h + r % 32] >> (2 * (r / 32))) & 3
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

/// A random block with finite `d` and `dmin`: mostly realistic positive values, sometimes
/// zero, negative or an f16 subnormal; random scales and codes.
pub fn random_block(rng: &mut fastrand::Rng) -> [u8; BLOCK_BYTES] {
    let mut b = [0u8; BLOCK_BYTES];
    rng.fill(&mut b[..80]);
    b[80..82].copy_from_slice(&random_f16(rng, 2e-2).to_le_bytes());
    b[82..84].copy_from_slice(&random_f16(rng, 2e-2).to_le_bytes());
    b
}

/// Random finite f16 bits: 1 in 16 zero (either sign), subnormal or negative, else in
/// 1e-5..`max`.
fn random_f16(rng: &mut fastrand::Rng, max: f32) -> u16 {
    if rng.u32(0..16) == 0 {
        return [0x0000, 0x8000, 0x0001, 0x03ff, 0x0200, 0x9400][rng.usize(0..6)];
    }
    f16::from_f32(1e-5 + rng.f32() * max).to_bits()
}

/// Checks that `bytes` is whole blocks with finite `d` and `dmin`. A non-finite one gives
/// [`FormatError::NonFinite`] with the index of the block's first weight.
pub fn validate(bytes: &[u8]) -> Result<(), FormatError> {
    if bytes.len() % BLOCK_BYTES != 0 {
        return Err(FormatError::NotBlockMultiple { what: "Q2_K data bytes", len: bytes.len() as u64, block: BLOCK_BYTES as u64 });
    }
    for (blk, b) in bytes.chunks_exact(BLOCK_BYTES).enumerate() {
        if !(f16_at(b, 80).is_finite() && f16_at(b, 82).is_finite()) {
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
        return Err(FormatError::NotBlockMultiple { what: "Q2_K output values", len: out.len() as u64, block: BLOCK_WEIGHTS as u64 });
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
        let mut rng = fastrand::Rng::with_seed(1);
        let mut bytes: Vec<u8> = (0..3).flat_map(|_| random_block(&mut rng)).collect();
        let mut out = vec![0f32; 3 * BLOCK_WEIGHTS];
        dequantize(&bytes, &mut out).unwrap();
        assert!(dequantize(&bytes, &mut out[1..]).is_err());
        assert!(matches!(validate(&bytes[..BLOCK_BYTES * 2 + 1]), Err(FormatError::NotBlockMultiple { .. })));
        bytes[83] = 0x7c; // block 0: dmin = +inf
        assert!(matches!(dequantize(&bytes, &mut out), Err(FormatError::NonFinite { index: 0 })));
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
