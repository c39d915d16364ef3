//! [`Tuning`]: overrides of the kernels' launch plans, for tuning on a new GPU or comparing an
//! optimisation with the code path it replaced. Every field defaults to "use the measured
//! default"; a context reads its tuning once, when it is made ([`crate::ContextOptions::tuning`]),
//! so no kernel reads the environment while recording.
//!
//! [`Tuning::from_env`] (called by [`crate::ContextOptions::from_env`]) fills the fields from
//! `WGKERNELS_*` environment variables; a value that does not parse or is out of range is an
//! [`Error::Argument`] naming the variable. Values set in code that are out of range are ignored
//! where the plan is made (the default is used), so a plan is always one the kernels accept.
//!
//! ```
//! use wgkernels::{ContextOptions, Tuning};
//! let tuning = Tuning { decode_workgroups: Some(264), rope_vec: false, ..Tuning::default() };
//! let options = ContextOptions::default().with_tuning(tuning);
//! assert_eq!(options.tuning.decode_workgroups, Some(264));
//! ```

use crate::error::{Error, Result};

/// Overrides of a team kernel's launch plan (each `None` = the kernel's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemvTuning {
    /// Invocations per workgroup: 64, 128 or 256.
    pub wg: Option<u32>,
    /// Rows per team: 1, 2 or 4.
    pub rows: Option<u32>,
    /// Vector steps per lane and iteration: 1, 2 or 4.
    pub unroll: Option<u32>,
    /// Subgroup variant: 1 = subgroup teams, 0 = workgroup teams.
    pub team: Option<u32>,
    /// Portable variant: lanes per team, a power of two in 8..=256 (at most `wg`).
    pub planes: Option<u32>,
}

impl GemvTuning {
    fn from_vars(var: Var, prefix: &str) -> Result<GemvTuning> {
        let one_of = |name: &str, ok: &'static [u32]| env_u32(var, &format!("{prefix}_{name}"), move |v| ok.contains(&v));
        Ok(GemvTuning {
            wg: one_of("WG", &[64, 128, 256])?,
            rows: one_of("ROWS", &[1, 2, 4])?,
            unroll: one_of("UNROLL", &[1, 2, 4])?,
            team: one_of("TEAM", &[0, 1])?,
            planes: one_of("PLANES", &[8, 16, 32, 64, 128, 256])?,
        })
    }
}

/// Launch-plan overrides (see the module docs). `Tuning::default()` is what every measurement in
/// BENCHMARKS.md used.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Decode attention (Subgroup teams kernel): invocations per workgroup, a power of two in
    /// 64..=1024 (`WGKERNELS_DECODE_WG`).
    pub decode_wg: Option<usize>,
    /// Decode: most lanes per team, a power of two <= 128 (`WGKERNELS_DECODE_LANES`).
    pub decode_lanes: Option<usize>,
    /// Decode: keys per team and step, 1..=8 (`WGKERNELS_DECODE_KEYS`).
    pub decode_keys: Option<usize>,
    /// Decode: issue the next step's loads before this step's math (`WGKERNELS_DECODE_PF` 0/1).
    pub decode_prefetch: Option<bool>,
    /// Decode: most query heads per workgroup, 1..=8 (`WGKERNELS_DECODE_GB`).
    pub decode_gb: Option<usize>,
    /// Decode (teams, Native and Matrix kernels): the workgroups the key split aims for,
    /// 1..=65536 (`WGKERNELS_DECODE_WGS`; default 528).
    pub decode_workgroups: Option<usize>,
    /// Decode (teams kernel): fewest keys per chunk, at every context length, <= 2^20
    /// (`WGKERNELS_DECODE_MINCHUNK`).
    pub decode_min_chunk: Option<usize>,
    /// Decode: partial rows the merge pass keeps in flight, 1..=8 (`WGKERNELS_DECODE_MERGE_U`).
    pub decode_merge_unroll: Option<usize>,
    /// Decode (Matrix kernel): subgroups per workgroup, 1..=4 (`WGKERNELS_DECODE_NW`).
    pub decode_matrix_subgroups: Option<usize>,
    /// Prefill (Matrix kernel): log2 headroom of the online softmax, 0..=14
    /// (`WGKERNELS_PREFILL_TAU`; default 8).
    pub prefill_tau: Option<f32>,
    /// TurboQuant decode attention: positions per split, 64..=512 (`WGKERNELS_TQ_SPLIT`).
    pub tq_split: Option<usize>,
    /// RoPE: whole-vector mode where the layout allows (`WGKERNELS_ROPE_VEC=0` turns it off).
    pub rope_vec: bool,
    /// Elementwise ops: whole vec4s where the length allows (`WGKERNELS_ELEMENTWISE_VEC=0`).
    pub elementwise_vec: bool,
    /// Small-m GEMM: split-K (`WGKERNELS_GEMM_SPLIT=0` turns it off).
    pub gemm_split: bool,
    /// Matrix GEMM: the tile at every m, `sgm,sgn,mi,nj,tk` (`WGKERNELS_GEMM_TILE`, e.g.
    /// `2,4,4,2,64`: 2 x 4 subgroups of 4 x 2 16x16 accumulators, 64-column K steps; sgm, sgn,
    /// mi, nj in 1..=8 with sgm·sgn <= 16 and mi·nj <= 16, tk 32 or 64), the one-pass and the
    /// two-pass kernel alike. A tile the adapter cannot hold (or, two-pass, the scratch padded
    /// to it) falls back to the default choice.
    pub gemm_tile: Option<[u32; 5]>,
    /// Matrix GEMM: the workgroups split-K aims for, 1..=65536 (`WGKERNELS_GEMM_WGS`; default
    /// 528 for 4-subgroup tiles, 264 above).
    pub gemm_workgroups: Option<usize>,
    /// The GEMV plan of every weight format, f32 or int8 activations (`WGKERNELS_GEMV_WG`,
    /// `_ROWS`, `_UNROLL`, `_TEAM`, `_PLANES`).
    pub gemv: GemvTuning,
    /// GEMM of a few rows on int8 activations, `matmul::gemm_q8` (`WGKERNELS_Q8GEMM_*`).
    pub gemm_q8: GemvTuning,
    /// Testing aid (`testkit` feature): the Portable / Subgroup prefill's tiles `[rows, keys]`
    /// at every shape, where they fit the adapter's workgroup memory, e.g. a Native prefill's
    /// twin tiles, which its own plan never picks.
    #[cfg(feature = "testkit")]
    pub prefill_tiles: Option<[u32; 2]>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            decode_wg: None,
            decode_lanes: None,
            decode_keys: None,
            decode_prefetch: None,
            decode_gb: None,
            decode_workgroups: None,
            decode_min_chunk: None,
            decode_merge_unroll: None,
            decode_matrix_subgroups: None,
            prefill_tau: None,
            tq_split: None,
            rope_vec: true,
            elementwise_vec: true,
            gemm_split: true,
            gemm_tile: None,
            gemm_workgroups: None,
            gemv: GemvTuning::default(),
            gemm_q8: GemvTuning::default(),
            #[cfg(feature = "testkit")]
            prefill_tiles: None,
        }
    }
}

/// `value` if `ok` accepts it (the check made where a plan is built).
pub(crate) fn accepted<T: Copy>(value: Option<T>, ok: impl Fn(T) -> bool) -> Option<T> {
    value.filter(|&v| ok(v))
}

/// Where the variables come from: the environment, or a table in the tests.
type Var<'a> = &'a dyn Fn(&str) -> Option<String>;

fn env_parsed<T: std::str::FromStr>(var: Var, name: &str, ok: impl Fn(&T) -> bool, expect: &str) -> Result<Option<T>> {
    let Some(text) = var(name) else { return Ok(None) };
    if text.is_empty() {
        return Ok(None);
    }
    match text.trim().parse::<T>() {
        Ok(v) if ok(&v) => Ok(Some(v)),
        _ => Err(Error::Argument(format!("{name}={text}: expected {expect}"))),
    }
}

fn env_usize(var: Var, name: &str, ok: impl Fn(usize) -> bool) -> Result<Option<usize>> {
    env_parsed(var, name, |&v| ok(v), "a value in the documented range (see wgkernels::Tuning)")
}

fn env_u32(var: Var, name: &str, ok: impl Fn(u32) -> bool) -> Result<Option<u32>> {
    env_parsed(var, name, |&v| ok(v), "a value in the documented range (see wgkernels::Tuning)")
}

/// A Matrix GEMM tile `sgm,sgn,mi,nj,tk` (see [`Tuning::gemm_tile`]).
fn env_tile(var: Var, name: &str) -> Result<Option<[u32; 5]>> {
    let Some(text) = var(name).filter(|t| !t.is_empty()) else { return Ok(None) };
    let v: Vec<u32> = text.split(',').map(|p| p.trim().parse::<u32>()).collect::<std::result::Result<_, _>>().unwrap_or_default();
    let ok = |a: u32, b: u32| (1..=8).contains(&a) && (1..=8).contains(&b) && a * b <= 16;
    match v[..] {
        [sgm, sgn, mi, nj, tk] if ok(sgm, sgn) && ok(mi, nj) && (tk == 32 || tk == 64) => Ok(Some([sgm, sgn, mi, nj, tk])),
        _ => Err(Error::Argument(format!("{name}={text:?}: expected sgm,sgn,mi,nj,tk (1..=8 each, sgm·sgn and mi·nj <= 16, tk 32 or 64)"))),
    }
}

/// An on/off switch: `0` off, `1` on, unset = `default`.
fn env_switch(var: Var, name: &str, default: bool) -> Result<bool> {
    Ok(env_parsed::<u32>(var, name, |&v| v <= 1, "0 or 1")?.map_or(default, |v| v == 1))
}

impl Tuning {
    /// Range checks shared by the environment parser and the plans.
    pub(crate) fn pow2_in(v: usize, lo: usize, hi: usize) -> bool {
        v.is_power_of_two() && (lo..=hi).contains(&v)
    }

    /// The defaults with every `WGKERNELS_*` tuning variable that is set applied.
    pub fn from_env() -> Result<Tuning> {
        Self::from_vars(&|name| std::env::var(name).ok())
    }

    /// [`Tuning::from_env`] over any source of variables.
    fn from_vars(var: Var) -> Result<Tuning> {
        Ok(Tuning {
            decode_wg: env_usize(var, "WGKERNELS_DECODE_WG", |v| Self::pow2_in(v, 64, 1024))?,
            decode_lanes: env_usize(var, "WGKERNELS_DECODE_LANES", |v| Self::pow2_in(v, 1, 128))?,
            decode_keys: env_usize(var, "WGKERNELS_DECODE_KEYS", |v| (1..=8).contains(&v))?,
            decode_prefetch: env_parsed::<u32>(var, "WGKERNELS_DECODE_PF", |&v| v <= 1, "0 or 1")?.map(|v| v == 1),
            decode_gb: env_usize(var, "WGKERNELS_DECODE_GB", |v| (1..=8).contains(&v))?,
            decode_workgroups: env_usize(var, "WGKERNELS_DECODE_WGS", |v| (1..=1 << 16).contains(&v))?,
            decode_min_chunk: env_usize(var, "WGKERNELS_DECODE_MINCHUNK", |v| v <= 1 << 20)?,
            decode_merge_unroll: env_usize(var, "WGKERNELS_DECODE_MERGE_U", |v| (1..=8).contains(&v))?,
            decode_matrix_subgroups: env_usize(var, "WGKERNELS_DECODE_NW", |v| (1..=4).contains(&v))?,
            prefill_tau: env_parsed::<f32>(var, "WGKERNELS_PREFILL_TAU", |t| (0.0..=14.0).contains(t), "a number in 0..=14")?,
            tq_split: env_usize(var, "WGKERNELS_TQ_SPLIT", |v| (64..=512).contains(&v))?,
            rope_vec: env_switch(var, "WGKERNELS_ROPE_VEC", true)?,
            elementwise_vec: env_switch(var, "WGKERNELS_ELEMENTWISE_VEC", true)?,
            gemm_split: env_switch(var, "WGKERNELS_GEMM_SPLIT", true)?,
            gemm_tile: env_tile(var, "WGKERNELS_GEMM_TILE")?,
            gemm_workgroups: env_usize(var, "WGKERNELS_GEMM_WGS", |v| (1..=1 << 16).contains(&v))?,
            gemv: GemvTuning::from_vars(var, "WGKERNELS_GEMV")?,
            gemm_q8: GemvTuning::from_vars(var, "WGKERNELS_Q8GEMM")?,
            #[cfg(feature = "testkit")]
            prefill_tiles: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_drops_out_of_range() {
        assert_eq!(accepted(Some(3usize), |v| v <= 4), Some(3));
        assert_eq!(accepted(Some(5usize), |v| v <= 4), None);
        assert_eq!(accepted(None::<usize>, |v| v <= 4), None);
        assert!(Tuning::pow2_in(128, 64, 1024) && !Tuning::pow2_in(96, 64, 1024) && !Tuning::pow2_in(2048, 64, 1024));
    }

    fn vars(table: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| table.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn variables_parse_and_bad_values_name_the_variable() {
        let t = Tuning::from_vars(&vars(&[("WGKERNELS_DECODE_WGS", "264"), ("WGKERNELS_ROPE_VEC", "0"), ("WGKERNELS_GEMV_ROWS", "4"), ("WGKERNELS_DECODE_PF", "1")])).unwrap();
        assert_eq!(t.decode_workgroups, Some(264));
        assert!(!t.rope_vec && t.elementwise_vec);
        assert_eq!(t.gemv.rows, Some(4));
        assert_eq!(t.decode_prefetch, Some(true));
        let t = Tuning::from_vars(&vars(&[("WGKERNELS_GEMM_TILE", "4, 2,4,2,32"), ("WGKERNELS_GEMM_WGS", "132")])).unwrap();
        assert_eq!((t.gemm_tile, t.gemm_workgroups), (Some([4, 2, 4, 2, 32]), Some(132)));
        assert_eq!(Tuning::from_vars(&vars(&[])).unwrap(), Tuning::default());
        for (name, value) in [
            ("WGKERNELS_DECODE_WG", "96"),
            ("WGKERNELS_DECODE_KEYS", "x"),
            ("WGKERNELS_GEMM_SPLIT", "2"),
            ("WGKERNELS_PREFILL_TAU", "15"),
            ("WGKERNELS_Q8GEMM_WG", "512"),
            ("WGKERNELS_GEMM_TILE", "2,4,4,2,48"),
            ("WGKERNELS_GEMM_TILE", "4,8,2,2,64,1"),
        ] {
            let table: &'static [(&'static str, &'static str)] = Box::leak(vec![(name, value)].into_boxed_slice());
            let e = Tuning::from_vars(&vars(table)).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(value), "{e}");
        }
    }

    #[test]
    fn defaults_turn_every_optimisation_on() {
        let t = Tuning::default();
        assert!(t.rope_vec && t.elementwise_vec && t.gemm_split);
        assert_eq!(t.decode_workgroups, None);
        assert_eq!(t.gemv, GemvTuning::default());
    }
}
