//! The cases the Native self-check ([`crate::native`]) runs for the family's Native GEMVs: one
//! per MSL entry point (2 rows per threadgroup below 2048 rows, 4 from there), f32 activations,
//! the format's random valid blocks, against the f64 reference. Built in every build.

use super::*;
use crate::reference;
use crate::suite::{guarded_f32, Case, MatmulPrepared, MatmulWeights, Prepared, Rng};

/// The self-check cases of `mm_gemv_<format>` where the format has an MSL GEMV.
pub(crate) fn gemv_checks(kernel: &str) -> Option<Vec<Box<dyn Case>>> {
    let f = FORMATS.iter().copied().find(|f| f.native.is_some() && kernel_infos(f).gemv.name == kernel)?;
    let k = (256 / f.block_weights).max(1) * f.block_weights;
    Some(vec![Box::new(GemvCheck { format: f, n: 33, k }), Box::new(GemvCheck { format: f, n: 2049, k })])
}

pub(crate) struct GemvCheck {
    pub(crate) format: &'static WeightFormat,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

impl MatmulWeights for WeightMatrix {
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        matmul(b, self, x, y, m)
    }
}

impl Case for GemvCheck {
    fn name(&self) -> String {
        format!("n={} k={}", self.n, self.k)
    }

    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        (self.n * (self.format.gpu_row_words)(self.k) * 4 + 4 * (self.k + self.n)) as u64
    }

    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (f, n, k) = (self.format, self.n, self.k);
        let blocks = n * k / f.block_weights;
        let mut r = fastrand::Rng::with_seed(((rng.u32(u32::MAX) as u64) << 32) | rng.u32(u32::MAX) as u64);
        let bytes = (f.random_blocks)(&mut r, blocks);
        let mut w = vec![0f32; n * k];
        (f.dequantize)(&bytes, &mut w);
        let mut mag = vec![0f64; n * k];
        (f.magnitudes)(&bytes, &mut mag);
        let mut weights = vec![WeightMatrix::upload_format(ctx, f, n, k, &bytes)?];
        for _ in 1..copies {
            weights.push(WeightMatrix::upload_format(ctx, f, n, k, &(f.random_blocks)(&mut r, blocks))?);
        }
        let x = rng.uniform_vec(k, -1.0, 1.0);
        let reference = reference::gemv(n, k, |r, c| w[r * k + c] as f64, |r, c| mag[r * k + c], &x);
        Ok(Box::new(MatmulPrepared { weights, x: ctx.upload(&x)?, y: guarded_f32(ctx, n)?, m: 1, reference, tol: 1e-5 }))
    }
}
