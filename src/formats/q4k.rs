//! GGML Q4_K: 256 weights in a 144-byte block (DESIGN.md, "GGML Q4_K").
//!
//! Sub-block `j` (32 weights) decodes as `w = (d * sc_j) * q - dmin * m_j` in f32, as llama.cpp
//! and gguf-py do. With `d`, `dmin` f16 (11-bit significands), `sc`, `m` 6-bit and `q` 4-bit,
//! every product is exact in f32, so the final subtraction is the only rounding: any product
//! order, or a fused multiply-add, gives the same bits (a different grouping of the subtraction
//! would not).

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::blocks::nibble_words_gpu;
use super::gguf::GgmlType;
use super::weight::{first_nonfinite_f16, pack_words, random_f16_scale, WeightFormat};
use super::FormatError;

/// The Q4_K weight format of the matmul family.
///
/// GPU layout (per block, 9 vec4 = 144 bytes, blocks of a row contiguous): vec4 0 = the head
/// (bytes 0..16: f16 d | f16 dmin << 16, then the 12 scale bytes); vec4s 1..8 = the 128 nibble
/// bytes with the 4 x 8 matrix of nibble words transposed: component `pp` of vec4 `1 + wi` is
/// nibble word `8pp + wi`, positions `4wi .. 4wi + 3` of sub-blocks `2pp` (low nibbles) and
/// `2pp + 1` (high). An item is a quad (64 weights): quad `u` of a block = its head and vec4s
/// `1 + u` and `5 + u` (positions `4u..4u+3` and `4u+16..4u+19` of all eight sub-blocks), so
/// lanes on consecutive quads load consecutive vec4s of weights and of x.
pub const FORMAT: WeightFormat = WeightFormat {
    name: "q4_k",
    ggml_type: Some(GgmlType::Q4_K),
    block_weights: QK_K,
    block_bytes: BLOCK_BYTES,
    item_weights: 64,
    gpu_row_words: |k| k / QK_K * 36,
    relayout_row,
    dequantize: |src, out| {
        for (c, o) in src.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(QK_K)) {
            dequantize_block(&BlockQ4K::from_le_bytes(c.try_into().expect("144 bytes")), o.try_into().expect("256 values"));
        }
    },
    magnitudes,
    first_invalid_block: |src| first_nonfinite_f16(src, BLOCK_BYTES, &[0, 2]),
    random_blocks,
    wgsl: include_str!("../../wgsl/fmt_q4_k.wgsl"),
    native: native_gemv!("q4_k"),
    native_gemm: Some(super::NativeGemm { msl: include_str!("../../msl/mm_gemm_quant.metal"), entry: "mm_gemm_q4_k" }),
    native_q8: Some(super::NativeGemv { msl: include_str!("../../msl/mm_gemv_q8.metal"), entries: native_gemv_entries!("mm_gemv_q8_q4_k") }),
};

/// GPU word `gw` (0..32) of a block's nibble area holds GGUF nibble word `8 * (gw % 4) + gw / 4`.
fn relayout_row(src: &[u8], dst: &mut [u32]) {
    for (blk, d) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(36)) {
        pack_words(&blk[..16], &mut d[..4]);
        nibble_words_gpu(&blk[16..], &mut d[4..]);
    }
}

/// `|d*sc*q| + |dmin*m|` per weight: the operands of the final f32 subtraction.
fn magnitudes(src: &[u8], out: &mut [f64]) {
    for (c, o) in src.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(QK_K)) {
        let b = BlockQ4K::from_le_bytes(c.try_into().expect("144 bytes"));
        let d = f16::from_bits(b.d).to_f64().abs();
        let dmin = f16::from_bits(b.dmin).to_f64().abs();
        for j in 0..8 {
            let (sc, m) = get_scale_min(j, &b.scales);
            for i in 0..32 {
                let q = (b.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15;
                o[32 * j + i] = d * sc as f64 * q as f64 + dmin * m as f64;
            }
        }
    }
}

/// Random valid blocks: finite f16 d/dmin, random 6-bit scales/mins and nibbles.
fn random_blocks(rng: &mut fastrand::Rng, count: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(count * BLOCK_BYTES);
    for _ in 0..count {
        let sc: [u8; 8] = std::array::from_fn(|_| rng.u8(0..64));
        let m: [u8; 8] = std::array::from_fn(|_| rng.u8(0..64));
        v.extend_from_slice(&random_f16_scale(rng).to_le_bytes());
        v.extend_from_slice(&random_f16_scale(rng).to_le_bytes());
        v.extend_from_slice(&pack_scale_min(&sc, &m));
        v.extend((0..128).map(|_| rng.u8(..)));
    }
    v
}

/// Weights per block.
pub const QK_K: usize = 256;
/// Bytes per block.
pub const BLOCK_BYTES: usize = 144;

/// One Q4_K block, byte-identical to ggml's `block_q4_K` on little-endian hosts.
#[repr(C)]
#[derive(Pod, Zeroable, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ4K {
    /// Super-block scale for the sub-block scales (f16 bits).
    pub d: u16,
    /// Super-block scale for the sub-block mins (f16 bits).
    pub dmin: u16,
    /// Eight 6-bit scales and eight 6-bit mins, packed (see [`get_scale_min`]).
    pub scales: [u8; 12],
    /// 4-bit quants: `qs[32*(j/2) + i]` holds sub-block `j`, low nibble for even `j`.
    pub qs: [u8; 128],
}

const _: () = assert!(std::mem::size_of::<BlockQ4K>() == BLOCK_BYTES);

/// The 6-bit scale and min of sub-block `j` (0..8).
///
/// j < 4: `sc = s[j] & 63`, `m = s[j+4] & 63`;
/// j >= 4: `sc = (s[j+4] & 15) | ((s[j-4] >> 6) << 4)`, `m = (s[j+4] >> 4) | ((s[j] >> 6) << 4)`.
#[inline]
pub fn get_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// Packs eight 6-bit scales and mins (values above 63 are masked); inverse of [`get_scale_min`].
pub fn pack_scale_min(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4);
    }
    s
}

impl BlockQ4K {
    /// Reads a block from 144 little-endian bytes (no alignment needed).
    pub fn from_le_bytes(b: &[u8; BLOCK_BYTES]) -> Self {
        let mut blk = BlockQ4K::zeroed();
        blk.d = u16::from_le_bytes([b[0], b[1]]);
        blk.dmin = u16::from_le_bytes([b[2], b[3]]);
        blk.scales.copy_from_slice(&b[4..16]);
        blk.qs.copy_from_slice(&b[16..]);
        blk
    }

    /// The block as 144 little-endian bytes (the GGUF on-disk layout).
    pub fn to_le_bytes(&self) -> [u8; BLOCK_BYTES] {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..4].copy_from_slice(&self.dmin.to_le_bytes());
        b[4..16].copy_from_slice(&self.scales);
        b[16..].copy_from_slice(&self.qs);
        b
    }
}

/// Parses raw tensor bytes (e.g. from a GGUF file) into blocks; the length must be a multiple
/// of 144.
pub fn blocks_from_bytes(bytes: &[u8]) -> Result<Vec<BlockQ4K>, FormatError> {
    if bytes.len() % BLOCK_BYTES != 0 {
        return Err(FormatError::NotBlockMultiple { what: "Q4_K data bytes", len: bytes.len() as u64, block: BLOCK_BYTES as u64 });
    }
    Ok(bytes.chunks_exact(BLOCK_BYTES).map(|c| BlockQ4K::from_le_bytes(c.try_into().expect("chunk is 144 bytes"))).collect())
}

/// Serialises blocks to their on-disk bytes.
pub fn blocks_to_bytes(blocks: &[BlockQ4K]) -> Vec<u8> {
    blocks.iter().flat_map(|b| b.to_le_bytes()).collect()
}

/// Dequantises one block into `out`, bit-exactly as llama.cpp / gguf-py.
pub fn dequantize_block(b: &BlockQ4K, out: &mut [f32; QK_K]) {
    let d = f16::from_bits(b.d).to_f32();
    let dmin = f16::from_bits(b.dmin).to_f32();
    for j in 0..8 {
        let (sc, m) = get_scale_min(j, &b.scales);
        let d1 = d * sc as f32;
        let m1 = dmin * m as f32;
        let shift = 4 * (j % 2);
        let qs = &b.qs[32 * (j / 2)..32 * (j / 2) + 32];
        let dst = &mut out[32 * j..32 * j + 32];
        for (o, &q) in dst.iter_mut().zip(qs) {
            *o = d1 * ((q >> shift) & 15) as f32 - m1;
        }
    }
}

/// Dequantises a row of blocks (256 values per block).
pub fn dequantize_row(blocks: &[BlockQ4K]) -> Vec<f32> {
    let mut out = vec![0f32; blocks.len() * QK_K];
    for (b, chunk) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        dequantize_block(b, chunk.try_into().expect("chunk is 256 values"));
    }
    out
}

/// Quantises `x` to Q4_K. `x.len()` must be a multiple of 256 and all values finite.
///
/// Each 32-weight sub-block gets a scale and min from a small weighted least-squares search
/// (the idea of llama.cpp's `make_qkx2_quants`); these are then coded as 6-bit multiples of
/// the block's f16 `d` and `dmin`, and the nibbles are re-fitted to the coded values.
pub fn quantize_row(x: &[f32]) -> Result<Vec<BlockQ4K>, FormatError> {
    if x.len() % QK_K != 0 {
        return Err(FormatError::NotBlockMultiple { what: "Q4_K row", len: x.len() as u64, block: QK_K as u64 });
    }
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        return Err(FormatError::NonFinite { index });
    }
    Ok(x.chunks_exact(QK_K).map(quantize_block).collect())
}

fn quantize_block(x: &[f32]) -> BlockQ4K {
    let mut scale = [0f32; 8];
    let mut min = [0f32; 8];
    for j in 0..8 {
        (scale[j], min[j]) = fit_sub_block(&x[32 * j..32 * j + 32]);
    }
    let (d, sc) = code_6bit(&scale);
    let (dmin, m) = code_6bit(&min);
    let mut blk = BlockQ4K::zeroed();
    blk.d = d.to_bits();
    blk.dmin = dmin.to_bits();
    blk.scales = pack_scale_min(&sc, &m);
    for j in 0..8 {
        let d1 = d.to_f32() * sc[j] as f32;
        let m1 = dmin.to_f32() * m[j] as f32;
        let shift = 4 * (j % 2);
        for i in 0..32 {
            let q = if d1 > 0.0 { ((x[32 * j + i] + m1) / d1).round().clamp(0.0, 15.0) as u8 } else { 0 };
            blk.qs[32 * (j / 2) + i] |= q << shift;
        }
    }
    blk
}

/// Codes eight non-negative values as `f16 super-scale * 6-bit integer`.
fn code_6bit(v: &[f32; 8]) -> (f16, [u8; 8]) {
    let max = v.iter().copied().fold(0f32, f32::max);
    let sup = f16::from_f32(max / 63.0);
    let supf = sup.to_f32();
    let mut q = [0u8; 8];
    if supf > 0.0 && supf.is_finite() {
        for (qi, &vi) in q.iter_mut().zip(v) {
            *qi = (vi / supf).round().clamp(0.0, 63.0) as u8;
        }
    }
    (sup, q)
}

/// Fits `x ≈ s * q - m` with `q` in 0..=15, `s >= 0`, `m >= 0`; returns `(s, m)`.
///
/// Weighted least squares (weight `rms(x) + |x_i|`, favouring large weights) over a sweep of
/// candidate quantisation grids; the grid with the smallest weighted error wins.
fn fit_sub_block(x: &[f32]) -> (f32, f32) {
    let n = x.len() as f32;
    let lo = x.iter().copied().fold(f32::INFINITY, f32::min).min(0.0);
    let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if hi <= lo {
        return (0.0, -lo);
    }
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / n).sqrt();
    let w: Vec<f32> = x.iter().map(|v| rms + v.abs()).collect();
    let err_of = |s: f32, b: f32, q: &[f32]| -> f32 { x.iter().zip(q).zip(&w).map(|((xi, qi), wi)| wi * (s * qi + b - xi).powi(2)).sum() };
    let mut q = [0f32; 32];
    let grid = |iscale: f32, q: &mut [f32; 32]| {
        for (qi, xi) in q.iter_mut().zip(x) {
            *qi = (iscale * (xi - lo)).round().clamp(0.0, 15.0);
        }
    };
    // Start from the plain min/max grid.
    let (mut best_s, mut best_b) = ((hi - lo) / 15.0, lo);
    grid(15.0 / (hi - lo), &mut q);
    let mut best_err = err_of(best_s, best_b, &q);
    for step in 0..=20 {
        grid((14.0 + 0.1 * step as f32) / (hi - lo), &mut q);
        let (mut sw, mut sq, mut sqq, mut sx, mut sqx) = (0f32, 0f32, 0f32, 0f32, 0f32);
        for ((&xi, &qi), &wi) in x.iter().zip(&q).zip(&w) {
            sw += wi;
            sq += wi * qi;
            sqq += wi * qi * qi;
            sx += wi * xi;
            sqx += wi * qi * xi;
        }
        let det = sw * sqq - sq * sq;
        if det <= 0.0 {
            continue;
        }
        let mut s = (sw * sqx - sq * sx) / det;
        let mut b = (sqq * sx - sq * sqx) / det;
        if b > 0.0 {
            // The offset may only shift values down (m >= 0).
            b = 0.0;
            s = sqx / sqq;
        }
        if s < 0.0 {
            continue;
        }
        let err = err_of(s, b, &q);
        if err < best_err {
            (best_s, best_b, best_err) = (s, b, err);
        }
    }
    (best_s, -best_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic standard normals (xorshift64* + Box-Muller).
    pub(crate) fn gaussian(n: usize, mut seed: u64) -> Vec<f32> {
        let mut next = move || {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            ((seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| {
                let (u, v) = (next(), next());
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            })
            .collect()
    }

    #[test]
    fn scale_min_pack_roundtrip() {
        for t in 0..64u8 {
            let sc: [u8; 8] = std::array::from_fn(|j| (t + 7 * j as u8) & 63);
            let m: [u8; 8] = std::array::from_fn(|j| (t.wrapping_mul(3).wrapping_add(11 * j as u8)) & 63);
            let s = pack_scale_min(&sc, &m);
            for j in 0..8 {
                assert_eq!(get_scale_min(j, &s), (sc[j], m[j]));
            }
        }
    }

    #[test]
    fn bytes_roundtrip_and_layout() {
        let mut b = BlockQ4K::zeroed();
        b.d = 0x3c00;
        b.dmin = 0x1234;
        b.scales[0] = 7;
        b.qs[127] = 0xab;
        let bytes = b.to_le_bytes();
        assert_eq!(&bytes[..4], &[0x00, 0x3c, 0x34, 0x12]);
        assert_eq!(bytes[4], 7);
        assert_eq!(bytes[143], 0xab);
        assert_eq!(BlockQ4K::from_le_bytes(&bytes), b);
        assert_eq!(blocks_from_bytes(&bytes).unwrap(), vec![b]);
        assert!(blocks_from_bytes(&bytes[..143]).is_err());
    }

    #[test]
    fn dequant_known_block() {
        let mut b = BlockQ4K::zeroed();
        b.d = f16::from_f32(0.5).to_bits();
        b.dmin = f16::from_f32(0.25).to_bits();
        let sc = [1, 2, 3, 4, 40, 50, 60, 63];
        let m = [0, 1, 2, 3, 33, 44, 55, 63];
        b.scales = pack_scale_min(&sc, &m);
        for (i, q) in b.qs.iter_mut().enumerate() {
            *q = (i as u8 % 16) | ((15 - i as u8 % 16) << 4);
        }
        let mut out = [0f32; QK_K];
        dequantize_block(&b, &mut out);
        for j in 0..8 {
            for i in 0..32 {
                let q = if j % 2 == 0 { i % 16 } else { 15 - i % 16 } as f32;
                let want = 0.5 * sc[j] as f32 * q - 0.25 * m[j] as f32;
                assert_eq!(out[32 * j + i], want, "j={j} i={i}");
            }
        }
    }

    #[test]
    fn quantize_rejects_bad_input() {
        assert!(matches!(quantize_row(&[0.0; 255]), Err(FormatError::NotBlockMultiple { len: 255, .. })));
        let mut x = vec![0.0; 256];
        x[9] = f32::NAN;
        assert!(matches!(quantize_row(&x), Err(FormatError::NonFinite { index: 9 })));
        assert!(quantize_row(&[]).unwrap().is_empty());
    }

    #[test]
    fn quantize_edge_rows() {
        for x in [vec![0.0f32; 256], vec![3.5; 256], vec![-2.0; 256]] {
            let y = dequantize_row(&quantize_row(&x).unwrap());
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() <= 0.02 * a.abs().max(1e-6), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn quantize_rmse_gaussian() {
        let x = gaussian(256 * 64, 0x5eed);
        let y = dequantize_row(&quantize_row(&x).unwrap());
        let mse: f64 = x.iter().zip(&y).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>() / x.len() as f64;
        let var: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum::<f64>() / x.len() as f64;
        let rel = (mse / var).sqrt();
        println!("Q4_K relative RMSE on N(0,1) weights: {rel:.4}");
        assert!(rel < 0.1, "relative RMSE {rel}");
    }
}
