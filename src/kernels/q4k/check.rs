//! The Q4_K case the Native self-check runs ([`crate::native`]): the GEMV against its f64
//! reference. Built in every build; the test grid (`cases`, `testkit` feature) reuses it.

use super::*;
use crate::formats::q4k::{dequantize_row, pack_scale_min};
use crate::reference;
use crate::suite::{guarded_f32, Case, MatmulPrepared, MatmulWeights, Prepared, Rng};

/// The self-check cases: one per Native entry point (`q4k_gemv_r2` below 2048 rows, `q4k_gemv_r4`
/// from 2048).
pub(crate) fn gemv_checks() -> Vec<Box<dyn Case>> {
    vec![Box::new(MatCase { m: 1, n: 33, k: 512 }), Box::new(MatCase { m: 1, n: 2048, k: 256 })]
}

/// A random finite f16: mostly a realistic positive scale, sometimes any finite value
/// (negative, subnormal, zero, large).
fn random_f16(rng: &mut Rng) -> u16 {
    if rng.u32(8) != 0 {
        return half::f16::from_f32(rng.uniform(1e-4, 5e-2)).to_bits();
    }
    let b = rng.u32(1 << 16) as u16;
    if b & 0x7c00 == 0x7c00 {
        b & 0x83ff // inf/NaN -> same mantissa, exponent 0 (a subnormal)
    } else {
        b
    }
}

/// `count` random valid Q4_K blocks: finite f16 d/dmin, random 6-bit scales/mins and nibbles.
pub fn random_blocks(rng: &mut Rng, count: usize) -> Vec<BlockQ4K> {
    let bytes = rng.bytes(count * BLOCK_BYTES);
    bytes
        .chunks_exact(BLOCK_BYTES)
        .map(|c| {
            let mut b = BlockQ4K::from_le_bytes(c.try_into().expect("144 bytes"));
            b.d = random_f16(rng);
            b.dmin = random_f16(rng);
            let sc: [u8; 8] = std::array::from_fn(|_| rng.u32(64) as u8);
            let m: [u8; 8] = std::array::from_fn(|_| rng.u32(64) as u8);
            b.scales = pack_scale_min(&sc, &m);
            b
        })
        .collect()
}

/// Exact weights (as gguf-py computes them) and operand magnitudes of row-major blocks.
fn host_values(blocks: &[BlockQ4K]) -> (Vec<f64>, Vec<f64>) {
    (dequantize_row(blocks).into_iter().map(f64::from).collect(), operand_magnitudes(blocks))
}

#[cfg(feature = "testkit")]
pub(super) fn weight_bytes(n: usize, k: usize) -> u64 {
    (n * k / QK_K * BLOCK_BYTES) as u64
}

pub(super) struct MatCase {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
}

impl MatCase {
    fn name(&self) -> String {
        if self.m == 1 {
            format!("n={} k={}", self.n, self.k)
        } else {
            format!("m={} n={} k={}", self.m, self.n, self.k)
        }
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        weight_bytes(self.n, self.k) + 4 * (self.m * (self.k + self.n)) as u64
    }
}

impl MatmulWeights for Q4kMatrix {
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        matmul(b, self, x, y, m)
    }
}

fn setup_mat(c: &MatCase, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
    let (m, n, k) = (c.m, c.n, c.k);
    let blocks = random_blocks(rng, n * k / QK_K);
    let x = rng.uniform_vec(m * k, -1.0, 1.0);
    let (w, mag) = host_values(&blocks);
    let (wv, mv) = (|r: usize, c: usize| w[r * k + c], |r: usize, c: usize| mag[r * k + c]);
    let reference = if m == 1 { reference::gemv(n, k, wv, mv, &x) } else { reference::gemm(m, n, k, wv, mv, &x) };
    let mut weights = vec![Q4kMatrix::upload(ctx, n, k, &blocks)?];
    for _ in 1..copies {
        weights.push(Q4kMatrix::upload(ctx, n, k, &random_blocks(rng, n * k / QK_K))?);
    }
    Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, m * n)?, m, reference, tol: 1e-5 }))
}

impl Case for MatCase {
    fn name(&self) -> String {
        MatCase::name(self)
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        MatCase::bytes(self)
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        setup_mat(self, ctx, rng, copies)
    }
}
