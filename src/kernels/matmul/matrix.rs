//! The Matrix variant of the weight-matrix GEMM (wgsl/mm_gemm_matrix.wgsl): one kernel for every
//! format, composed with the format's WGSL part, whose `fmt_w4` dequantises the weight tiles
//! (exactly, in f32) before they are rounded to f16 in workgroup memory. The products run on
//! 16x16x16 cooperative matrices with f16 inputs and f32 accumulation; outputs, layout and
//! split-K are those of the Portable GEMM.
//!
//! **Tiles.** A workgroup computes a [`MatrixTile::tm`] x [`MatrixTile::tn`] output tile (x rows x
//! weight rows) with `sgm x sgn` subgroups, each owning `mi x nj` 16x16 f32 accumulators; K is
//! stepped 32 columns at a time (the split-K slice of the Portable GEMM), the weight slice
//! dequantised once per step and shared by all subgroups, the x slice loaded once per step.
//! Two shapes ([`tile_for`]): 32 x 128 with 4 subgroups (m <= 64) and 128 x 128 with 8
//! subgroups of 4 x 2 accumulators (larger m). Workgroup memory: the two f16 slices, rows padded
//! to 40 halves, plus one 16x16 f32 output block per subgroup ([`MatrixTile::bytes`]: 16.5 KiB
//! and 28 KiB), checked against the adapter's limit before anything is recorded.
//!
//! **Numerics.** Each weight (exactly dequantised) and each activation is rounded to f16 (round
//! to nearest), each product is exact in f32 and sums are f32: per output,
//! |error| <= ~2^-10 * sum |w x| plus, for values in f16's subnormal range (|v| < 2^-14), an
//! absolute 2^-25 per operand. Weights or activations beyond f16's finite range (|v| > 65504:
//! possible in BF16 / F32 matrices or with extreme quantisation scales) do not survive the
//! rounding: use [`Variant::Portable`] (`VariantPolicy::Require`) for such matrices.
//!
//! **Testing.** lavapipe has no cooperative matrices: there the variant is reported unsupported
//! and every forced call is an [`crate::Error::Unsupported`]. On a GPU that has them,
//! `cargo test --release --test matmul -- --nocapture matrix` runs it over every format's GEMM
//! grid (also part of `WGKERNELS_KERNEL=mm_gemm cargo test --release --test harness`), and
//! `cargo bench --bench kernels -- --filter mm_gemm_` times it beside the Portable GEMM.
//!
//! **Selection.** Under `Auto` the GEMM runs as Matrix from [`MATRIX_MIN_M`] input rows on, where
//! the adapter supports it and the tile fits its limits; below that, or where it can't, it runs
//! Portable. `Prefer(Matrix)` runs Matrix at every m it can; `Require(Matrix)` runs it at every m
//! or returns [`crate::Error::Unsupported`].

use super::{Fmt, MmPipeline, COMMON_WGSL};
use crate::caps::{Caps, Variant, VariantPolicy};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernels::attention::{prefill_matrix::matrix_support_with, unrolled};
use crate::pipeline::{PipelineDesc, ShaderSource};

const MATRIX_WGSL: &str = include_str!("../../../wgsl/mm_gemm_matrix.wgsl");

/// Fewest input rows at which `Auto` picks the Matrix GEMM over the Portable one. Measured on an
/// H100 (Vulkan, n = k = 4096): at m = 16 the two are within 5% for Q4_K and Q6_K and Matrix is
/// 20% slower for Q8_0; at m = 128 Matrix is 2.2-2.7x faster for all three, and 2.9-3.6x at 512
/// and 2048. The crossover lies between; 32 is the first tile-sized step past 16.
pub const MATRIX_MIN_M: usize = 32;

/// Columns per K step (the split-K slice; wgsl/mm_gemm_matrix.wgsl `TK`).
pub(super) const TK: usize = 32;

/// The tile shape of one Matrix GEMM pipeline: `sgm x sgn` subgroups, each with `mi x nj` 16x16
/// accumulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixTile {
    pub sgm: u32,
    pub sgn: u32,
    pub mi: u32,
    pub nj: u32,
}

impl MatrixTile {
    /// m <= 64: 32 x 128, 4 subgroups of 2 x 2 accumulators.
    pub const NARROW: MatrixTile = MatrixTile { sgm: 1, sgn: 4, mi: 2, nj: 2 };
    /// Larger m: 128 x 128, 8 subgroups of 4 x 2 accumulators.
    pub const WIDE: MatrixTile = MatrixTile { sgm: 2, sgn: 4, mi: 4, nj: 2 };

    pub fn subgroups(&self) -> u32 {
        self.sgm * self.sgn
    }
    /// x rows per tile.
    pub fn tm(&self) -> usize {
        16 * (self.mi * self.sgm) as usize
    }
    /// Weight rows (outputs) per tile.
    pub fn tn(&self) -> usize {
        16 * (self.nj * self.sgn) as usize
    }
    /// Workgroup memory in bytes: the x and weight slices (f16, rows of 40 halves) and one
    /// 16x16 f32 block per subgroup.
    pub fn bytes(&self) -> usize {
        2 * (self.tm() + self.tn()) * (TK + 8) + 4 * 256 * self.subgroups() as usize
    }
    /// Workgroups the GEMM aims for before it splits K (`kernels::splitk`), fewer than the
    /// Portable GEMM's 1056 for these larger workgroups: half for 4 subgroups (4 per SM of a
    /// 132-SM GPU), a quarter for 8. Provisional, until measured on the GPU.
    pub fn split_target(&self) -> usize {
        match self.subgroups() {
            0..=4 => 528,
            _ => 264,
        }
    }
    /// vec4 chunks of the (x, weight) slice each of `wg` invocations stages per step.
    fn chunks(&self, wg: usize) -> (usize, usize) {
        ((self.tm() * TK / 4).div_ceil(wg), (self.tn() * TK / 4).div_ceil(wg))
    }
}

/// The tile shape for `m` input rows. Provisional, until measured on the GPU.
pub fn tile_for(m: usize) -> MatrixTile {
    if m <= 64 {
        MatrixTile::NARROW
    } else {
        MatrixTile::WIDE
    }
}

/// `KernelInfo::extra` of the GEMMs: the Matrix variant's adapter-level needs (16x16x16 f16 ->
/// f32 configuration, one subgroup size, invocations for the smaller tile).
pub(super) fn gemm_extra(caps: &Caps, v: Variant) -> std::result::Result<(), String> {
    match v {
        Variant::Matrix => matrix_support_with(caps, MatrixTile::NARROW.subgroups()).map(|_| ()),
        _ => Ok(()),
    }
}

/// The Matrix pipeline of `format` for `m` input rows on `caps`, or why not: the tile of
/// [`tile_for`] (or the narrow one where it does not fit) within the adapter's invocation and
/// workgroup-memory limits.
pub fn matrix_key(caps: &Caps, format: Fmt, m: usize) -> std::result::Result<MmPipeline, String> {
    let l = &caps.limits;
    let mut why = String::new();
    for tile in [tile_for(m), MatrixTile::NARROW] {
        let sg = match matrix_support_with(caps, tile.subgroups()) {
            Ok(sg) => sg,
            Err(e) => {
                why = e;
                continue;
            }
        };
        if tile.bytes() > l.max_compute_workgroup_storage_size as usize {
            why = format!("the {}x{} tile needs {} bytes of workgroup memory, the adapter has {}", tile.tm(), tile.tn(), tile.bytes(), l.max_compute_workgroup_storage_size);
            continue;
        }
        return Ok(MmPipeline::GemmMatrix { format, sg, tile });
    }
    Err(why)
}

/// The GEMM pipeline for `m` rows of `format` in `ctx` with the selected variant `v`: `None` for
/// the Portable kernel, else the Matrix one (see the module docs for the rules).
pub(super) fn gemm_choice(ctx: &Context, format: Fmt, info: &'static crate::caps::KernelInfo, v: Variant, m: usize, k: usize) -> Result<Option<MmPipeline>> {
    if v != Variant::Matrix {
        return Ok(None);
    }
    let policy = ctx.options().policy;
    // Only a policy naming Matrix runs it below the crossover (`Prefer` of a variant the GEMM
    // lacks falls back to `Auto`'s choice, and so to its rule).
    let named = matches!(policy, VariantPolicy::Prefer(Variant::Matrix) | VariantPolicy::Require(Variant::Matrix));
    if !named && m < MATRIX_MIN_M {
        return Ok(None);
    }
    // The tiles load x and the weights by whole vec4s of a row.
    let key = if k % 4 == 0 { matrix_key(ctx.caps(), format, m) } else { Err(format!("row length k = {k} is not a multiple of 4")) };
    match key {
        Ok(key) => Ok(Some(key)),
        Err(reason) if matches!(policy, VariantPolicy::Require(_)) => Err(Error::Unsupported { kernel: info.name, variant: v, reason }),
        Err(_) => Ok(None),
    }
}

/// The pipeline description of [`MmPipeline::GemmMatrix`].
pub(super) fn matrix_desc(format: Fmt, sg: u32, tile: MatrixTile) -> PipelineDesc {
    let wg = tile.subgroups() * sg;
    let (cx, cw) = tile.chunks(wg as usize);
    let templates = [("NJ", "{j}", tile.nj as usize), ("MI", "{i}", tile.mi as usize), ("CX", "{x}", cx), ("CW", "{w}", cw)];
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![unrolled(MATRIX_WGSL, &templates), COMMON_WGSL, format.0.wgsl, crate::kernels::splitk::TILE_WGSL]),
        entry: "main",
        constants: vec![("SG", sg as f64), ("SGM", tile.sgm as f64), ("SGN", tile.sgn as f64), ("MI", tile.mi as f64), ("NJ", tile.nj as f64)],
        workgroup_size: [wg, 1, 1],
        params_size: std::mem::size_of::<super::Params>() as u64,
        bindings: super::GEMV_BINDINGS,
    }
}

/// Matrix pipelines of `format` for the shader checks (nominal adapter: subgroup 32, 48 KiB):
/// both tiles, and the narrow one at subgroup size 64.
#[cfg(feature = "testkit")]
pub(super) fn sample_pipelines(format: Fmt) -> Vec<MmPipeline> {
    let caps = Caps::nominal();
    let mut v: Vec<MmPipeline> = [1, 512].iter().filter_map(|&m| matrix_key(&caps, format, m).ok()).collect();
    v.push(MmPipeline::GemmMatrix { format, sg: 64, tile: MatrixTile::NARROW });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_fit_the_nominal_adapter_and_split_evenly() {
        let caps = Caps::nominal();
        for tile in [MatrixTile::NARROW, MatrixTile::WIDE] {
            assert!(tile.bytes() <= 48 << 10 && tile.bytes() % 16 == 0);
            let (cx, cw) = tile.chunks(32 * tile.subgroups() as usize);
            assert_eq!((cx * 32 * tile.subgroups() as usize, cw * 32 * tile.subgroups() as usize), (tile.tm() * TK / 4, tile.tn() * TK / 4));
        }
        let f = Fmt(crate::formats::FORMATS[0]);
        assert!(matches!(matrix_key(&caps, f, 2048), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::WIDE, sg: 32, .. })));
        assert!(matches!(matrix_key(&caps, f, 17), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::NARROW, .. })));
        let mut small = caps.clone();
        small.limits.max_compute_workgroup_storage_size = 20 << 10;
        assert!(matches!(matrix_key(&small, f, 2048), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::NARROW, .. })));
        small.limits.max_compute_workgroup_storage_size = 16 << 10;
        assert!(matrix_key(&small, f, 2048).unwrap_err().contains("workgroup memory"));
    }

    #[test]
    fn templates_name_every_accumulator_and_chunk() {
        let d = matrix_desc(Fmt(crate::formats::FORMATS[0]), 32, MatrixTile::WIDE);
        let ShaderSource::Wgsl(parts) = &d.source else { panic!("not WGSL") };
        let text = parts[0];
        // Every template line expanded; placeholders remain only in the comments that explain them.
        for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
            assert!(!["{i}", "{j}", "{x}", "{w}"].iter().any(|k| line.contains(k)), "{line}");
        }
        assert!(!text.lines().any(|l| l.trim_start().starts_with("//@")));
        for i in 0..4 {
            for j in 0..2 {
                assert_eq!(text.matches(&format!("c{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{i}_{j})")).count(), 1);
                assert_eq!(text.matches(&format!("coopStoreT(c{i}_{j}, ")).count(), 1);
            }
        }
        assert!(text.contains("var wv3 =") && !text.contains("var wv4 =") && text.contains("var xv3 =") && !text.contains("var xv4 ="));
        assert_eq!(d.workgroup_size, [256, 1, 1]);
    }
}
