//! The Matrix variant of the decode's split-K partial pass (wgsl/attn_decode_matrix.wgsl):
//! Q K^T and P V on 16x16x16 cooperative matrices with f16 inputs and f32 accumulation, for f16
//! K/V caches. A workgroup of NW subgroups takes one KV head, up to 8 query heads of its group and
//! one chunk of keys, staged through workgroup memory in blocks of 16 NW keys, and writes the same
//! partial rows as the other variants (the append and merge passes are shared).
//!
//! Numerics: the query and the probabilities are each split into two f16 parts (hi + lo, rows
//! g and GB + g of the 16-row A operand), so the products carry about 22 bits of q and P; K and V
//! are f16 exactly; every sum is f32. The kernel meets the f32-arithmetic variants' tolerance.
//!
//! What it needs, beyond [`Caps::variant_support`] for [`Variant::Matrix`](crate::Variant::Matrix): the adapter's
//! 16x16x16 f16 x f16 -> f32 configuration and one subgroup size, a multiple of 16 (as the Matrix
//! prefill; see `prefill_matrix::matrix_support_with`). Per decode: an f16 cache, head_dim a
//! multiple of 16 up to 256, at least 16 keys, and the chunk's scores within the workgroup-memory
//! limit. Anything else falls back to the best other decode variant under `Auto` / `Prefer`, and
//! is an [`crate::Error::Unsupported`] under `Require(Matrix)`.

use super::decode::split;
use super::{unrolled, AttnShape, DecodeParams, DecodePlan, DECODE_BINDINGS_F16};
use crate::caps::Caps;
use crate::pipeline::{PipelineDesc, ShaderSource};
use crate::tuning::accepted;

pub(super) const DECODE_MATRIX_WGSL: &str = include_str!("../../../wgsl/attn_decode_matrix.wgsl");

const CM: usize = 16;
/// Most query heads per workgroup: 2 GB rows (hi and lo) of the 16-row A operand.
const GB_MAX: usize = 8;
/// Largest head_dim (ND = 16 accumulators of O per lane).
const D_MAX: usize = 256;

/// Subgroups per workgroup: 4 ([`crate::Tuning::decode_matrix_subgroups`] 1..4 overrides).
fn subgroups(caps: &Caps) -> usize {
    accepted(caps.tuning.decode_matrix_subgroups, |v| (1..=4).contains(&v)).unwrap_or(4)
}

/// Workgroups the split aims for: 528, 4 per SM of a 132-SM GPU
/// ([`crate::Tuning::decode_workgroups`] overrides, as for the teams kernel).
fn target_workgroups(caps: &Caps) -> usize {
    accepted(caps.tuning.decode_workgroups, |v| (1..=1 << 16).contains(&v)).unwrap_or(528)
}

/// 8-byte loads per invocation and block: 16 NW keys x D / 4 vectors over NW x SG invocations.
fn cpt(d: usize, sg: usize) -> usize {
    (CM * d / 4).div_ceil(sg)
}

/// Most loads per invocation and block (the kernel's register array).
const CPT_MAX: usize = 32;

/// Workgroup memory of the kernel: the staged block (or Q rows), the chunk's scores, NW S and P
/// tiles, per-head values and sums.
fn bytes(d: usize, gb: usize, maxc: usize, nw: usize) -> usize {
    2 * (CM * nw).max(CM) * (d + 8) + 4 * gb * maxc + (4 + 2) * 256 * nw + 4 * 2 * GB_MAX + 4 * 512 + 4 * 64
}

/// The Matrix plan of a decode over `kv_len` keys, or why this decode can't take it.
///
/// Chunks as for the teams kernel ([`super::decode_plan`]'s split: about `target_workgroups`
/// workgroups, at most `MAX_CHUNKS` chunks per head block), in whole blocks of 16 NW keys; the
/// score store is sized for the chunk rounded up to a power of two (so few pipelines serve all
/// lengths).
pub fn matrix_plan(caps: &Caps, s: &AttnShape, kv_f16: bool, kv_len: usize) -> Result<DecodePlan, String> {
    let sg = super::prefill_matrix::matrix_support_with(caps, 1)?;
    s.validate().map_err(|e| e.to_string())?;
    if kv_len == 0 || u32::try_from(kv_len).is_err() {
        return Err(format!("kv_len = {kv_len} outside 1..2^32"));
    }
    let d = s.head_dim;
    if !kv_f16 {
        return Err("the Matrix decode reads f16 caches (its products take f16 K and V); an f32 cache takes the Subgroup kernel".into());
    }
    if d % CM != 0 || d > D_MAX {
        return Err(format!("head_dim {d} is not a multiple of {CM} up to {D_MAX}"));
    }
    if kv_len < CM {
        return Err(format!("kv_len {kv_len} is under one tile of {CM} keys"));
    }
    let gblocks = s.group().div_ceil(GB_MAX);
    let gb = s.group().div_ceil(gblocks);
    let nw = subgroups(caps);
    let (chunk, nchunks) = split(kv_len, s.kv_heads * gblocks, target_workgroups(caps), CM * nw, CM * nw);
    let maxc = chunk.next_power_of_two();
    let mem = caps.limits.max_compute_workgroup_storage_size as usize;
    if bytes(d, gb, maxc, nw) > mem {
        return Err(format!("{} bytes of workgroup memory for {chunk}-key chunks, the adapter has {mem}", bytes(d, gb, maxc, nw)));
    }
    if cpt(d, sg as usize) > CPT_MAX {
        return Err(format!("head_dim {d} needs {} loads per invocation and block", cpt(d, sg as usize)));
    }
    Ok(DecodePlan {
        teams: false,
        native: false,
        matrix: Some(MatrixPlan { sg: sg as usize, nw, maxc }),
        wg: sg as usize * nw,
        gb,
        tile: CM,
        lanes: sg as usize,
        keys: CM,
        prefetch: false,
        chunk,
        nchunks,
        gblocks,
    })
}

/// What the Matrix pipeline is built for, beyond the plan's common fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixPlan {
    /// The adapter's subgroup size (= invocations per workgroup).
    pub sg: usize,
    /// Subgroups per workgroup (keys per block: 16 nw).
    pub nw: usize,
    /// Keys the score store holds (>= the chunk).
    pub maxc: usize,
}

pub(super) fn matrix_desc(d: u32, gb: u32, sg: u32, nw: u32, maxc: u32) -> PipelineDesc {
    let nd = (d as usize / CM).clamp(1, D_MAX / CM);
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![unrolled(DECODE_MATRIX_WGSL, &[("ND", "{k}", nd)]), super::SOFTCAP_WGSL]),
        entry: "main",
        constants: vec![("D", d as f64), ("GB", gb as f64), ("SG", sg as f64), ("NW", nw as f64), ("MAXC", maxc as f64)],
        workgroup_size: [sg * nw, 1, 1],
        params_size: std::mem::size_of::<DecodeParams>() as u64,
        bindings: DECODE_BINDINGS_F16,
    }
}

/// Matrix decode pipelines for the shader checks (nominal adapter: subgroup 32).
#[cfg(feature = "testkit")]
pub(super) fn sample_matrix_pipelines() -> Vec<super::AttnPipeline> {
    let caps = Caps::nominal();
    let mut v = Vec::new();
    for (h, kvh, d) in [(32, 8, 128), (8, 8, 64), (12, 1, 256), (16, 2, 80)] {
        for kv_len in [16, 4096, 100_000] {
            if let Ok(plan) = matrix_plan(&caps, &AttnShape::new(h, kvh, d), true, kv_len) {
                v.push(plan.key(d, true, true));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::MAX_CHUNKS;
    use super::*;

    #[test]
    fn unrolled_text() {
        let t = unrolled(DECODE_MATRIX_WGSL, &[("ND", "{k}", 3)]);
        assert!(!t.lines().any(|l| l.trim_start().starts_with("//@ND ")));
        assert!(t.contains("var o2 = ") && !t.contains("var o3 = "));
        assert!(std::ptr::eq(t, unrolled(DECODE_MATRIX_WGSL, &[("ND", "{k}", 3)])));
    }

    #[test]
    fn plans() {
        let caps = Caps::nominal();
        let s = AttnShape::new(32, 8, 128);
        let p = matrix_plan(&caps, &s, true, 32768).unwrap();
        assert_eq!((p.gb, p.gblocks, p.chunk, p.nchunks), (4, 1, 512, 64));
        assert!(matrix_plan(&caps, &s, false, 32768).is_err());
        assert!(matrix_plan(&caps, &s, true, 15).is_err());
        assert!(matrix_plan(&caps, &AttnShape::new(4, 4, 72), true, 100).is_err());
        // 12 heads per KV head: two blocks of 6.
        let p = matrix_plan(&caps, &AttnShape::new(12, 1, 256), true, 101).unwrap();
        assert_eq!((p.gb, p.gblocks, p.nchunks), (6, 2, 2));
        // Long caches: at most MAX_CHUNKS chunks, every chunk within the score store.
        for kv_len in [16, 17, 255, 256, 257, 65_536, 1 << 20] {
            match matrix_plan(&caps, &s, true, kv_len) {
                Ok(p) => {
                    let m = p.matrix.unwrap();
                    assert!(p.nchunks <= MAX_CHUNKS && p.chunk * p.nchunks >= kv_len && p.chunk * (p.nchunks - 1) < kv_len);
                    assert!(p.chunk <= m.maxc && p.chunk % (16 * m.nw) == 0, "kv {kv_len}");
                }
                Err(e) => assert!(kv_len >= 1 << 20, "kv {kv_len}: {e}"),
            }
        }
    }
}
