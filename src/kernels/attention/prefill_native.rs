//! The Native variant of the prefill (msl/attn_prefill.metal): flash attention on 8x8 simdgroup
//! matrices (`simdgroup_half8x8` operands, `simdgroup_float8x8` accumulators), for Apple GPUs,
//! which offer 8x8 matrix products where the Matrix variant needs 16x16.
//!
//! Plan: the Portable / Subgroup prefill's (one threadgroup = one KV head x [`NATIVE_BQ`] rows of
//! (query token, head of the GQA group), the same params and bindings, one dispatch, RoPE fused
//! into the tile loads), with 128 threads = 4 simdgroups of 8 rows each. Its WGSL twin is the
//! Subgroup prefill at BQ = 32 (with a BK of its own that fits the workgroup memory). Numerics:
//! those of the Matrix prefill (Q, K, V and P rounded to f16, f32 sums; error bound
//! `MATRIX_TOL`, test kit).
//!
//! One MSL entry point per head_dim (64, 128, 256); the K/V type (f32 or f16) and the pair layout
//! travel in the params' `flags` (the WGSL kernels take them as overrides, which MSL passthrough
//! cannot set). Other head dims have no entry point and run the Subgroup (else Portable) plan
//! under every policy, as the Native decode does.

use super::{prefill_tile_bytes, AttnPipeline};
use crate::caps::{Caps, Variant};
use crate::pipeline::{PipelineDesc, PipelineKey};

const PREFILL_MSL: &str = include_str!("../../../msl/attn_prefill.metal");

/// Rows (query token x query head of the group) per threadgroup (`BQ` in the MSL).
pub const NATIVE_BQ: usize = 32;

/// Head dims with Native entry points.
const NATIVE_DIMS: [usize; 3] = [64, 128, 256];

/// Entry point names, one per head dim of [`NATIVE_DIMS`]; the K/V type and the pair layout
/// travel in the params (`flags`).
const ENTRIES: [&str; 3] = ["attn_prefill_d64", "attn_prefill_d128", "attn_prefill_d256"];

/// The MSL entry point of the Native prefill for head_dim `d`, if it has one.
pub fn native_prefill_entry(d: usize) -> Option<&'static str> {
    NATIVE_DIMS.iter().position(|&x| x == d).map(|i| ENTRIES[i])
}

/// Every entry point: (head_dim, name).
pub fn native_entries() -> impl Iterator<Item = (usize, &'static str)> {
    NATIVE_DIMS.into_iter().zip(ENTRIES)
}

/// Workgroup memory the twin's tiles are sized for on Metal, where the twin is never built (the
/// nominal adapter's): the key then depends on the head dim only.
const TWIN_MEM: usize = 48 << 10;

/// Keys per tile of the twin (the Subgroup prefill at BQ = 32) for head_dim `d` on Metal.
fn twin_bk(d: usize) -> Option<usize> {
    [32, 16, 8, 4].into_iter().find(|&bk| prefill_tile_bytes(d, NATIVE_BQ, bk).is_some_and(|b| b <= TWIN_MEM))
}

/// The Native prefill's pipeline key for head_dim `d` and `rows` rows (tokens x group) on `caps`,
/// or why it has none (no entry point for this head dim and layout). The key carries its twin's
/// tiles: on Metal BQ = 32 ([`NATIVE_BQ`]); in SPIR-V twin mode (not Metal, where the twin is
/// what runs) the tiles the Subgroup prefill takes on this adapter ([`super::prefill_tiles`],
/// BQ <= 32). The MSL takes R = ceil(rows / row_blocks) <= 32 rows per threadgroup, so it runs
/// either plan.
pub(super) fn native_key(caps: &Caps, d: usize, kv_f16: bool, neox: bool, rows: usize) -> crate::Result<Result<AttnPipeline, String>> {
    if native_prefill_entry(d).is_none() {
        return Ok(Err(format!("no MSL entry point for head_dim {d}; it has 64, 128 and 256")));
    }
    let (bq, bk) = if caps.backend == wgpu::Backend::Metal {
        match twin_bk(d) {
            Some(bk) => (NATIVE_BQ, bk),
            None => return Ok(Err(format!("head_dim {d}: no twin tile"))),
        }
    } else {
        super::prefill_tiles(d, rows, caps.limits.max_compute_workgroup_storage_size as usize)?
    };
    Ok(Ok(AttnPipeline::PrefillNative { d: d as u32, bq: bq as u32, bk: bk as u32, kv_f16, neox }))
}

/// The Native pipeline: the MSL entry point, standing for its twin (the Subgroup prefill with the
/// key's tiles). A key made for a head dim without an entry point names none and fails to build
/// (falls back, never runs wrong).
pub(super) fn native_desc(d: u32, bq: u32, bk: u32, kv_f16: bool, neox: bool, caps: &Caps) -> PipelineDesc {
    let twin = twin_key(d, bq, bk, kv_f16, neox).describe(caps);
    PipelineDesc::native(PREFILL_MSL, native_prefill_entry(d as usize).unwrap_or("attn_prefill_no_entry_point"), twin)
}

fn twin_key(d: u32, bq: u32, bk: u32, kv_f16: bool, neox: bool) -> AttnPipeline {
    AttnPipeline::Prefill { variant: Variant::Subgroup, d, bq, bk, kv_f16, neox }
}

/// Every Native pipeline and its twin (for the shader and binding checks).
#[cfg(feature = "testkit")]
pub(super) fn sample_native_pipelines() -> Vec<AttnPipeline> {
    let metal = Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() };
    let mut v = Vec::new();
    for (d, _) in native_entries() {
        for (kv_f16, neox) in [(false, false), (false, true), (true, false), (true, true)] {
            if let Ok(Ok(key @ AttnPipeline::PrefillNative { bq, bk, .. })) = native_key(&metal, d, kv_f16, neox, 1 << 20) {
                v.push(twin_key(d as u32, bq, bk, kv_f16, neox));
                v.push(key);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_keys() {
        assert_eq!(native_entries().count(), ENTRIES.len());
        for (d, name) in native_entries() {
            assert_eq!(name, format!("attn_prefill_d{d}"));
            assert_eq!(native_prefill_entry(d), Some(name));
        }
        let metal = Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() };
        let twin =
            Caps { backend: wgpu::Backend::Vulkan, limits: crate::caps::KeyLimits { max_compute_workgroup_storage_size: 32 << 10, ..Caps::nominal().limits }, ..Caps::nominal() };
        for d in (2..=256).step_by(2) {
            for kv_f16 in [false, true] {
                for neox in [false, true] {
                    for rows in [1, 7, 33, 1000] {
                        let key = native_key(&metal, d, kv_f16, neox, rows).unwrap();
                        assert_eq!(key.is_ok(), NATIVE_DIMS.contains(&d), "d {d}");
                        if let Ok(AttnPipeline::PrefillNative { bq, bk, .. }) = key {
                            assert_eq!(bq as usize, NATIVE_BQ, "Metal: the MSL's full blocks");
                            assert!(prefill_tile_bytes(d, NATIVE_BQ, bk as usize).is_some_and(|b| b <= TWIN_MEM));
                        }
                        // Twin mode: the Subgroup prefill's own tiles on that adapter, BQ <= 32.
                        if let Ok(AttnPipeline::PrefillNative { bq, bk, .. }) = native_key(&twin, d, kv_f16, neox, rows).unwrap() {
                            assert_eq!((bq as usize, bk as usize), crate::kernels::attention::prefill_tiles(d, rows, 32 << 10).unwrap());
                            assert!(bq as usize <= NATIVE_BQ);
                        }
                    }
                }
            }
        }
    }
}
