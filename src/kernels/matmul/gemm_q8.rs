//! The GEMM of a few input rows on int8 activations ([`gemm_q8`]): `y[m, n] = x_q8[m, k] W^T`
//! for `m <= GEMM_Q8_MAX_M`, as one multi-row GEMV. Each weight item (a 64-column quad) is loaded
//! once per dispatch and multiplied with the int8 codes of every activation row by the format's
//! integer dot (`fmt_qload` / `fmt_qdot`, the parts that give `gemv_q8` its integer path: Q4_K,
//! Q6_K, Q8_0, Q4_0), so the weights are read once, not once per row; each output is exactly what
//! [`super::gemv_q8`] computes for that row (same dot, same order of the lane sums up to the
//! team's reduction). The activations of all rows are quantised by one dispatch
//! ([`crate::kernels::q8::quantize_rows`] into a [`Q8Activations`] of several rows).
//!
//! Plan: the int8 GEMV's teams (a subgroup, or 32 lanes of a Portable workgroup) of `ROWS`
//! weight rows, `slots * ROWS` f32 accumulators per lane, where `slots` ([`gemm_q8_slots`]) is
//! `m` rounded up to a power of two and compiled in; the live `m` is a uniform runtime value, so
//! a format has at most five pipelines (1, 2, 4, 8, 16 slots), not one per `m`.
//! Defaults (swept on an H200 for Q4_K 4096 x 4096, before the slots, see docs/PERFORMANCE.md):
//! 4 weight rows per team (each activation record loaded once serves 4 rows: the records, 128
//! bytes per row and quad, are most of what a lane reads), two quads per lane in flight up to 8
//! slots and one above (at 16 two would need 64 accumulators plus two slabs, and spill);
//! `WGKERNELS_Q8GEMM_WG` / `_ROWS` / `_UNROLL` / `_TEAM` / `_PLANES` override them
//! ([`crate::Tuning::gemm_q8`]; the plan: [`gemm_q8_plan`]).
//! Source: wgsl/mm_gemm_q8.wgsl (+ team_*.wgsl, mm_common.wgsl, the format part and the row
//! driver mm_rows.wgsl).

use super::*;

/// Most input rows one [`gemm_q8`] takes.
pub const GEMM_Q8_MAX_M: usize = 16;

const GEMM_Q8_WGSL: &str = include_str!("../../../wgsl/mm_gemm_q8.wgsl");

/// The accumulator slots compiled into the pipeline that multiplies `m` rows: `m` rounded up to
/// a power of two.
pub fn gemm_q8_slots(m: usize) -> u32 {
    m.clamp(1, GEMM_Q8_MAX_M).next_power_of_two() as u32
}

/// The pipeline of [`MmPipeline::GemmQ8`].
pub(super) fn desc(format: Fmt, variant: Variant, plan: GemvPlan, slots: u32, params_size: u64) -> PipelineDesc {
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![team_source(variant), COMMON_WGSL, GEMM_Q8_WGSL, format.0.wgsl, ROWS_WGSL]),
        entry: "main",
        constants: plan.constants(variant, &[("MR", slots as f64)]),
        workgroup_size: [plan.wg, 1, 1],
        params_size,
        bindings: GEMV_QK_BINDINGS,
    }
}

/// `y[a * n + r] = sum_c w[r, c] x_q8[a, c]` for the first `m` rows of `xq` (`1 <= m <=
/// min(GEMM_Q8_MAX_M, xq.rows())`, `xq.k() == k`, `k % 256 == 0`; `y` row-major `[m, n]`): row
/// by row what [`super::gemv_q8`] computes (numerics of `reference::q8`, test kit: x rounded to
/// 8 bits per block of 32). Only formats with an integer dot ([`has_integer_dot`]) run it,
/// others return [`Error::Unsupported`]; quantise x with
/// [`crate::kernels::q8::quantize_rows`] first.
pub fn gemm_q8(b: &mut Batch, w: &WeightMatrix, xq: &Q8Activations, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    let ctx = b.context();
    let info = &kernel_infos(w.format).gemm_q8;
    ensure((1..=GEMM_Q8_MAX_M).contains(&m), || Error::Shape(format!("gemm_q8 multiplies 1..={GEMM_Q8_MAX_M} rows, m = {m}")))?;
    ensure(m <= xq.rows(), || Error::Shape(format!("gemm_q8 of m = {m} rows: the q8 activations hold {}", xq.rows())))?;
    ensure(xq.k() == w.k, || Error::Shape(format!("q8 activations have k = {}, the matrix k = {}", xq.k(), w.k)))?;
    let xk = xq.q4k_words().ok_or_else(|| Error::Shape(format!("gemm_q8 needs k % 256 == 0 (the quad order of the activations), k = {}", w.k)))?;
    let mn = m.checked_mul(w.n).filter(|&v| v <= u32::MAX as usize).ok_or_else(|| Error::Shape(format!("m = {m} rows of n = {} outputs exceed u32 indices", w.n)))?;
    y.require("y", mn)?;
    let variant = ctx.variant_for(info)?;
    ensure(has_integer_dot(w.format), || Error::Unsupported { kernel: info.name, variant, reason: format!("format {} has no integer dot (fmt_qdot)", w.format.name) })?;
    let xs = u32::try_from(xq.quads()).map_err(|_| Error::Shape(format!("{} activation quads exceed u32", xq.quads())))?;
    let slots = gemm_q8_slots(m);
    let plan = gemm_q8_plan(ctx.caps(), variant, slots as usize);
    let key = MmPipeline::GemmQ8 { format: Fmt(w.format), variant, plan, slots };
    for c in &w.chunks {
        let grid = plan_grid(ctx, &plan, c.rows, variant)?;
        // Items are quads (k % 256 == 0, checked through xk above).
        let params = Params { m: m as u32, items: (w.k / 64) as u32, xs, ..w.params(c) };
        b.dispatch(&key, &params, &[c.data.raw(), xk.raw(), y.raw()], grid)?;
    }
    Ok(())
}
