//! Split-K for the GEMMs (wgsl/splitk_reduce.wgsl), shared by the weight-matrix family's GEMMs
//! (Portable, Matrix and Native).
//!
//! A GEMM's output tiles are its workgroups. At small m (a few prompt tokens) they are too few to
//! fill the GPU: 16 x 4096 is 64 tiles of 16 x 64. Then each tile's K range is cut into
//! `splits` workgroups, which write partial tiles into a scratch buffer; a second dispatch sums
//! the splits into the output. Measured on an H100 (2026-11-25; docs/PERFORMANCE.md), 4096 x 4096:
//! INT4 m=16 871.7 -> 145.1 µs, Q4_K m=32 180.0 -> 81.7 µs. [`crate::Tuning::gemm_split`] = false
//! turns it off, to compare.

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::Caps;
use crate::error::Result;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

/// The split-K work unit of a GEMM workgroup (wgsl/splitk_tile.wgsl), appended to both GEMMs.
pub(crate) const TILE_WGSL: &str = include_str!("../../wgsl/splitk_tile.wgsl");

/// Workgroups a GEMM aims for before it splits K (8 per SM of a 132-SM GPU).
pub(crate) const TARGET: usize = 1056;
/// Fewest K steps (slices / sub-blocks) a split takes.
const MIN_STEPS: usize = 8;

/// (steps per split, splits) for `tiles` output tiles over `steps` K steps: one split where the
/// tiles alone make `target` workgroups (the Portable GEMM: [`TARGET`]; larger workgroups want
/// fewer), else enough splits to reach it, each of at least [`MIN_STEPS`] steps. With
/// [`crate::Tuning::gemm_split`] off, one split.
pub(crate) fn plan_for(caps: &Caps, tiles: usize, steps: usize, target: usize) -> (usize, usize) {
    let target = target.max(1);
    let want = if !caps.tuning.gemm_split || tiles >= target { 1 } else { target.div_ceil(tiles).min(steps / MIN_STEPS).max(1) };
    let per = steps.max(1).div_ceil(want);
    (per, steps.max(1).div_ceil(per))
}

params_struct! {
    struct ReduceParams {
        len: u32,
        splits: u32,
        _p0: u32,
        _p1: u32,
    }
}

const BINDINGS: &[StorageBinding] = &[StorageBinding::read("part", "f32"), StorageBinding::write("y", "f32")];

/// The reduce pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitReduce;

impl PipelineKey for SplitReduce {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![include_str!("../../wgsl/splitk_reduce.wgsl")]),
            entry: "main",
            constants: vec![],
            workgroup_size: [256, 1, 1],
            params_size: std::mem::size_of::<ReduceParams>() as u64,
            bindings: BINDINGS,
        }
    }
}

/// Record a GEMM dispatch (`gemm(batch, output)`) with `splits` splits producing `len` outputs:
/// straight into `y` for one split, else into the context's scratch buffer
/// ([`crate::Context::scratch`]: every partial is written before the reduce reads it) and then
/// summed into `y`.
pub(crate) fn run(b: &mut Batch, y: &GpuBuffer<f32>, len: usize, splits: usize, gemm: impl FnOnce(&mut Batch, crate::buffer::BufRef) -> Result<()>) -> Result<()> {
    if splits <= 1 {
        return gemm(b, y.raw());
    }
    let ctx = b.context();
    let bytes = splits.checked_mul(len).and_then(|n| n.checked_mul(4)).ok_or_else(|| crate::Error::Shape(format!("{splits} splits of {len} outputs overflow")))?;
    let part = ctx.scratch(crate::buffer::Scratch::SplitK, bytes as u64)?;
    gemm(b, ctx.internal(&part))?;
    let grid = ctx.grid((len as u64).div_ceil(256))?;
    b.dispatch(
        &SplitReduce,
        &ReduceParams { len: crate::error::dims::u32_of("len", len)?, splits: crate::error::dims::u32_of("splits", splits)?, _p0: 0, _p1: 0 },
        &[ctx.internal(&part), y.raw()],
        grid,
    )
}

/// The reduce's params and its WGSL pipeline (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twin() -> crate::kernels::ParamsTwin {
    crate::kernels::ParamsTwin {
        rust: "splitk::ReduceParams",
        size: std::mem::size_of::<ReduceParams>(),
        fields: ReduceParams::FIELDS,
        pipelines: crate::suite::describe_all([SplitReduce]),
    }
}
