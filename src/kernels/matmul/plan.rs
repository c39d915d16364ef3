//! Launch plans of the family's team kernels (the GEMVs and the int8 multi-row GEMM): the team
//! layout ([`team_source`]: wgsl/team_portable.wgsl or team_subgroup.wgsl), the plan of one
//! dispatch ([`GemvPlan`]), its pipeline constants and workgroup grid, and the tuning overrides
//! ([`crate::Tuning::gemv`] for every format's GEMV, [`crate::Tuning::gemm_q8`] for
//! [`super::gemm_q8`]).

use crate::caps::{Caps, Variant};
use crate::context::Context;
use crate::error::Result;
use crate::tuning::GemvTuning;

const TEAM_PORTABLE: &str = include_str!("../../../wgsl/team_portable.wgsl");
const TEAM_SUBGROUP: &str = include_str!("../../../wgsl/team_subgroup.wgsl");

/// The team prologue (entry point + `team_sum`) of a team kernel for `variant`.
pub(crate) fn team_source(variant: Variant) -> &'static str {
    match variant {
        Variant::Subgroup => TEAM_SUBGROUP,
        _ => TEAM_PORTABLE,
    }
}

/// Shape of a team dispatch (see wgsl/team_*.wgsl and the row driver wgsl/mm_rows.wgsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemvPlan {
    /// Invocations per workgroup.
    pub wg: u32,
    /// Rows per team (1..=4).
    pub rows: u32,
    /// Items per lane whose loads are issued together (1, 2 or 4).
    pub unroll: u32,
    /// Subgroup variant: 1 = a team is a subgroup, 0 = a team is the workgroup. Portable
    /// variant: invocations per team (a power of two dividing `wg`).
    pub team: u32,
}

impl GemvPlan {
    /// The pipeline constants of this plan for `variant` (the Native twin: Subgroup's), plus `extra`.
    pub(crate) fn constants(&self, variant: Variant, extra: &[(&'static str, f64)]) -> Vec<(&'static str, f64)> {
        let team = if variant == Variant::Portable { "TEAM_LANES" } else { "TEAM_SG" };
        let mut c = vec![("WG", self.wg as f64), ("ROWS", self.rows as f64), ("UNROLL", self.unroll as f64), (team, self.team as f64)];
        c.extend_from_slice(extra);
        c
    }

    /// Teams per workgroup, as far as the host can tell (Subgroup teams: the adapter's largest
    /// subgroup size; the kernels grid-stride, so a wrong guess costs speed, never correctness).
    fn teams_per_wg(&self, caps: &Caps, variant: Variant) -> u32 {
        match variant {
            Variant::Portable => (self.wg / self.team.max(1)).max(1),
            _ if self.team == 0 => 1,
            _ => (self.wg / caps.subgroup_max_size.clamp(1, 128)).max(1),
        }
    }

    /// `self` with the overrides of `t` applied (`wg`, `rows`, `unroll`, and `team` (Subgroup)
    /// or `planes` (Portable)); out-of-range values are ignored.
    pub fn tuned(self, t: &GemvTuning, variant: Variant) -> GemvPlan {
        let pick = |v: Option<u32>, ok: &[u32], default: u32| v.filter(|v| ok.contains(v)).unwrap_or(default);
        let wg = pick(t.wg, &[64, 128, 256], self.wg);
        GemvPlan {
            wg,
            rows: pick(t.rows, &[1, 2, 4], self.rows),
            unroll: pick(t.unroll, &[1, 2, 4], self.unroll),
            team: if variant == Variant::Portable { pick(t.planes, &[8, 16, 32, 64, 128, 256], self.team).min(wg) } else { pick(t.team, &[0, 1], self.team) },
        }
    }
}

/// The default GEMV plan of every format: 256 invocations, teams of 32 lanes (Portable) or one
/// subgroup. Subgroup teams: one row, one item per lane per iteration; Portable teams: two rows,
/// two items. (The GLU epilogues read (gate, up) row pairs and take two rows whatever the plan.)
/// Two rows and two items were fastest for a lone Q4_K GEMV on an H200; inside a decode step,
/// where every GEMV waits for the one before, more and shorter teams measured faster on an H200
/// (2026-11-28, GPU time per token; Llama-3-8B shape: 3.327 ms with two rows and two items, 3.130
/// with one row, 2.981 with one row and one item; Llama-3.2-1B shape: 1.195, 1.104, 1.046). The
/// Portable plan is unchanged (not measured).
pub fn default_plan(variant: Variant) -> GemvPlan {
    match variant {
        Variant::Portable => GemvPlan { wg: 256, rows: 2, unroll: 2, team: 32 },
        _ => GemvPlan { wg: 256, rows: 1, unroll: 1, team: 1 },
    }
}

/// The GEMV plan on `caps`: [`default_plan`] with [`crate::Tuning::gemv`] applied.
pub fn gemv_plan(caps: &Caps, variant: Variant) -> GemvPlan {
    default_plan(variant).tuned(&caps.tuning.gemv, variant)
}

/// The plan [`super::gemm_q8`] runs `m` rows with on `caps` as `variant` (defaults swept on an
/// H200 for Q4_K 4096 x 4096: 4 weight rows per team, two quads per lane in flight up to m = 8
/// and one above), with [`crate::Tuning::gemm_q8`] applied.
pub fn gemm_q8_plan(caps: &Caps, variant: Variant, m: usize) -> GemvPlan {
    let portable = variant == Variant::Portable;
    let default = GemvPlan { wg: if portable { 256 } else { 128 }, rows: 4, unroll: if m <= 8 { 2 } else { 1 }, team: if portable { 32 } else { 1 } };
    default.tuned(&caps.tuning.gemm_q8, variant)
}

/// The Native (MSL) GEMV plan for `rows` rows per threadgroup: one team per threadgroup of
/// 128 threads, one item per lane per step (the twin's `WG`, `ROWS`, `UNROLL`, `TEAM_SG`).
pub fn native_plan(rows: u32) -> GemvPlan {
    GemvPlan { wg: 128, rows, unroll: 1, team: 0 }
}

/// Workgroups for `plan` over `n` rows: one team per row block. (The kernels grid-stride, so any
/// grid is correct; capping it at a few workgroups per SM measured no faster on an H200.)
pub(crate) fn plan_grid(ctx: &Context, plan: &GemvPlan, n: usize, variant: Variant) -> Result<[u32; 3]> {
    let wgs = n.div_ceil(plan.rows as usize).div_ceil(plan.teams_per_wg(ctx.caps(), variant) as usize);
    ctx.grid(wgs as u64)
}
