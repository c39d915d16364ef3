//! The two-pass Matrix GEMM for prompts ([`gemm_staged`]): first the activations and then each
//! weight chunk are rounded to f16 into work buffers ([`GemmScratch`]; wgsl/mm_widen_x.wgsl,
//! wgsl/mm_widen.wgsl through the format's run wrapper), rows padded to whole tiles and row
//! lengths to whole 64-column steps, padding zero; then one format-independent kernel
//! (wgsl/mm_gemm_wide.wgsl) multiplies them on 16x16x16 cooperative matrices, staging each step
//! by plain f16 copies.
//!
//! **Why.** The one-pass Matrix GEMM ([`super::matrix`]) decodes every weight once per tile row
//! of x (m / 128 times) and rounds x to f16 once per tile column, inside its K loop, where that
//! work competes with the products: measured on an H200 at m = 512 it reaches ~110 TFLOP/s on
//! Q4_K, where the same loop fed with f16 copies reaches ~200. Decoding each weight once, into
//! a buffer the GEMM then reads, costs one write and one read of 2 bytes per weight: from a few
//! hundred rows of x on, less than the decodes it saves.
//!
//! **Numerics.** Exactly the one-pass Matrix GEMM's: each weight decoded exactly and rounded to
//! f16, each activation rounded to f16, f32 products and sums (see [`super::matrix`]).
//!
//! **When.** [`gemm_staged`] takes this path where the context runs the GEMM as Matrix, `m >=`
//! [`WIDE_MIN_M`], the tile fits the adapter's workgroup memory and `scratch` holds the padded
//! operands; otherwise it runs [`super::gemm`]. Tiles ([`WIDE_TILES`]): 128 x 128 with 8
//! subgroups where that gives at least [`WIDE_MIN_TILES`] tiles, else 128 x 64 with 4; K steps
//! of 64 columns, two barriers per step.

use super::matrix::{self, MatrixTile};
use super::{gemm, Fmt, MmPipeline, WeightMatrix, COMMON_WGSL};
use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::WeightFormat;
use crate::kernels::attention::{prefill_matrix::matrix_support_with, unrolled};
use crate::pipeline::{PipelineDesc, ShaderSource, StorageBinding};
use half::f16;

const WIDE_WGSL: &str = include_str!("../../../wgsl/mm_gemm_wide.wgsl");
const WIDEN_WGSL: &str = include_str!("../../../wgsl/mm_widen.wgsl");
const WIDEN_X_WGSL: &str = include_str!("../../../wgsl/mm_widen_x.wgsl");

/// Fewest input rows at which [`gemm_staged`] takes the two-pass path (two tile rows of x: below
/// that the one-pass GEMM decodes each weight at most once anyway).
pub const WIDE_MIN_M: usize = 256;
/// Fewest 128 x 128 tiles for which the wide tile is taken: below it, the 128 x 64 tile's twice
/// as many workgroups keep more of a large GPU busy. Measured on an H200 (132 SMs) at m = 512,
/// Q4_K: with 32 and 64 wide tiles (n = 1024, 2048) the 128 x 64 tiles ran 2.7x and 1.4x faster;
/// with 112 (n = 3584) the wide tiles ran 1.22x (k = 3584) and 1.42x (k = 18944) faster, with
/// 128 (n = 4096) 1.3x. So a half tile takes ~0.6-0.7 of a wide one's time, and half tiles win
/// only while each SM runs at most one: up to about half as many wide tiles as SMs (66 for
/// 132 SMs; wgpu does not report the count). On smaller GPUs both tiles fill the machine and
/// the wide one, which loads x half as often, is the better.
pub const WIDE_MIN_TILES: usize = 67;
/// Columns per K step of every tile; row lengths are padded to a multiple.
const TK: usize = 64;
/// Rows of the work buffers are padded to a multiple of this (every tile's rows).
const ROWS: usize = 128;

/// The second pass's tiles ([`MatrixTile`] shapes, K steps of 64 columns; workgroup memory
/// [`MatrixTile::bytes`]: the two f16 slices and a 16x16 f32 block per subgroup): 128 x 128 with
/// 8 subgroups of 4 x 2 accumulators (the one-pass GEMM's wide tile), and 128 x 64 with 4.
pub const WIDE_TILES: [MatrixTile; 2] = [MatrixTile::WIDE, MatrixTile { sgn: 2, ..MatrixTile::WIDE }];

/// Vec4s of x and of the weights each of `wg` invocations copies per step of `tile`.
fn chunks(tile: &MatrixTile, wg: usize) -> (usize, usize) {
    ((tile.tm() * tile.tk() / 4).div_ceil(wg), (tile.tn() * tile.tk() / 4).div_ceil(wg))
}

params_struct! {
    /// wgsl/mm_gemm_wide.wgsl's `Wide`.
    struct Wide {
        m: u32,
        n: u32,
        kp4: u32,
        steps: u32,
        ldy: u32,
        y_off: u32,
        tiles_m: u32,
        tiles: u32,
    }
}

params_struct! {
    /// wgsl/mm_widen_x.wgsl's `WidenX`.
    struct WidenX {
        m: u32,
        k4: u32,
        rows: u32,
        kp4: u32,
    }
}

const WIDE_BINDINGS: &[StorageBinding] = &[StorageBinding::read("xh", "vec4<f16>"), StorageBinding::read("wh", "vec4<f16>"), StorageBinding::write("y", "f32")];
const WIDEN_BINDINGS: &[StorageBinding] = &[StorageBinding::read("wq", "vec4<u32>"), StorageBinding::write("out", "vec4<f16>")];
const WIDEN_X_BINDINGS: &[StorageBinding] = &[StorageBinding::read("x", "vec4<f32>"), StorageBinding::write("out", "vec4<f16>")];

/// [`MmPipeline::GemmWide`]'s description.
pub(super) fn wide_desc(sg: u32, tile: MatrixTile) -> PipelineDesc {
    let wg = tile.subgroups() * sg;
    let (cx, cw) = chunks(&tile, wg as usize);
    let templates = [("NJ", "{j}", tile.nj as usize), ("MI", "{i}", tile.mi as usize), ("CX", "{x}", cx), ("CW", "{w}", cw)];
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![unrolled(WIDE_WGSL, &templates)]),
        entry: "main",
        constants: vec![("SG", sg as f64), ("SGM", tile.sgm as f64), ("SGN", tile.sgn as f64), ("MI", tile.mi as f64), ("NJ", tile.nj as f64), ("TK", tile.tk as f64)],
        workgroup_size: [wg, 1, 1],
        params_size: std::mem::size_of::<Wide>() as u64,
        bindings: WIDE_BINDINGS,
    }
}

/// [`MmPipeline::Widen`]'s description (the matrix family's params).
pub(super) fn widen_desc(format: Fmt) -> PipelineDesc {
    PipelineDesc {
        source: ShaderSource::Wgsl(vec!["enable f16;\n", COMMON_WGSL, format.0.wgsl, matrix::run_wgsl(format), WIDEN_WGSL]),
        entry: "main",
        constants: vec![],
        workgroup_size: [64, 1, 1],
        params_size: std::mem::size_of::<super::Params>() as u64,
        bindings: WIDEN_BINDINGS,
    }
}

/// [`MmPipeline::WidenX`]'s description.
pub(super) fn widen_x_desc() -> PipelineDesc {
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![WIDEN_X_WGSL]),
        entry: "main",
        constants: vec![],
        workgroup_size: [64, 1, 1],
        params_size: std::mem::size_of::<WidenX>() as u64,
        bindings: WIDEN_X_BINDINGS,
    }
}

/// The work buffers of [`gemm_staged`]: f16 copies of x and of one weight chunk, rows padded to
/// whole tiles and row lengths to whole 64-column steps. One scratch serves GEMMs of up to its
/// `rows` input rows and matrices of up to `n` rows (per chunk) and `k` columns, one after
/// another in a batch (each GEMM overwrites it).
pub struct GemmScratch {
    x: GpuBuffer<f16>,
    w: GpuBuffer<f16>,
}

fn round_up(v: usize, to: usize) -> Result<usize> {
    v.checked_next_multiple_of(to).ok_or_else(|| Error::Shape(format!("{v} rounded up to a multiple of {to} overflows")))
}

fn padded(rows: usize, k: usize) -> Result<usize> {
    round_up(rows, ROWS)?.checked_mul(round_up(k, TK)?).filter(|&v| v <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("{rows} x {k} padded values exceed u32 indices")))
}

impl GemmScratch {
    /// Work buffers for GEMMs of up to `rows` input rows over matrices (row chunks) of the
    /// `shapes` `(n, k)`: one f16 copy of `rows` rows of the longest row and one of the largest
    /// matrix, each padded as above.
    pub fn new(ctx: &Context, rows: usize, shapes: &[(usize, usize)]) -> Result<GemmScratch> {
        let k = shapes.iter().map(|s| s.1).max().unwrap_or(0);
        ensure(rows > 0 && k > 0 && shapes.iter().all(|&(n, k)| n > 0 && k > 0), || Error::Shape(format!("GEMM scratch of {rows} rows for {shapes:?}: every size must be > 0")))?;
        let mut w = 0;
        for &(n, k) in shapes {
            w = w.max(padded(n, k)?);
        }
        Ok(GemmScratch { x: ctx.alloc(padded(rows, k)?)?, w: ctx.alloc(w)? })
    }

    /// Bytes of GPU memory the scratch holds.
    pub fn bytes(&self) -> u64 {
        2 * (self.x.len() + self.w.len()) as u64
    }
}

/// Whether the two-pass path can take `m` rows of a `format` matrix with rows of `k` in `ctx`:
/// the context runs that GEMM as Matrix, `m >=` [`WIDE_MIN_M`] and `k % 4 == 0` (it then
/// applies where the scratch holds the operands and a tile fits: [`staged_pipeline`]).
pub fn applies(ctx: &Context, format: &'static WeightFormat, m: usize, k: usize) -> Result<bool> {
    Ok(m >= WIDE_MIN_M && k % 4 == 0 && matches!(super::gemm_pipeline(ctx, format, m, k)?, Some(MmPipeline::GemmMatrix { .. })))
}

/// The second pass's pipeline for `m` rows of `w` in `ctx` (see the module docs), or `None`
/// where [`gemm_staged`] runs the one-pass GEMM.
pub fn staged_pipeline(ctx: &Context, w: &WeightMatrix, m: usize, scratch: &GemmScratch) -> Result<Option<MmPipeline>> {
    if !applies(ctx, w.format, m, w.k)? {
        return Ok(None);
    }
    let rows = w.chunks.iter().map(|c| c.rows).max().unwrap_or(0);
    let caps = ctx.caps();
    let [wide, half] = WIDE_TILES;
    let first = if m.div_ceil(wide.tm()) * rows.div_ceil(wide.tn()) >= WIDE_MIN_TILES { wide } else { half };
    // A tuned tile (`Tuning::gemm_tile`) first, where its steps divide the padded row length.
    let tuned = ctx.options().tuning.gemm_tile.map(|[sgm, sgn, mi, nj, tk]| MatrixTile { sgm, sgn, mi, nj, tk }).filter(|t| TK % t.tk() == 0);
    for tile in tuned.into_iter().chain([first, half]) {
        // The scratch holds the operands padded to this tile's rows.
        let fits = |r: usize, n: usize, len: usize| -> Result<bool> { Ok(round_up(r, n)?.checked_mul(round_up(w.k, TK)?).is_some_and(|v| v <= len)) };
        if !fits(m, tile.tm(), scratch.x.len())? || !fits(rows, tile.tn(), scratch.w.len())? {
            continue;
        }
        if tile.bytes() > caps.limits.max_compute_workgroup_storage_size as usize {
            continue;
        }
        if let Ok(sg) = matrix_support_with(caps, tile.subgroups()) {
            return Ok(Some(MmPipeline::GemmWide { sg, tile }));
        }
    }
    Ok(None)
}

/// `y = x W^T` for `m` input rows as [`super::gemm`] computes it (same outputs, layout and
/// numerics), through the two-pass Matrix GEMM where it applies ([`staged_pipeline`]; module
/// docs), else through [`super::gemm`]. `scratch` is overwritten.
pub fn gemm_staged(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize, scratch: &GemmScratch) -> Result<()> {
    let ctx = b.context();
    let Some(key @ MmPipeline::GemmWide { tile, .. }) = staged_pipeline(ctx, w, m, scratch)? else {
        return gemm(b, w, x, y, m);
    };
    super::check_gemm(w, x, y, m)?;
    let kp = round_up(w.k, TK)?;
    let (tm, tn) = (tile.tm(), tile.tn());
    // x rows padded to whole tiles (the scratch holds them: `staged_pipeline`).
    let rows = round_up(m, tm)?;
    widen_x(b, x, m, w.k, rows, scratch)?;
    for c in &w.chunks {
        let n_pad = widen_chunk(b, w, c, tn, scratch)?;
        let tiles_m = rows / tm;
        let tiles = tiles_m * (n_pad / tn);
        let p = Wide {
            m: m as u32,
            n: c.rows as u32,
            kp4: (kp / 4) as u32,
            steps: (kp / tile.tk()) as u32,
            ldy: w.n as u32,
            y_off: c.row0 as u32,
            tiles_m: tiles_m as u32,
            tiles: tiles as u32,
        };
        b.dispatch(&key, &p, &[scratch.x.raw(), scratch.w.raw(), y.raw()], b.context().grid(tiles as u64)?)?;
    }
    Ok(())
}

/// The first pass over x (`m` rows of `k`), into `rows` padded rows of the scratch.
fn widen_x(b: &mut Batch, x: &GpuBuffer<f32>, m: usize, k: usize, rows: usize, scratch: &GemmScratch) -> Result<()> {
    let kp4 = round_up(k, TK)? / 4;
    let p = WidenX { m: m as u32, k4: (k / 4) as u32, rows: rows as u32, kp4: kp4 as u32 };
    let grid = b.context().grid(((rows * kp4) as u64).div_ceil(64))?;
    b.dispatch(&MmPipeline::WidenX, &p, &[x.raw(), scratch.x.raw()], grid)
}

/// The first pass over chunk `c` of `w`, its rows padded to a multiple of `tn`: returns them.
fn widen_chunk(b: &mut Batch, w: &WeightMatrix, c: &super::Chunk, tn: usize, scratch: &GemmScratch) -> Result<usize> {
    let n_pad = round_up(c.rows, tn)?;
    let runs = round_up(w.k, TK)? / 32;
    let p = super::Params { m: n_pad as u32, items: runs as u32, ..w.params(c) };
    let grid = b.context().grid(((n_pad * runs) as u64).div_ceil(64))?;
    b.dispatch(&MmPipeline::Widen { format: Fmt(w.format) }, &p, &[c.data.raw(), scratch.w.raw()], grid)?;
    Ok(n_pad)
}

/// Test kit: the first pass alone, as [`gemm_staged`] records it for `tile`, over x (`m` rows)
/// and the first chunk of `w`. Returns (padded row length, padded x rows, padded weight rows).
#[cfg(feature = "testkit")]
pub fn widen(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, m: usize, tile: MatrixTile, scratch: &GemmScratch) -> Result<(usize, usize, usize)> {
    ensure(w.k % 4 == 0 && m > 0, || Error::Argument("widen: k % 4 != 0 or m = 0".into()))?;
    let (kp, rows) = (round_up(w.k, TK)?, round_up(m, tile.tm())?);
    let c = &w.chunks[0];
    let n_pad = round_up(c.rows, tile.tn())?;
    ensure(padded(m, w.k)? <= scratch.x.len() && padded(n_pad, w.k)? <= scratch.w.len(), || Error::Argument("widen: scratch too small".into()))?;
    x.require("x", m.checked_mul(w.k).ok_or_else(|| Error::Shape("m * k overflows".into()))?)?;
    widen_x(b, x, m, w.k, rows, scratch)?;
    widen_chunk(b, w, c, tile.tn(), scratch)?;
    Ok((kp, rows, n_pad))
}

/// Test kit: the scratch's buffers (x, weights).
#[cfg(feature = "testkit")]
pub fn scratch_buffers(s: &GemmScratch) -> (&GpuBuffer<f16>, &GpuBuffer<f16>) {
    (&s.x, &s.w)
}

/// The format-independent pipelines of the two-pass GEMM for the shader checks: the first pass
/// over x and every tile of the second at subgroup sizes 32 and 64 (each format's GEMM lists its
/// first weight pass).
#[cfg(feature = "testkit")]
pub fn shared_pipelines() -> Vec<MmPipeline> {
    let mut v = vec![MmPipeline::WidenX];
    v.extend([32, 64].iter().flat_map(|&sg| WIDE_TILES.iter().map(move |&tile| MmPipeline::GemmWide { sg, tile })));
    v
}

/// The params twins of the two-pass pipelines (the first weight pass binds the family's params).
#[cfg(all(test, feature = "testkit"))]
pub(super) fn params_twins(pipelines: &[(String, PipelineDesc)]) -> Vec<crate::kernels::ParamsTwin> {
    let of = |name: &str| pipelines.iter().filter(|(l, _)| l.split(|c: char| !c.is_alphanumeric()).next() == Some(name)).cloned().collect();
    vec![crate::kernels::params_twin!(Wide, of("GemmWide")), crate::kernels::params_twin!(WidenX, of("WidenX"))]
}
