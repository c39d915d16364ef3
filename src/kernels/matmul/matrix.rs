//! The Matrix variant of the weight-matrix GEMM (wgsl/mm_gemm_matrix.wgsl): one kernel for every
//! format, composed with the format's WGSL part, which dequantises the weight tiles (exactly, in
//! f32) before they are rounded to f16 in workgroup memory. The products run on 16x16x16
//! cooperative matrices with f16 inputs and f32 accumulation; outputs and layout are those of the
//! Portable GEMM.
//!
//! **Weight staging.** The weights are staged in *runs* of 32 consecutive weights of one row:
//! a format part with the run hook (`fmt_run_load` / `fmt_run`, [`crate::formats`]: every
//! quantised format) loads a run with a few loads and decodes its block scales once per run;
//! parts without it (the float formats) go through eight `fmt_w4` calls (wgsl/mm_run_w4.wgsl). A run's loads are issued
//! one step ahead, its decode waits for the store that follows the next step's barrier.
//!
//! **Tiles.** A workgroup computes a [`MatrixTile::tm`] x [`MatrixTile::tn`] output tile (x rows x
//! weight rows) with `sgm x sgn` subgroups, each owning `mi x nj` 16x16 f32 accumulators; K is
//! stepped [`MatrixTile::tk`] (64, or 32 where workgroup memory is short) columns at a time, the
//! weight slice dequantised once per step and shared by all subgroups, the x slice loaded once
//! per step. Two shapes ([`tile_for`]): 32 x 128 with 4 subgroups (m <= 64) and 128 x 128 with 8
//! subgroups of 4 x 2 accumulators (larger m). Workgroup memory ([`MatrixTile::bytes`]): the two
//! f16 slices, rows padded to TK + 8 halves, plus one 16x16 f32 output block per subgroup: 26.5
//! KiB (32 x 128, TK 64), 44 KiB (128 x 128, TK 64), 16.5 KiB (32 x 128, TK 32), 28 KiB
//! (128 x 128, TK 32). [`matrix_key`] takes the first of (the shape for m, TK 64), (that shape,
//! TK 32), (32 x 128, TK 64), (32 x 128, TK 32) that fits the adapter's workgroup memory and
//! invocations, before anything is recorded.
//!
//! **Split-K.** Where the output tiles are too few for the GPU, K is split in whole steps
//! (`split_plan`: the Portable GEMM's plan over 32-column slices, rounded up to whole steps).
//!
//! **Numerics.** Each weight (exactly dequantised) and each activation is rounded to f16 (round
//! to nearest), each product is exact in f32 and sums are f32: per output,
//! |error| <= ~2^-10 * sum |w x| plus, for values in f16's subnormal range (|v| < 2^-14), an
//! absolute 2^-25 per operand. Weights or activations beyond f16's finite range (|v| > 65504:
//! possible in BF16 / F32 matrices or with extreme quantisation scales) do not survive the
//! rounding: use [`Variant::Portable`] (`VariantPolicy::Require`) for such matrices.
//!
//! **Testing.** lavapipe has no cooperative matrices: there the variant is reported unsupported
//! and every forced call is an [`crate::Error::Unsupported`]. What runs without them is checked
//! everywhere: every run the staging decodes equals the CPU dequantiser bit for bit
//! (`check_runs`), and the slices every tile and K step stage equal x and the weights rounded
//! to f16 (`check_stage`; tests/matmul.rs). On a GPU that has them,
//! `cargo test --release --test matmul -- --nocapture matrix` runs it over every format's GEMM
//! grid (also part of `WGKERNELS_KERNEL=mm_gemm cargo test --release --test harness`), and
//! `cargo bench --bench kernels -- --filter mm_gemm_` times it beside the Portable GEMM.
//!
//! **Selection.** Under `Auto` the GEMM runs as Matrix from [`MATRIX_MIN_M`] input rows on, where
//! the adapter supports it and the tile fits its limits; below that, or where it can't, it runs
//! Portable. `Prefer(Matrix)` runs Matrix at every m it can; `Require(Matrix)` runs it at every m
//! or returns [`crate::Error::Unsupported`]. For prompts, [`super::gemm_staged`] runs the same
//! numerics in two passes (f16 copies first, then the products: [`super::wide`]).

use super::{Fmt, MmPipeline, COMMON_WGSL};
use crate::caps::{Caps, Variant, VariantPolicy};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernels::attention::{prefill_matrix::matrix_support_with, unrolled};
use crate::pipeline::{PipelineDesc, ShaderSource};

const MATRIX_WGSL: &str = include_str!("../../../wgsl/mm_gemm_matrix.wgsl");
const STAGE_WGSL: &str = include_str!("../../../wgsl/mm_gemm_stage.wgsl");
const RUN_FMT_WGSL: &str = include_str!("../../../wgsl/mm_run_fmt.wgsl");
const RUN_W4_WGSL: &str = include_str!("../../../wgsl/mm_run_w4.wgsl");

/// Fewest input rows at which `Auto` picks the Matrix GEMM over the Portable one. Measured on an
/// H200 (Vulkan, n = k = 4096, whole-run staging; results/2026-11-26-h200-02): from m = 4 to 16
/// Matrix takes 41-48 µs (batch) for Q4_K / Q6_K / Q8_0 / Q4_0 where Portable takes 66-85 µs
/// (1.4-2.0x); at m = 128 it is 4.5-5.3x faster. Both are flat in m up to 16 (the weights'
/// staging dominates), so the crossover lies below 4; m = 2 and 3 keep the Portable GEMM, not
/// measured.
pub const MATRIX_MIN_M: usize = 4;

/// Weights per run (wgsl/mm_run_fmt.wgsl): a K step is a whole number of runs.
const RUN: usize = 32;

/// The tile shape of one Matrix GEMM pipeline: `sgm x sgn` subgroups, each with `mi x nj` 16x16
/// accumulators, stepping K `tk` (32 or 64) columns at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixTile {
    pub sgm: u32,
    pub sgn: u32,
    pub mi: u32,
    pub nj: u32,
    pub tk: u32,
}

impl MatrixTile {
    /// m <= 64: 32 x 128, 4 subgroups of 2 x 2 accumulators, 64-column steps.
    pub const NARROW: MatrixTile = MatrixTile { sgm: 1, sgn: 4, mi: 2, nj: 2, tk: 64 };
    /// Larger m: 128 x 128, 8 subgroups of 4 x 2 accumulators, 64-column steps.
    pub const WIDE: MatrixTile = MatrixTile { sgm: 2, sgn: 4, mi: 4, nj: 2, tk: 64 };

    /// This shape with 32-column steps (half the workgroup memory for the slices).
    pub const fn short(self) -> MatrixTile {
        MatrixTile { tk: 32, ..self }
    }

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
    /// Columns per K step (one split-K slice).
    pub fn tk(&self) -> usize {
        self.tk as usize
    }
    /// Workgroup memory in bytes: the x and weight slices (f16, rows of TK + 8 halves) and one
    /// 16x16 f32 block per subgroup.
    pub fn bytes(&self) -> usize {
        2 * (self.tm() + self.tn()) * (self.tk() + 8) + 4 * 256 * self.subgroups() as usize
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
    /// x vec4s and weight runs of a step each of `wg` invocations stages.
    fn chunks(&self, wg: usize) -> (usize, usize) {
        ((self.tm() * self.tk() / 4).div_ceil(wg), (self.tn() * self.tk() / RUN).div_ceil(wg))
    }
}

/// Every tile [`matrix_key`] can pick (the test kit's list of pipelines holds each).
pub const TILES: [MatrixTile; 4] = [MatrixTile::NARROW, MatrixTile::WIDE, MatrixTile::NARROW.short(), MatrixTile::WIDE.short()];

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

/// The Matrix pipeline of `format` for `m` input rows on `caps`, or why not: the first of the
/// tile of [`tile_for`], that shape with 32-column steps, and the narrow tile with 64- and
/// 32-column steps that fits the adapter's invocation and workgroup-memory limits.
pub fn matrix_key(caps: &Caps, format: Fmt, m: usize) -> std::result::Result<MmPipeline, String> {
    matrix_key_tuned(caps, format, m, None)
}

/// [`matrix_key`], trying `tile` (a [`crate::Tuning::gemm_tile`]) first.
fn matrix_key_tuned(caps: &Caps, format: Fmt, m: usize, tile: Option<[u32; 5]>) -> std::result::Result<MmPipeline, String> {
    let l = &caps.limits;
    let mut why = String::new();
    let tuned = tile.map(|[sgm, sgn, mi, nj, tk]| MatrixTile { sgm, sgn, mi, nj, tk });
    let tile = tile_for(m);
    for tile in tuned.into_iter().chain([tile, tile.short(), MatrixTile::NARROW, MatrixTile::NARROW.short()]) {
        let sg = match matrix_support_with(caps, tile.subgroups()) {
            Ok(sg) => sg,
            Err(e) => {
                why = e;
                continue;
            }
        };
        if tile.bytes() > l.max_compute_workgroup_storage_size as usize {
            why = format!(
                "the {}x{} tile (K step {}) needs {} bytes of workgroup memory, the adapter has {}",
                tile.tm(),
                tile.tn(),
                tile.tk(),
                tile.bytes(),
                l.max_compute_workgroup_storage_size
            );
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
    // The tiles load x and the weights by whole vec4s of a row; a format with the run hook
    // (blocks of a multiple of 32 weights) by whole runs.
    let key = if k % 4 != 0 {
        Err(format!("row length k = {k} is not a multiple of 4"))
    } else if super::kernel_infos(format.0).runs && k % RUN != 0 {
        Err(format!("row length k = {k} is not a multiple of {RUN}"))
    } else {
        matrix_key_tuned(ctx.caps(), format, m, ctx.options().tuning.gemm_tile)
    };
    match key {
        Ok(key) => Ok(Some(key)),
        Err(reason) if matches!(policy, VariantPolicy::Require(_)) => Err(Error::Unsupported { kernel: info.name, variant: v, reason }),
        Err(_) => Ok(None),
    }
}

/// (steps per split, splits) of a GEMM with `tiles` output tiles over `k` columns in steps of
/// `tk` (a multiple of 32): the split-K plan over 32-column slices (`kernels::splitk`, so every
/// split keeps at least as many columns as there), rounded up to whole steps.
pub(super) fn split_plan(caps: &Caps, tiles: usize, k: usize, tk: usize, target: usize) -> (usize, usize) {
    let steps = k.div_ceil(tk).max(1);
    let (slices, _) = crate::kernels::splitk::plan_for(caps, tiles, k.div_ceil(RUN), target);
    let sps = slices.div_ceil(tk / RUN).clamp(1, steps);
    (sps, steps.div_ceil(sps))
}

/// The run wrapper of `format`'s part: its run hook, or runs of `fmt_w4` calls.
pub(super) fn run_wgsl(format: Fmt) -> &'static str {
    if super::kernel_infos(format.0).runs {
        RUN_FMT_WGSL
    } else {
        RUN_W4_WGSL
    }
}

/// The pipeline description of [`MmPipeline::GemmMatrix`].
pub(super) fn matrix_desc(format: Fmt, sg: u32, tile: MatrixTile) -> PipelineDesc {
    let wg = tile.subgroups() * sg;
    let (cx, cw) = tile.chunks(wg as usize);
    let templates = [("NJ", "{j}", tile.nj as usize), ("MI", "{i}", tile.mi as usize), ("CX", "{x}", cx), ("CW", "{w}", cw)];
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![unrolled(MATRIX_WGSL, &templates), STAGE_WGSL, COMMON_WGSL, format.0.wgsl, run_wgsl(format), crate::kernels::splitk::TILE_WGSL]),
        entry: "main",
        constants: vec![("SG", sg as f64), ("SGM", tile.sgm as f64), ("SGN", tile.sgn as f64), ("MI", tile.mi as f64), ("NJ", tile.nj as f64), ("TK", tile.tk as f64)],
        workgroup_size: [wg, 1, 1],
        params_size: std::mem::size_of::<super::Params>() as u64,
        bindings: super::GEMV_BINDINGS,
    }
}

/// Matrix pipelines of `format` for the shader checks: every tile [`matrix_key`] can pick, at
/// subgroup sizes 32 and 64.
#[cfg(feature = "testkit")]
pub(super) fn sample_pipelines(format: Fmt) -> Vec<MmPipeline> {
    [32, 64].iter().flat_map(|&sg| TILES.iter().map(move |&tile| MmPipeline::GemmMatrix { format, sg, tile })).collect()
}

/// The check pipeline of the weight runs (wgsl/mm_run_check.wgsl): every run of a matrix through
/// the run wrapper the Matrix GEMM of `format` composes, written as the dequantiser writes.
#[cfg(feature = "testkit")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunCheck(pub Fmt);

#[cfg(feature = "testkit")]
impl crate::pipeline::PipelineKey for RunCheck {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![COMMON_WGSL, self.0 .0.wgsl, run_wgsl(self.0), include_str!("../../../wgsl/mm_run_check.wgsl")]),
            entry: "main",
            constants: vec![],
            workgroup_size: [64, 1, 1],
            params_size: std::mem::size_of::<super::Params>() as u64,
            bindings: super::DEQUANT_BINDINGS,
        }
    }
}

/// The check pipeline of the Matrix GEMM's staging (wgsl/mm_gemm_stage_check.wgsl): the staging
/// functions of the GEMM pipeline `(format, sg, tile)`, run for every (tile, step), the staged
/// slices copied out. Needs f16 only.
#[cfg(feature = "testkit")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageCheck {
    pub format: Fmt,
    pub sg: u32,
    pub tile: MatrixTile,
}

#[cfg(feature = "testkit")]
impl crate::pipeline::PipelineKey for StageCheck {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let (tile, sg) = (self.tile, self.sg);
        let wg = tile.subgroups() * sg;
        let (cx, cw) = tile.chunks(wg as usize);
        const BINDINGS: &[crate::pipeline::StorageBinding] = &[
            crate::pipeline::StorageBinding::read("wq", "vec4<u32>"),
            crate::pipeline::StorageBinding::read("x", "vec4<f32>"),
            crate::pipeline::StorageBinding::write("out", "vec4<f32>"),
        ];
        let constants = [("SG", sg), ("SGM", tile.sgm), ("SGN", tile.sgn), ("MI", tile.mi), ("NJ", tile.nj), ("TK", tile.tk), ("CX", cx as u32), ("CW", cw as u32)];
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![include_str!("../../../wgsl/mm_gemm_stage_check.wgsl"), STAGE_WGSL, COMMON_WGSL, self.format.0.wgsl, run_wgsl(self.format)]),
            entry: "main",
            constants: constants.iter().map(|&(n, v)| (n, v as f64)).collect(),
            workgroup_size: [wg, 1, 1],
            params_size: std::mem::size_of::<super::Params>() as u64,
            bindings: BINDINGS,
        }
    }
}

/// Record the staging check of the Matrix GEMM pipeline `(w's format, sg, tile)` for `m` rows of
/// `x` (row-major `[m, k]`, `k % 4 == 0`, one chunk): returns (tiles, steps); `out` receives, for
/// step `s` and tile `t` (the GEMM's tile order), block `s * tiles + t` of `(tm + tn) * tk`
/// values: the staged x rows, then the staged weight rows, `tk` columns each (f16 values as f32).
#[cfg(feature = "testkit")]
pub fn check_stage(
    b: &mut crate::batch::Batch,
    w: &super::WeightMatrix,
    x: &crate::buffer::GpuBuffer<f32>,
    m: usize,
    out: &crate::buffer::GpuBuffer<f32>,
    sg: u32,
    tile: MatrixTile,
) -> Result<(usize, usize)> {
    crate::error::ensure(w.k % 4 == 0 && w.chunks.len() == 1 && m > 0, || {
        Error::Shape(format!("stage check: k = {} (needs a multiple of 4), {} chunks (needs 1), m = {m}", w.k, w.chunks.len()))
    })?;
    let c = &w.chunks[0];
    let tiles_n = c.rows.div_ceil(tile.tn());
    let tiles = m.div_ceil(tile.tm()) * tiles_n;
    let steps = w.k.div_ceil(tile.tk());
    let len = [tiles, steps, tile.tm() + tile.tn(), tile.tk()].iter().try_fold(1usize, |a, &v| a.checked_mul(v)).filter(|&v| v <= u32::MAX as usize);
    let len = len.ok_or_else(|| Error::Shape("stage check output exceeds u32 indices".into()))?;
    x.require("x", m.checked_mul(w.k).ok_or_else(|| Error::Shape(format!("m = {m} rows of {} columns overflow", w.k)))?)?;
    out.require("out", len)?;
    let (gx, gy) = (u32::try_from(tiles), u32::try_from(steps));
    let grid = [gx.map_err(|_| Error::Shape("too many tiles".into()))?, gy.map_err(|_| Error::Shape("too many steps".into()))?, 1];
    let params = super::Params { m: m as u32, tiles_n: tiles_n as u32, ..w.params(c) };
    b.dispatch(&StageCheck { format: Fmt(w.format), sg, tile }, &params, &[c.data.raw(), x.raw(), out.raw()], grid)?;
    Ok((tiles, steps))
}

/// Record the run check of `w` into `out` (row-major f32 `[n, k]`, `k % 4 == 0`): the values the
/// Matrix GEMM stages (before their rounding to f16), which must equal the CPU dequantiser's
/// bit for bit. Runs on every adapter (no cooperative matrices needed).
#[cfg(feature = "testkit")]
pub fn check_runs(b: &mut crate::batch::Batch, w: &super::WeightMatrix, out: &crate::buffer::GpuBuffer<f32>) -> Result<()> {
    crate::error::ensure(w.k % 4 == 0, || Error::Shape(format!("run check: k = {} is not a multiple of 4", w.k)))?;
    let total = w.n.checked_mul(w.k).filter(|&v| v <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("n * k = {} * {} values exceed u32 indices", w.n, w.k)))?;
    out.require("out", total)?;
    let ctx = b.context();
    let key = RunCheck(Fmt(w.format));
    for c in &w.chunks {
        let runs = (c.rows as u64) * (w.k as u64).div_ceil(RUN as u64);
        let grid = ctx.grid(runs.div_ceil(64))?;
        b.dispatch(&key, &w.params(c), &[c.data.raw(), out.raw()], grid)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_fit_the_nominal_adapter_and_split_evenly() {
        let caps = Caps::nominal();
        assert_eq!(TILES.map(|t| t.bytes()), [27136, 45056, 16896, 28672]);
        for tile in TILES {
            assert!(tile.bytes() <= 48 << 10 && tile.bytes() % 16 == 0);
            assert!(tile.tk() % RUN == 0 && tile.tk() % 16 == 0);
            for sg in [32, 64] {
                let wg = sg * tile.subgroups() as usize;
                let (cx, cw) = tile.chunks(wg);
                // Every x vec4 and every run of a step is staged, by at most one extra round.
                assert!(cx * wg >= tile.tm() * tile.tk() / 4 && (cx - 1) * wg < tile.tm() * tile.tk() / 4);
                assert!(cw * wg >= tile.tn() * tile.tk() / RUN && (cw - 1) * wg < tile.tn() * tile.tk() / RUN);
            }
        }
        let f = Fmt(crate::formats::FORMATS[0]);
        assert!(matches!(matrix_key(&caps, f, 2048), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::WIDE, sg: 32, .. })));
        assert!(matches!(matrix_key(&caps, f, 17), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::NARROW, .. })));
        let mut small = caps.clone();
        small.limits.max_compute_workgroup_storage_size = 40 << 10;
        assert!(matches!(matrix_key(&small, f, 2048), Ok(MmPipeline::GemmMatrix { tile, .. }) if tile == MatrixTile::WIDE.short()));
        small.limits.max_compute_workgroup_storage_size = 27 << 10;
        assert!(matches!(matrix_key(&small, f, 2048), Ok(MmPipeline::GemmMatrix { tile: MatrixTile::NARROW, .. })));
        small.limits.max_compute_workgroup_storage_size = 20 << 10;
        assert!(matches!(matrix_key(&small, f, 2048), Ok(MmPipeline::GemmMatrix { tile, .. }) if tile == MatrixTile::NARROW.short()));
        small.limits.max_compute_workgroup_storage_size = 16 << 10;
        assert!(matrix_key(&small, f, 2048).unwrap_err().contains("workgroup memory"));
    }

    #[test]
    fn split_plans_cover_k_in_whole_steps() {
        let caps = Caps::nominal();
        for tk in [32, 64] {
            for k in [32, 64, 96, 256, 2560, 2592, 4096, 14336] {
                for tiles in [1, 2, 32, 128, 2000] {
                    let (sps, splits) = split_plan(&caps, tiles, k, tk, 528);
                    let steps = k.div_ceil(tk);
                    // Every split has at least one step, together exactly the steps of K.
                    assert!(sps >= 1 && splits >= 1 && (splits - 1) * sps < steps && splits * sps >= steps, "tk {tk} k {k} tiles {tiles}");
                    // As many columns per split as the 32-column plan keeps.
                    let (s32, n32) = crate::kernels::splitk::plan_for(&caps, tiles, k.div_ceil(32), 528);
                    assert!(sps * tk >= s32 * 32 && splits <= n32, "tk {tk} k {k} tiles {tiles}");
                    if tk == 32 {
                        assert_eq!((sps, splits), (s32, n32));
                    }
                }
            }
        }
        // m = 16 of a 4096 x 4096 matrix: 32 narrow tiles, 16 splits of 4 steps.
        assert_eq!(split_plan(&caps, 32, 4096, 64, MatrixTile::NARROW.split_target()), (4, 16));
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
        // 128 x 64 x values in 256 invocations: 8 vec4s each; 128 rows x 2 runs: one run each.
        assert!(text.contains("var wv0 =") && !text.contains("var wv1 =") && text.contains("var xv7 =") && !text.contains("var xv8 ="));
        assert_eq!(d.workgroup_size, [256, 1, 1]);
        assert!(d.constants.contains(&("TK", 64.0)));
    }

    #[test]
    fn run_wrapper_follows_the_part() {
        for f in crate::formats::FORMATS {
            let runs = super::super::kernel_infos(f).runs;
            let d = matrix_desc(Fmt(f), 32, MatrixTile::NARROW);
            let ShaderSource::Wgsl(parts) = &d.source else { panic!("not WGSL") };
            assert!(parts.contains(&if runs { RUN_FMT_WGSL } else { RUN_W4_WGSL }), "{}", f.name);
            // A run never straddles a block, so every k of a format with the hook is whole runs.
            assert!(!runs || f.block_weights % RUN == 0, "{}: blocks of {} weights", f.name, f.block_weights);
        }
        let with: Vec<&str> = crate::formats::FORMATS.iter().filter(|f| super::super::kernel_infos(f).runs).map(|f| f.name).collect();
        assert_eq!(with, ["q8_0", "q4_k", "q4_0", "q4_1", "q5_0", "q5_1", "q5_k", "q6_k", "q2_k", "q3_k", "int4", "int8"]);
    }
}
