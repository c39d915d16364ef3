//! The Matrix variant of the prefill (wgsl/attn_prefill_matrix.wgsl): Q K^T and P V on 16x16x16
//! cooperative matrices with f16 inputs and f32 accumulation, one pass over the keys with an
//! online softmax whose rare O rescales go through workgroup memory (see the kernel's notes).
//! Q is rotated as the kernel stages it; K (unless it comes rotated as f16) and f32 V are first
//! rotated / converted to f16 once per call by a staging pass (wgsl/attn_prefill_stage.wgsl,
//! `encode`), so the kernel's tiles are plain f16 copies.
//!
//! What it needs, beyond [`Caps::variant_support`] for [`Variant::Matrix`]:
//! * the adapter offers the 16x16x16 f16 x f16 -> f32 configuration (NVIDIA's Vulkan driver does;
//!   Apple GPUs offer 8x8 only, lavapipe none);
//! * one subgroup size (min == max), a multiple of 16, with 4 subgroups per workgroup within the
//!   adapter's invocation limit: the kernel gives each subgroup 16 rows and is built for that size
//!   (and writes NaN if the driver ever runs it with another);
//! * per shape: `head_dim % 16 == 0` and the tiles within the workgroup-memory limit.
//!
//! A shape it cannot take falls back to the best other prefill variant under `Auto` / `Prefer`,
//! and is an [`crate::Error::Unsupported`] under `Require(Matrix)`.
//!
//! Numerics: Q (rotated, times scale * log2 e), K (rotated) and V are rounded to f16, and so are
//! the probabilities P = exp2(s - m) <= 2^TAU fed to the P V product (m the row's reference
//! max); every sum is f32. The error bound the tests use is derived in `cases.rs` (`MATRIX_TOL`).
//!
//! [`crate::Tuning::prefill_tau`] (0..=14, default 8) sets TAU: 0
//! rescales O whenever a row's max grows, which exercises the rescale path in tests.

use super::{AttnPipeline, Prefill, PrefillParams};
use crate::batch::Batch;
use crate::buffer::Scratch;
use crate::caps::{Caps, Variant};
use crate::kernels::rope::Elem;
use crate::pipeline::{PipelineDesc, ShaderSource, StorageBinding};
use wgpu::CooperativeScalarType as Cst;

pub(super) const MATRIX_WGSL: &str = include_str!("../../../wgsl/attn_prefill_matrix.wgsl");
const STAGE_WGSL: &str = include_str!("../../../wgsl/attn_prefill_stage.wgsl");

/// The cooperative matrix size (and the rows each subgroup owns).
const CM: usize = 16;
/// Subgroups per workgroup, most preferred first: 8 (128 rows, each K/V tile staged serves twice
/// the rows: 1081 -> 932 µs at T = 2048 on an H100), else 4 where 8 don't fit.
const NSG_CHOICES: [u32; 2] = [8, 4];

/// Rows (query token x query head of the group) per workgroup at `nsg` subgroups.
pub fn rows_per_workgroup(nsg: u32) -> usize {
    CM * nsg as usize
}

/// Most column blocks of 16 (head_dim <= 256).
const ND_MAX: usize = 16;

/// Most chunks of 16 K or V elements per invocation and tile (the kernel's `//@CP` count).
const CPT_MAX: usize = 4;

/// The kernel's bindings: the staged Q (f16, loaded as matrices), K and V (16-byte vector loads).
const MATRIX_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("q", "f16"), StorageBinding::read("k", "vec4<u32>"), StorageBinding::read("v", "vec4<u32>"), StorageBinding::write("out", "f32")];

/// Workgroup memory of the kernel at head_dim `d`, `bk` keys per tile, `nsg` subgroups of `sg`:
/// the K and V tiles, S, P, the row-sum shares, the flag.
fn bytes(d: usize, bk: usize, nsg: usize, sg: usize) -> usize {
    let (ds, bq) = (d + 8, rows_per_workgroup(nsg as u32));
    2 * 2 * bk * ds + 4 * bq * (bk + 4) + 2 * bq * (bk + 8) + 4 * nsg * sg + 16
}

/// Default log2 headroom of the online softmax (P <= 2^TAU).
const TAU: f32 = 8.0;

/// TAU: [`crate::Tuning::prefill_tau`] when set to a value in 0..=14, else [`TAU`].
fn tau(caps: &Caps) -> f32 {
    crate::tuning::accepted(caps.tuning.prefill_tau, |t| (0.0..=14.0).contains(&t)).unwrap_or(TAU)
}

/// Chunks of 16 elements each of `wg` invocations loads per tile of `bk` keys at head_dim `d`.
fn chunks_per_invocation(d: usize, bk: usize, wg: usize) -> usize {
    (bk * d / CM).div_ceil(wg)
}

/// (keys per tile, subgroups per workgroup) for head_dim `d` within `mem` bytes of workgroup
/// memory and `max_inv` invocations of `sg` lanes: 32 keys before 16, and at each the first of
/// `NSG_CHOICES` that fits.
pub fn matrix_tiles(d: usize, sg: usize, max_inv: usize, mem: usize) -> Result<(usize, u32), String> {
    if d % CM != 0 || d == 0 || d > CM * ND_MAX {
        return Err(format!("head_dim {d} is not a multiple of {CM} in 16..=256"));
    }
    for bk in [32, 16] {
        for nsg in NSG_CHOICES {
            let wg = nsg as usize * sg;
            if wg <= max_inv && bytes(d, bk, nsg as usize, sg) <= mem && chunks_per_invocation(d, bk, wg) <= CPT_MAX {
                return Ok((bk, nsg));
            }
        }
    }
    Err(format!("head_dim {d} needs {} bytes of workgroup memory, the adapter has {mem}", bytes(d, 16, 4, sg)))
}

/// The subgroup size the Matrix kernel is built for, or why the adapter can't run it at all.
pub(super) fn matrix_support(caps: &Caps) -> Result<u32, String> {
    if !caps.subgroup_barrier {
        return Err("needs subgroupBarrier (the SUBGROUP_BARRIER feature)".into());
    }
    matrix_support_with(caps, NSG_CHOICES[NSG_CHOICES.len() - 1])
}

/// The subgroup size a Matrix kernel of `nsg` subgroups per workgroup is built for, or why the
/// adapter can't run it (no 16x16x16 f16 -> f32 configuration, not one subgroup size that is a
/// multiple of 16, too many invocations).
pub(crate) fn matrix_support_with(caps: &Caps, nsg: u32) -> Result<u32, String> {
    if !caps.has_coop_config(CM as u32, Cst::F16, Cst::F32) {
        return Err("no 16x16x16 f16 x f16 -> f32 cooperative matrix among the adapter's configurations".into());
    }
    let (lo, hi) = (caps.subgroup_min_size, caps.subgroup_max_size);
    if lo != hi || hi % CM as u32 != 0 || hi == 0 {
        return Err(format!("needs one subgroup size that is a multiple of {CM}; the adapter reports {lo}..{hi}"));
    }
    if nsg * hi > caps.limits.max_compute_invocations_per_workgroup {
        return Err(format!("needs {} invocations per workgroup, the adapter allows {}", nsg * hi, caps.limits.max_compute_invocations_per_workgroup));
    }
    Ok(hi)
}

/// Pipeline key of the Matrix prefill for head_dim `d` on `caps`, or why not.
pub(super) fn matrix_key(caps: &Caps, d: usize, neox: bool) -> Result<AttnPipeline, String> {
    let sg = matrix_support(caps)?;
    let l = &caps.limits;
    let (bk, nsg) = matrix_tiles(d, sg as usize, l.max_compute_invocations_per_workgroup as usize, l.max_compute_workgroup_storage_size as usize)?;
    Ok(AttnPipeline::PrefillMatrix { d: d as u32, bk: bk as u32, sg, nsg, neox, tau: tau(caps).to_bits() })
}

pub(super) fn matrix_desc(d: u32, bk: u32, sg: u32, nsg: u32, tau: f32) -> PipelineDesc {
    let nd = (d as usize / CM).clamp(1, ND_MAX);
    let cpt = chunks_per_invocation(d as usize, bk as usize, (nsg * sg) as usize).clamp(1, CPT_MAX);
    // Keys per invocation in the softmax (the kernel's JP): BK over the SG / 16 lanes of a row.
    let jp = (bk * CM as u32 / sg).max(1) as usize;
    let templates = [("ND", "{k}", nd), ("NB", "{n}", bk as usize / CM), ("JQ", "{q}", jp / 4), ("CP", "{x}", cpt)];
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![super::unrolled(MATRIX_WGSL, &templates), super::PREFILL_PARAMS_WGSL, super::SOFTCAP_WGSL]),
        entry: "main",
        constants: vec![("D", d as f64), ("BK", bk as f64), ("SG", sg as f64), ("NSG", nsg as f64), ("TAU", tau as f64)],
        workgroup_size: [nsg * sg, 1, 1],
        params_size: std::mem::size_of::<PrefillParams>() as u64,
        bindings: MATRIX_BINDINGS,
    }
}

const STAGE_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q_src", "u32"),
    StorageBinding::read("k_src", "u32"),
    StorageBinding::read("v_src", "u32"),
    StorageBinding::read("table", "vec2<f32>"),
    StorageBinding::write("q_dst", "u32"),
    StorageBinding::write("k_dst", "u32"),
    StorageBinding::write("v_dst", "u32"),
];

params_struct! {
    struct StageParams {
        q_words: u32,
        k_words: u32,
        v_words: u32,
        kv_heads: u32,
        table_half: u32,
        rotate_k: u32,
        q_rows: u32,
        q_rows_pad: u32,
        group: u32,
        heads: u32,
        offset: u32,
        scale: f32,
    }
}

/// The staging params and the pipelines `pipelines` that bind them (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(super) fn stage_params_twin(pipelines: Vec<(String, PipelineDesc)>) -> crate::kernels::ParamsTwin {
    crate::kernels::params_twin!(StageParams, pipelines)
}

pub(super) fn stage_desc(d: u32, in_f16: bool, neox: bool) -> PipelineDesc {
    PipelineDesc {
        source: ShaderSource::Wgsl(vec![STAGE_WGSL]),
        entry: "main",
        constants: vec![("D", d as f64), ("IN_F16", in_f16 as u32 as f64), ("NEOX", neox as u32 as f64)],
        workgroup_size: [256, 1, 1],
        params_size: std::mem::size_of::<StageParams>() as u64,
        bindings: STAGE_BINDINGS,
    }
}

/// Record the Matrix prefill (`key` and `params` from `attention::prefill`): one staging dispatch
/// ([`stage`]), then the kernel, which always reads f16 Q, K and V with Q and K rotated.
pub(super) fn encode<KV: Elem>(b: &mut Batch, a: &Prefill<KV>, key: AttnPipeline, params: PrefillParams, grid: [u32; 3]) -> crate::Result<()> {
    let AttnPipeline::PrefillMatrix { d, neox, nsg, .. } = key else {
        return Err(crate::Error::Argument("not a Matrix prefill pipeline".into()));
    };
    let [q, k, v] = stage(b, a, d, neox, params, params.row_blocks as usize * rows_per_workgroup(nsg))?;
    let ctx = b.context();
    b.dispatch(&key, &params, &[ctx.internal(&q), ctx.internal(&k), ctx.internal(&v), a.out.raw()], grid)
}

/// The staging dispatch of [`encode`] (attn_prefill_stage.wgsl), into the context's scratch
/// buffers; returns the Q, K and V buffers the kernel then binds.
/// - Q: rotated at offset + t, times scale * log2 e, f16, rows in the kernel's order per KV head
///   (t * group + head in group), `rows_pad` rows per KV head (whole row blocks; the rows past
///   tokens * group are zero), into [`Scratch::PrefillQ`]. The kernel loads it as matrices.
/// - K, when it comes unrotated or as f32: f16, rotated, into [`Scratch::PrefillK`]; otherwise
///   the input itself.
/// - V, when it comes as f32: f16, into [`Scratch::PrefillV`]; otherwise the input itself.
///
/// Every workgroup of the kernel reads every K/V tile it needs, so rotating and converting once
/// per call saves that work in each of them (H100, T = 2048: 13% for K; rotating Q in the kernel
/// cost 73 of 567 µs). One dispatch for all three: each dispatch adds its launch and drain.
fn stage<KV: Elem>(b: &mut Batch, a: &Prefill<KV>, d: u32, neox: bool, params: PrefillParams, rows_pad: usize) -> crate::Result<[wgpu::Buffer; 3]> {
    let ctx = b.context();
    let s = a.shape;
    let group = s.heads / s.kv_heads;
    let q_words = crate::error::dims::elems_u32("staged Q words", &[s.kv_heads, rows_pad, d as usize / 2])?;
    let kv_words = s.kv_elems(a.kv_len)? / 2;
    let stage_k = !(KV::F16 && a.k_rotated);
    let stage_v = !KV::F16;
    let q = ctx.scratch(Scratch::PrefillQ, 4 * q_words as u64)?;
    // Unstaged regions: the kernel reads the input; the stage pass binds it (read) and the
    // context's dummy buffer (write) and touches neither.
    let (k, k_dst) = if stage_k {
        let k = ctx.scratch(Scratch::PrefillK, 4 * kv_words as u64)?;
        (k.clone(), k)
    } else {
        (a.k.wgpu_buffer().clone(), ctx.dummy().buffer.clone())
    };
    let (v, v_dst) = if stage_v {
        let v = ctx.scratch(Scratch::PrefillV, 4 * kv_words as u64)?;
        (v.clone(), v)
    } else {
        (a.v.wgpu_buffer().clone(), ctx.dummy().buffer.clone())
    };
    let sp = StageParams {
        q_words: q_words as u32,
        k_words: if stage_k { kv_words as u32 } else { 0 },
        v_words: if stage_v { kv_words as u32 } else { 0 },
        kv_heads: s.kv_heads as u32,
        table_half: d / 2,
        rotate_k: !a.k_rotated as u32,
        q_rows: crate::error::dims::u32_of("tokens * group", a.tokens * group)?,
        q_rows_pad: rows_pad as u32,
        group: group as u32,
        heads: s.heads as u32,
        offset: a.offset as u32,
        scale: params.scale_log2,
    };
    let total = q_words + sp.k_words as usize + sp.v_words as usize;
    let grid = ctx.grid(total.div_ceil(256) as u64)?;
    let bufs = [a.q.raw(), a.k.raw(), a.v.raw(), a.table.buffer().raw(), ctx.internal(&q), ctx.internal(&k_dst), ctx.internal(&v_dst)];
    b.dispatch(&AttnPipeline::PrefillStage { d, in_f16: KV::F16, neox }, &sp, &bufs, grid)?;
    Ok([q, k, v])
}

/// Matrix pipelines for the shader checks (nominal adapter: subgroup 32, 48 KiB).
#[cfg(feature = "testkit")]
pub(super) fn sample_matrix_pipelines() -> Vec<AttnPipeline> {
    let caps = Caps::nominal();
    let mut v = Vec::new();
    for d in [16usize, 64, 128, 256] {
        for neox in [false, true] {
            if let Ok(k) = matrix_key(&caps, d, neox) {
                v.push(k);
            }
        }
    }
    v.push(AttnPipeline::PrefillMatrix { d: 48, bk: 16, sg: 32, nsg: 4, neox: false, tau: 0f32.to_bits() });
    for (d, in_f16, neox) in [(128, false, true), (128, true, true), (64, false, false), (48, true, false)] {
        v.push(AttnPipeline::PrefillStage { d, in_f16, neox });
    }
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
    use crate::buffer::GpuBuffer;
    use crate::kernels::attention::AttnShape;
    use crate::kernels::rope::{PairLayout, RopeConfig, RopeScaling, RopeTable};
    use crate::suite::Rng;
    use bytemuck::Zeroable;

    /// The first `n` halves of a staged buffer (two per u32 word), as f32.
    fn halves(ctx: &crate::Context, buf: wgpu::Buffer, n: usize) -> Vec<f32> {
        let words = ctx.read(&GpuBuffer::<u32>::from_raw(ctx, buf, n / 2).unwrap()).unwrap();
        words.iter().flat_map(|&w| [half::f16::from_bits(w as u16).to_f32(), half::f16::from_bits((w >> 16) as u16).to_f32()]).collect()
    }

    /// The staging pass (the only piece of the Matrix prefill that runs without cooperative
    /// matrices, so on lavapipe too) against the f64 RoPE reference: K rotated at its position
    /// and V converted, each within the f16 rounding of the exact value (Q: `check_q_staging`).
    fn check_staging<KV: Elem>(ctx: &crate::Context, rng: &mut Rng, d: usize, kv_len: usize, kv_heads: usize, layout: PairLayout, k_rotated: bool) {
        let cfg = RopeConfig::new(d, 10000.0, RopeScaling::yarn(4.0, 4096));
        let table = RopeTable::build(ctx, cfg.clone(), kv_len).unwrap();
        let n = kv_len * kv_heads * d;
        let (kh, vh) = (rng.uniform_vec(n, -2.0, 2.0), rng.uniform_vec(n, -2.0, 2.0));
        let as_kv = |x: &[f32]| x.iter().map(|&v| KV::from_f32(v)).collect::<Vec<KV>>();
        let (k, v) = (ctx.upload(&as_kv(&kh)).unwrap(), ctx.upload(&as_kv(&vh)).unwrap());
        let (q, out) = (ctx.alloc::<f32>(kv_heads * d).unwrap(), ctx.alloc::<f32>(kv_heads * d).unwrap());
        let a = Prefill {
            shape: AttnShape::new(kv_heads, kv_heads, d),
            tokens: 1,
            offset: kv_len - 1,
            kv_len,
            causal: true,
            k_rotated,
            layout,
            scale: None,
            window: None,
            softcap: None,
            q: &q,
            k: &k,
            v: &v,
            table: &table,
            out: &out,
        };
        let mut b = ctx.batch();
        let [_, ks, vs] = stage(&mut b, &a, d as u32, layout == PairLayout::HalfSplit, Zeroable::zeroed(), 16).unwrap();
        b.run().unwrap();
        let (inv_freq, af) = (cfg.inv_freq(), cfg.attention_factor());
        // Inputs as the GPU reads them (f16 inputs are rounded already).
        let (kin, vin): (Vec<f64>, Vec<f64>) = (kh.iter().map(|&x| KV::from_f32(x).to_f32() as f64).collect(), vh.iter().map(|&x| KV::from_f32(x).to_f32() as f64).collect());
        // Expected K and the magnitude of the terms each value combines (|a| + |b| of its pair,
        // times the attention factor; the value itself where nothing is rotated).
        let mut want_k = kin.clone();
        let mut mag_k: Vec<f64> = kin.iter().map(|x| x.abs()).collect();
        if !k_rotated {
            for (row, chunk) in kin.chunks(d).enumerate() {
                let (rot, mag) = crate::reference::rope::rotate_head(chunk, layout, &inv_freq, af, row / kv_heads);
                want_k[row * d..(row + 1) * d].copy_from_slice(&rot);
                mag_k[row * d..(row + 1) * d].copy_from_slice(&mag);
            }
        }
        // Within one f16 ulp of the exact value (the rounding, to either neighbour), plus the f32
        // rotation's error (relative to the terms it combines, which may cancel), or 2^-24 near
        // zero.
        let close = |got: f32, want: f64, mag: f64| (got as f64 - want).abs() <= want.abs() / 1024.0 + mag / 1_048_576.0 + 1.0 / 16_777_216.0;
        let staged_k = !(KV::F16 && k_rotated);
        if staged_k {
            let got = halves(ctx, ks, n);
            let bad = (0..n).filter(|&i| !close(got[i], want_k[i], mag_k[i])).count();
            assert_eq!(bad, 0, "K: {bad} of {n} staged values off (d {d}, {layout:?}, rotated {k_rotated}, f16 {})", KV::F16);
        }
        if !KV::F16 {
            let got = halves(ctx, vs, n);
            let bad = (0..n).filter(|&i| !close(got[i], vin[i], vin[i].abs())).count();
            assert_eq!(bad, 0, "V: {bad} of {n} staged values off (d {d})");
        }
    }

    /// The Q staging against the f64 reference: row g of KV head hk is token g / group, query
    /// head hk * group + g % group, rotated at offset + t and times `scale`, within the f16 rounding;
    /// the padding rows are exactly zero.
    fn check_q_staging(ctx: &crate::Context, rng: &mut Rng, shape: AttnShape, tokens: usize, offset: usize, layout: PairLayout, rows_pad: usize) {
        let (d, heads, kv_heads) = (shape.head_dim, shape.heads, shape.kv_heads);
        let cfg = RopeConfig::new(d, 10000.0, RopeScaling::yarn(4.0, 4096));
        let table = RopeTable::build(ctx, cfg.clone(), offset + tokens).unwrap();
        let qh = rng.uniform_vec(tokens * heads * d, -2.0, 2.0);
        let q = ctx.upload(&qh).unwrap();
        let (k, v) = (ctx.alloc::<f32>(d).unwrap(), ctx.alloc::<f32>(d).unwrap());
        let out = ctx.alloc::<f32>(tokens * heads * d).unwrap();
        let a = Prefill {
            shape,
            tokens,
            offset,
            kv_len: offset + tokens,
            causal: true,
            k_rotated: false,
            layout,
            scale: None,
            window: None,
            softcap: None,
            q: &q,
            k: &k,
            v: &v,
            table: &table,
            out: &out,
        };
        let scale = 0.37f32;
        let params = PrefillParams { scale_log2: scale, ..Zeroable::zeroed() };
        let mut b = ctx.batch();
        let [staged, ..] = stage(&mut b, &a, d as u32, layout == PairLayout::HalfSplit, params, rows_pad).unwrap();
        b.run().unwrap();
        let n = kv_heads * rows_pad * d;
        let got = halves(ctx, staged, n);
        let (inv_freq, af, group) = (cfg.inv_freq(), cfg.attention_factor(), heads / kv_heads);
        let mut bad = 0;
        for hk in 0..kv_heads {
            for g in 0..rows_pad {
                let row = &got[(hk * rows_pad + g) * d..][..d];
                if g >= tokens * group {
                    bad += row.iter().filter(|&&x| x != 0.0).count();
                    continue;
                }
                let (t, h) = (g / group, hk * group + g % group);
                let src: Vec<f64> = qh[(t * heads + h) * d..][..d].iter().map(|&x| x as f64).collect();
                let (rot, mag) = crate::reference::rope::rotate_head(&src, layout, &inv_freq, af, offset + t);
                for i in 0..d {
                    let (want, m) = (rot[i] * scale as f64, mag[i] * scale as f64);
                    bad += usize::from((row[i] as f64 - want).abs() > want.abs() / 1024.0 + m / 1_048_576.0 + 1.0 / 16_777_216.0);
                }
            }
        }
        assert_eq!(bad, 0, "Q: {bad} of {n} staged values off (d {d}, {layout:?}, heads {heads}/{kv_heads}, offset {offset})");
    }

    #[test]
    fn staging_pass_matches_the_reference() {
        let ctx = crate::Context::new_blocking(crate::ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        let mut rng = Rng::new(Rng::fresh_seed());
        check_staging::<f32>(&ctx, &mut rng, 64, 37, 2, PairLayout::HalfSplit, false);
        check_staging::<f32>(&ctx, &mut rng, 48, 5, 3, PairLayout::Interleaved, false);
        check_staging::<f32>(&ctx, &mut rng, 128, 19, 1, PairLayout::HalfSplit, true);
        check_staging::<half::f16>(&ctx, &mut rng, 80, 23, 2, PairLayout::Interleaved, false);
        check_staging::<half::f16>(&ctx, &mut rng, 16, 9, 4, PairLayout::HalfSplit, false);
        // f16 K that comes rotated and f16 V: nothing but Q is staged (both unstaged regions
        // write-bind the dummy buffer; the dispatch must still validate).
        check_staging::<half::f16>(&ctx, &mut rng, 32, 7, 2, PairLayout::Interleaved, true);
        check_q_staging(&ctx, &mut rng, AttnShape::new(6, 2, 64), 7, 5, PairLayout::HalfSplit, 32);
        check_q_staging(&ctx, &mut rng, AttnShape::new(3, 3, 48), 13, 0, PairLayout::Interleaved, 16);
        check_q_staging(&ctx, &mut rng, AttnShape::new(4, 1, 128), 33, 2, PairLayout::Interleaved, 256);
    }

    #[test]
    fn plans_and_requirements() {
        let caps = Caps::nominal();
        assert_eq!(matrix_support(&caps), Ok(32));
        assert_eq!(matrix_tiles(128, 32, 1024, 48 << 10), Ok((32, 8)));
        assert_eq!(matrix_tiles(128, 32, 128, 48 << 10), Ok((32, 4)));
        assert_eq!(matrix_tiles(256, 32, 1024, 48 << 10), Ok((32, 4)));
        assert_eq!(matrix_tiles(256, 32, 1024, 44 << 10), Ok((16, 8)));
        assert!(matrix_tiles(6, 32, 1024, 48 << 10).is_err());
        assert!(matrix_tiles(272, 32, 1024, 1 << 20).is_err());
        assert!(matrix_tiles(256, 32, 1024, 16 << 10).is_err());
        for d in (16..=256).step_by(16) {
            for mem in [32 << 10, 48 << 10, 64 << 10] {
                if let Ok((bk, nsg)) = matrix_tiles(d, 32, 1024, mem) {
                    assert!(bytes(d, bk, nsg as usize, 32) <= mem && chunks_per_invocation(d, bk, 32 * nsg as usize) <= CPT_MAX, "d {d} mem {mem}");
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
