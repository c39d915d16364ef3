//! The Matrix variant of the prefill: a staging pass (wgsl/attn_prefill_stage.wgsl) writes Q
//! (rotated, times scale * log2 e), K (rotated unless it comes rotated) and V as f16 into one
//! scratch buffer allocated per call; the attention kernel (wgsl/attn_prefill_matrix.wgsl) runs
//! Q K^T and P V on 16x16x16 cooperative matrices with f16 inputs and f32 accumulation, in one
//! pass over the keys with an online softmax whose O rescale is rare (see the kernel's notes).
//!
//! What it needs, beyond [`Caps::variant_support`] for [`Variant::Matrix`]:
//! * the adapter offers the 16x16x16 f16 x f16 -> f32 configuration (NVIDIA's Vulkan driver does;
//!   Apple GPUs offer 8x8 only, lavapipe none);
//! * one subgroup size (min == max), a power of two >= 16, with 4 subgroups per workgroup within
//!   the adapter's invocation limit: the kernel gives each subgroup 16 rows and is built for that
//!   size (and writes NaN if the driver ever runs it with another layout);
//! * per shape: `head_dim % 16 == 0` and the tiles within the workgroup-memory limit.
//!
//! A shape it cannot take falls back to the best other prefill variant under `Auto` / `Prefer`,
//! and is an [`crate::Error::Unsupported`] under `Require(Matrix)`.
//!
//! Numerics: Q (rotated, times scale * log2 e), K (rotated) and V are rounded to f16, and so are
//! the probabilities P = exp2(s - m) <= 2^TAU fed to the P V product (m the row's running
//! reference max); every sum is f32. The error bound the tests use is derived in `cases.rs`
//! (`MATRIX_TOL`).
//!
//! Knobs for tests and sweeps (read when the pipeline is chosen): `WGKERNELS_PREFILL_TAU`
//! (default 8; 0 rescales O whenever a row's max grows, which exercises the rescale path) and
//! `WGKERNELS_PREFILL_NSG` (4 or 8 subgroups = 64 or 128 rows per workgroup; default the
//! 4) and `WGKERNELS_PREFILL_MODE` (bit 0: stage K/V tiles by cooperative
//! load/store instead of vector copies; bit 1: load Q' straight from the scratch by coopLoadT
//! instead of through workgroup memory; default 0).

use super::{AttnPipeline, Prefill};
use crate::batch::Batch;
use crate::caps::{Caps, Variant};
use crate::error::{ensure, Error};
use crate::kernels::rope::Elem;
use crate::pipeline::{PipelineDesc, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};
use wgpu::CooperativeScalarType as Cst;

pub(super) const MATRIX_WGSL: &str = include_str!("../../../wgsl/attn_prefill_matrix.wgsl");
const STAGE_WGSL: &str = include_str!("../../../wgsl/attn_prefill_stage.wgsl");

/// Cooperative matrix size.
const CM: usize = 16;
/// Threads per workgroup of the staging pass.
const STAGE_WG: u32 = 256;
/// Default log2 headroom of the online softmax (P <= 2^TAU).
const TAU: f32 = 8.0;

/// `const ND: u32 = n;` / `const KPS: u32 = n;` lines for n in 1..=16: the kernel's
/// function-scope arrays of matrices need constant lengths, so these are appended to its text.
const ND_DECL: [&str; 16] = [
    "const ND: u32 = 1u;\n",
    "const ND: u32 = 2u;\n",
    "const ND: u32 = 3u;\n",
    "const ND: u32 = 4u;\n",
    "const ND: u32 = 5u;\n",
    "const ND: u32 = 6u;\n",
    "const ND: u32 = 7u;\n",
    "const ND: u32 = 8u;\n",
    "const ND: u32 = 9u;\n",
    "const ND: u32 = 10u;\n",
    "const ND: u32 = 11u;\n",
    "const ND: u32 = 12u;\n",
    "const ND: u32 = 13u;\n",
    "const ND: u32 = 14u;\n",
    "const ND: u32 = 15u;\n",
    "const ND: u32 = 16u;\n",
];
const CPT_DECL: [&str; 16] = [
    "const CPT: u32 = 1u;\n",
    "const CPT: u32 = 2u;\n",
    "const CPT: u32 = 3u;\n",
    "const CPT: u32 = 4u;\n",
    "const CPT: u32 = 5u;\n",
    "const CPT: u32 = 6u;\n",
    "const CPT: u32 = 7u;\n",
    "const CPT: u32 = 8u;\n",
    "const CPT: u32 = 9u;\n",
    "const CPT: u32 = 10u;\n",
    "const CPT: u32 = 11u;\n",
    "const CPT: u32 = 12u;\n",
    "const CPT: u32 = 13u;\n",
    "const CPT: u32 = 14u;\n",
    "const CPT: u32 = 15u;\n",
    "const CPT: u32 = 16u;\n",
];
const KPS_DECL: [&str; 16] = [
    "const KPS: u32 = 1u;\n",
    "const KPS: u32 = 2u;\n",
    "const KPS: u32 = 3u;\n",
    "const KPS: u32 = 4u;\n",
    "const KPS: u32 = 5u;\n",
    "const KPS: u32 = 6u;\n",
    "const KPS: u32 = 7u;\n",
    "const KPS: u32 = 8u;\n",
    "const KPS: u32 = 9u;\n",
    "const KPS: u32 = 10u;\n",
    "const KPS: u32 = 11u;\n",
    "const KPS: u32 = 12u;\n",
    "const KPS: u32 = 13u;\n",
    "const KPS: u32 = 14u;\n",
    "const KPS: u32 = 15u;\n",
    "const KPS: u32 = 16u;\n",
];

const MATRIX_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("s16", "f16"), StorageBinding::read("sv", "vec4<u32>"), StorageBinding::write("out", "f32")];
const STAGE_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q", "f32"),
    StorageBinding::read("k", "u32"),
    StorageBinding::read("v", "u32"),
    StorageBinding::read("table", "vec2<f32>"),
    StorageBinding::write("s32", "u32"),
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MatrixParams {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,
    rows: u32,
    rows_pad: u32,
    kv_len: u32,
    kv_pad: u32,
    offset: u32,
    causal: u32,
    row_blocks: u32,
    k_base: u32,
    v_base: u32,
    _p: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct StageParams {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,
    rows: u32,
    rows_pad: u32,
    kv_len: u32,
    kv_pad: u32,
    offset: u32,
    rotate_k: u32,
    table_half: u32,
    nq: u32,
    nkv: u32,
    k_base: u32,
    v_base: u32,
    scale_log2: f32,
}

/// Workgroup memory of the kernel at head_dim `d`, `bk` keys per tile, `nsg` subgroups.
fn bytes(d: usize, bk: usize, nsg: usize, sg: usize) -> usize {
    let bq = CM * nsg;
    // K/V tiles (and Q' staging), S, P, the flag, the row-reduction shares.
    2 * (2 * bk).max(64) * (d + 8) + 4 * bq * (bk + 4) + 2 * bq * (bk + 8) + 4 + 4 * nsg * sg
}

/// Subgroups per workgroup: `WGKERNELS_PREFILL_NSG` if set (4 or 8), else 8 then 4.
fn nsg_choices() -> Vec<usize> {
    match std::env::var("WGKERNELS_PREFILL_NSG").ok().and_then(|s| s.parse::<usize>().ok()) {
        Some(n @ (4 | 8)) => vec![n],
        _ => vec![4, 8],
    }
}

/// (keys per tile, subgroups per workgroup) for head_dim `d` within `mem` bytes and `max_inv`
/// invocations of `sg` lanes: 32 keys, else 16; the most subgroups first.
pub fn matrix_tiles(d: usize, sg: usize, max_inv: usize, mem: usize) -> Result<(usize, usize), String> {
    if d % CM != 0 || d == 0 || d > CM * ND_DECL.len() {
        return Err(format!("head_dim {d} is not a multiple of {CM} in 16..=256"));
    }
    for nsg in nsg_choices() {
        for bk in [32, 16] {
            if nsg * sg <= max_inv && bytes(d, bk, nsg, sg) <= mem && vectors_per_invocation(d, bk, nsg * sg) <= CPT_DECL.len() {
                return Ok((bk, nsg));
            }
        }
    }
    Err(format!("head_dim {d} needs {} bytes of workgroup memory and {} invocations, the adapter has {mem} and {max_inv}", bytes(d, 16, 4, sg), 4 * sg))
}

/// The subgroup size the Matrix kernel is built for, or why the adapter can't run it at all.
pub(super) fn matrix_support(caps: &Caps) -> Result<u32, String> {
    if !caps.has_coop_config(CM as u32, Cst::F16, Cst::F32) {
        return Err("no 16x16x16 f16 x f16 -> f32 cooperative matrix among the adapter's configurations".into());
    }
    let (lo, hi) = (caps.subgroup_min_size, caps.subgroup_max_size);
    if lo != hi || hi < CM as u32 || !hi.is_power_of_two() {
        return Err(format!("needs one subgroup size that is a power of two >= {CM}; the adapter reports {lo}..{hi}"));
    }
    if 4 * hi > caps.limits.max_compute_invocations_per_workgroup {
        return Err(format!("needs {} invocations per workgroup, the adapter allows {}", 4 * hi, caps.limits.max_compute_invocations_per_workgroup));
    }
    Ok(hi)
}

/// Pipeline key of the Matrix prefill for head_dim `d` on `caps`, or why not.
pub(super) fn matrix_key(caps: &Caps, d: usize) -> Result<AttnPipeline, String> {
    let sg = matrix_support(caps)?;
    let l = &caps.limits;
    let (bk, nsg) = matrix_tiles(d, sg as usize, l.max_compute_invocations_per_workgroup as usize, l.max_compute_workgroup_storage_size as usize)?;
    let tau = std::env::var("WGKERNELS_PREFILL_TAU").ok().and_then(|s| s.parse::<f32>().ok()).filter(|t| (0.0..=14.0).contains(t)).unwrap_or(TAU);
    let mode = std::env::var("WGKERNELS_PREFILL_MODE").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(0) & 3;
    Ok(AttnPipeline::PrefillMatrix { d: d as u32, bk: bk as u32, sg, nsg: nsg as u32, tau: tau.to_bits(), mode })
}

/// 16-byte vectors of a K (or V) tile each of `wg` invocations copies.
fn vectors_per_invocation(d: usize, bk: usize, wg: usize) -> usize {
    (bk * d / 8).div_ceil(wg)
}

/// Blocks of a K (or V) tile each subgroup copies (the cooperative staging).
fn blocks_per_subgroup(d: u32, bk: u32, nsg: u32) -> usize {
    ((bk as usize / CM) * (d as usize / CM)).div_ceil(nsg as usize)
}

pub(super) fn matrix_desc(d: u32, bk: u32, sg: u32, nsg: u32, tau: u32, mode: u32) -> PipelineDesc {
    let nd = (d as usize / CM).clamp(1, ND_DECL.len());
    let kps = blocks_per_subgroup(d, bk, nsg).clamp(1, KPS_DECL.len());
    let cpt = vectors_per_invocation(d as usize, bk as usize, (nsg * sg) as usize).clamp(1, CPT_DECL.len());
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![MATRIX_WGSL, ND_DECL[nd - 1], KPS_DECL[kps - 1], CPT_DECL[cpt - 1]]),
        entry: "main",
        constants: vec![
            ("D", d as f64),
            ("BK", bk as f64),
            ("SG", sg as f64),
            ("NSG", nsg as f64),
            ("TAU", f32::from_bits(tau) as f64),
            ("STAGE_COOP", (mode & 1) as f64),
            ("Q_COOP", (mode >> 1 & 1) as f64),
        ],
        workgroup_size: [nsg * sg, 1, 1],
        params_size: std::mem::size_of::<MatrixParams>() as u64,
        bindings: MATRIX_BINDINGS,
    }
}

pub(super) fn stage_desc(d: u32, kv_f16: bool, neox: bool) -> PipelineDesc {
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![STAGE_WGSL]),
        entry: "main",
        constants: vec![("D", d as f64), ("KV_F16", kv_f16 as u32 as f64), ("NEOX", neox as u32 as f64)],
        workgroup_size: [STAGE_WG, 1, 1],
        params_size: std::mem::size_of::<StageParams>() as u64,
        bindings: STAGE_BINDINGS,
    }
}

/// Record the Matrix prefill (`key` from [`matrix_key`]; `a` validated by the caller): the
/// staging pass into a scratch buffer, then the attention kernel.
pub(super) fn encode<KV: Elem>(b: &mut Batch, a: &Prefill<KV>, key: &AttnPipeline) -> crate::Result<()> {
    let &AttnPipeline::PrefillMatrix { d, bk, nsg, .. } = key else {
        return Err(Error::Argument("not a Matrix prefill pipeline".into()));
    };
    let ctx = b.context();
    let s = a.shape;
    let (d, bq) = (d as usize, CM * nsg as usize);
    let rows = a.tokens * s.group();
    let row_blocks = rows.div_ceil(bq);
    let rows_pad = row_blocks * bq;
    let kv_pad = a.kv_len.div_ceil(bk as usize) * bk as usize;
    let (q_len, kv_len) = (s.kv_heads * rows_pad * d, s.kv_heads * kv_pad * d);
    let total = q_len + 2 * kv_len;
    ensure(total as u64 <= u32::MAX as u64, || Error::Shape(format!("the Matrix prefill's f16 scratch would hold {total} elements, over 2^32")))?;
    let scratch = ctx.alloc::<half::f16>(total)?;
    let scale = a.scale.unwrap_or(1.0 / (d as f32).sqrt());
    let sp = StageParams {
        tokens: a.tokens as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        group: s.group() as u32,
        rows: rows as u32,
        rows_pad: rows_pad as u32,
        kv_len: a.kv_len as u32,
        kv_pad: kv_pad as u32,
        offset: a.offset as u32,
        rotate_k: !a.k_rotated as u32,
        table_half: (d / 2) as u32,
        nq: (q_len / 4) as u32,
        nkv: (kv_len / 4) as u32,
        k_base: q_len as u32,
        v_base: (q_len + kv_len) as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
    };
    let stage = AttnPipeline::PrefillStage { d: d as u32, kv_f16: KV::F16, neox: a.layout == crate::kernels::rope::PairLayout::HalfSplit };
    let grid = ctx.grid(((q_len + kv_len) / 4).div_ceil(STAGE_WG as usize) as u64)?;
    b.dispatch(&stage, &sp, &[a.q.raw(), a.k.raw(), a.v.raw(), a.table.buffer().raw(), scratch.raw()], grid)?;
    let mp = MatrixParams {
        tokens: a.tokens as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        group: s.group() as u32,
        rows: rows as u32,
        rows_pad: rows_pad as u32,
        kv_len: a.kv_len as u32,
        kv_pad: kv_pad as u32,
        offset: a.offset as u32,
        causal: a.causal as u32,
        row_blocks: row_blocks as u32,
        k_base: q_len as u32,
        v_base: (q_len + kv_len) as u32,
        _p: [0; 3],
    };
    let grid = ctx.grid((row_blocks * s.kv_heads) as u64)?;
    b.dispatch(key, &mp, &[scratch.raw(), scratch.raw(), a.out.raw()], grid)
}

/// Matrix pipelines for the shader checks (nominal adapter: subgroup 32, 48 KiB).
pub(super) fn sample_matrix_pipelines() -> Vec<AttnPipeline> {
    let caps = Caps::nominal();
    let mut v = Vec::new();
    for d in [16usize, 48, 64, 128, 256] {
        if let Ok(k) = matrix_key(&caps, d) {
            v.push(k);
        }
        for kv_f16 in [false, true] {
            v.push(AttnPipeline::PrefillStage { d: d as u32, kv_f16, neox: d % 32 == 0 });
        }
    }
    // The other workgroup size and the small tiles.
    v.push(AttnPipeline::PrefillMatrix { d: 128, bk: 32, sg: 32, nsg: 4, tau: TAU.to_bits(), mode: 3 });
    v.push(AttnPipeline::PrefillMatrix { d: 48, bk: 16, sg: 32, nsg: 4, tau: 0f32.to_bits(), mode: 1 });
    v.push(AttnPipeline::PrefillMatrix { d: 80, bk: 32, sg: 32, nsg: 8, tau: TAU.to_bits(), mode: 2 });
    v
}

/// `KernelInfo::extra` of the prefill: the Matrix variant's adapter-level needs.
pub(super) fn prefill_extra(caps: &Caps, v: Variant) -> Result<(), String> {
    match v {
        Variant::Matrix => matrix_support(caps).map(|_| ()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_and_requirements() {
        let caps = Caps::nominal();
        assert_eq!(matrix_support(&caps), Ok(32));
        let mem = 48 << 10;
        assert_eq!(matrix_tiles(128, 32, 1024, mem), Ok((32, 4)));
        assert_eq!(matrix_tiles(128, 32, 128, mem), Ok((32, 4)));
        assert_eq!(matrix_tiles(256, 32, 1024, mem), Ok((32, 4)));
        assert_eq!(matrix_tiles(256, 32, 1024, 44 << 10), Ok((16, 4)));
        assert!(matrix_tiles(6, 32, 1024, mem).is_err());
        assert!(matrix_tiles(272, 32, 1024, 1 << 20).is_err());
        assert!(matrix_tiles(256, 32, 1024, 16 << 10).is_err());
        for d in (16..=256).step_by(16) {
            for mem in [32 << 10, 48 << 10, 64 << 10] {
                if let Ok((bk, nsg)) = matrix_tiles(d, 32, 1024, mem) {
                    assert!(bytes(d, bk, nsg, 32) <= mem, "d {d} mem {mem}");
                    assert!(blocks_per_subgroup(d as u32, bk as u32, nsg as u32) <= KPS_DECL.len());
                    assert!(vectors_per_invocation(d, bk, 32 * nsg) <= CPT_DECL.len());
                }
            }
        }
        // A subgroup size range (Metal's 4..64) or no 16x16 f16 -> f32 configuration: unsupported.
        let ranged = Caps { subgroup_min_size: 4, subgroup_max_size: 64, ..caps.clone() };
        assert!(matrix_support(&ranged).is_err());
        let small = Caps {
            cooperative_matrix_configs: vec![wgpu::CooperativeMatrixProperties {
                m_size: 8,
                n_size: 8,
                k_size: 8,
                ab_type: Cst::F32,
                cr_type: Cst::F32,
                saturating_accumulation: false,
            }],
            ..caps.clone()
        };
        assert!(matrix_support(&small).is_err());
        let none = Caps { cooperative_matrix: false, ..caps };
        assert!(none.variant_support(Variant::Matrix).is_err());
    }
}
