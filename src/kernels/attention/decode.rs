//! Decode: the plan (how the KV length is split over workgroups, which kernel and variant) and
//! the recording of its dispatches (append the new token's rotated K/V, the split-K partial
//! pass, the log-sum-exp merge). The family's shared types, pipelines and constants are in
//! `mod.rs`; the kernels are wgsl/attn_append.wgsl, attn_decode.wgsl (+ _portable / _subgroup),
//! attn_decode_matrix.wgsl ([`super::decode_matrix`]), attn_merge.wgsl and msl/attn_decode.metal.

use super::*;
use crate::kernels::q8::{self, MergeParts, Q8Activations};
use crate::tuning::accepted;

/// Work buffers of a decode: the rotated query and the per-chunk partial results.
pub struct DecodeScratch {
    shape: AttnShape,
    q_rot: GpuBuffer<f32>,
    part_o: GpuBuffer<f32>,
    part_ml: GpuBuffer<[f32; 2]>,
}

impl DecodeScratch {
    pub fn new(ctx: &Context, shape: AttnShape) -> Result<DecodeScratch> {
        shape.validate()?;
        let (h, d) = (shape.heads, shape.head_dim);
        let (q, o, ml) = (shape.q_elems(1)?, dims::prod("heads * chunks * head_dim", &[h, MAX_CHUNKS, d])?, dims::prod("heads * chunks", &[h, MAX_CHUNKS])?);
        Ok(DecodeScratch { shape, q_rot: ctx.alloc(q)?, part_o: ctx.alloc(o)?, part_ml: ctx.alloc(ml)? })
    }
    /// The rotated query of the last [`decode`].
    pub fn q_rot(&self) -> &GpuBuffer<f32> {
        &self.q_rot
    }
}

/// How a decode is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodePlan {
    /// The Subgroup teams kernel (attn_decode_subgroup.wgsl); otherwise the Portable kernel.
    pub teams: bool,
    /// The teams kernel as Native MSL (msl/attn_decode.metal), twin of the same plan's Subgroup key.
    pub native: bool,
    pub wg: usize,
    /// Query heads per workgroup.
    pub gb: usize,
    /// Portable kernel: keys per tile.
    pub tile: usize,
    /// Teams kernel: lanes per key (power of two, at most the smallest subgroup size).
    pub lanes: usize,
    /// Teams kernel: keys per team per step.
    pub keys: usize,
    /// Teams kernel: the next step's loads issued before this step's math.
    pub prefetch: bool,
    /// The Matrix kernel (attn_decode_matrix.wgsl) and what it is built for.
    pub matrix: Option<decode_matrix::MatrixPlan>,
    pub chunk: usize,
    pub nchunks: usize,
    pub gblocks: usize,
}

impl DecodePlan {
    /// The partial pass's pipeline for head_dim `d`, the cache's element type and whether the
    /// scores are soft-capped.
    pub fn key(&self, d: usize, kv_f16: bool, softcap: bool) -> AttnPipeline {
        let (d, gb, wg) = (d as u32, self.gb as u32, self.wg as u32);
        if let Some(m) = self.matrix {
            AttnPipeline::DecodeMatrix { d, gb, sg: m.sg as u32, nw: m.nw as u32, maxc: m.maxc as u32 }
        } else if self.teams {
            let variant = if self.native { Variant::Native } else { Variant::Subgroup };
            AttnPipeline::DecodeTeams { variant, d, gb, wg, lanes: self.lanes as u32, keys: self.keys as u32, kv_f16, prefetch: self.prefetch, softcap: softcap || self.native }
        } else {
            AttnPipeline::Decode { d, gb, tile: self.tile as u32, wg, kv_f16 }
        }
    }
}

/// Chunks of a multiple of `step` keys so that about `target` workgroups run (at most
/// [`MAX_CHUNKS`] per head block), but at least `min_chunk` keys: (chunk, nchunks).
pub(super) fn split(kv_len: usize, blocks: usize, target: usize, step: usize, min_chunk: usize) -> (usize, usize) {
    let want = target.div_ceil(blocks).clamp(1, MAX_CHUNKS);
    let chunk = kv_len.div_ceil(want).max(min_chunk).div_ceil(step) * step;
    (chunk, kv_len.div_ceil(chunk))
}

/// Fewest keys per chunk of the teams kernel at long contexts ([`crate::Tuning::decode_min_chunk`]
/// overrides, and then also applies at short ones). At kv 4k (32/8 heads, d 128) the
/// 528-workgroup target alone makes 64-key chunks (512 workgroups of two steps); 128-key chunks
/// (256 workgroups) halve the partial rows to write and merge and the per-workgroup fixed cost
/// (q load, team combine). Measured on the H200 (2026-11-22) at 4k, no prefetch, merge U=4: f16
/// 24.5 vs 25.8 µs; f32 27.1 vs 26.5 (with prefetch f32 takes 25.0 at 128-key chunks); 256-key
/// chunks: 27.9 / 32.9; on the H100 (2026-11-25, attend-only) f16 21.3 µs with 128-key chunks
/// against 23.6 with 64.
fn teams_min_chunk(caps: &Caps) -> Option<usize> {
    accepted(caps.tuning.decode_min_chunk, |v| v <= 1 << 20)
}

/// Query heads per workgroup where the keys are too few to fill the GPU ([`few_keys`]).
const NARROW_GB: usize = 2;

/// Whether `blocks` head blocks over `kv_len` keys, in chunks of at least the long contexts'
/// fewest keys, make at most half the `target` workgroups. The teams plan then takes blocks of
/// [`NARROW_GB`] query heads: each workgroup reads its chunk's keys for fewer heads (the other
/// blocks read the same keys, from L2 at these lengths), and twice or more the workgroups run.
/// Measured on the H200 (2026-11-29, `model_bench` GPU ms per decode token, 4 heads per block
/// -> 2): Llama-3.2-1B (d 64, 32/8 heads) 0.975 -> 0.951 from an empty cache, 1.100 -> 1.079
/// after 4096 tokens, and after 32768 (528 workgroups either way: not narrowed) 1.367 -> 1.413;
/// Llama-3-8B 2.846 -> 2.804 and 3.221 -> 3.197; Qwen2.5-7B (7 heads per block -> 2) 2.895 ->
/// 2.770 and 3.167 -> 3.066 (results/2026-11-29-h200-depth).
fn few_keys(caps: &Caps, kv_len: usize, blocks: usize, target: usize, step: usize) -> bool {
    let (_, nchunks) = split(kv_len, blocks, target, step, teams_min_chunk(caps).unwrap_or(128));
    blocks * nchunks * 2 <= target
}

/// Workgroups a short context is spread over, and the fewest keys per chunk it may take.
const SHORT_WORKGROUPS: usize = 256;
const SHORT_MIN_CHUNK: usize = 16;

/// (chunk, nchunks) of the teams kernel: about `target` workgroups with chunks of at least 128
/// keys. Where that leaves fewer than [`SHORT_WORKGROUPS`] (short contexts), smaller chunks
/// (at least 16 keys) spread the keys over about that many, since there each team's serial key
/// steps, not the bytes, set the time. Measured on the H100 (2026-11-25, f16 attend-only, 32/8
/// heads, d 128; results/2026-11-25-h100-07), single µs with 128-key chunks ->
/// this rule: kv 256 17.2 -> 14.4, 512 17.4 -> 14.9, 1024 19.0 -> 16.2, 2048 18.8 -> 17.9 (f32
/// 17.0 -> 12.9, 17.7 -> 13.9, 18.4 -> 15.5, 19.3 -> 18.4); from 4k on nothing changes (twice the
/// workgroups at 4k measured 23.6 against 21.3).
fn teams_split(caps: &Caps, kv_len: usize, blocks: usize, target: usize, step: usize) -> (usize, usize) {
    if let Some(min_chunk) = teams_min_chunk(caps) {
        return split(kv_len, blocks, target, step, min_chunk);
    }
    let long = split(kv_len, blocks, target, step, 128);
    if blocks * long.1 >= SHORT_WORKGROUPS {
        return long;
    }
    split(kv_len, blocks, SHORT_WORKGROUPS, step, SHORT_MIN_CHUNK)
}

/// Largest query-head block (<= 8, <= the GQA group) whose workgroup memory `per_head` bytes
/// per head fits `mem`.
fn head_block(s: &AttnShape, mem: usize, per_head: usize) -> Result<usize> {
    let d = s.head_dim;
    (1..=s.group().min(8)).rev().find(|gb| gb * per_head <= mem).ok_or_else(|| Error::Limit(format!("head_dim {d} needs more workgroup memory than the adapter's {mem} bytes")))
}

/// The split of a decode over `kv_len` keys for `variant` on an adapter with `caps`.
///
/// Subgroup: the teams kernel with L = the row's 16-byte pieces rounded up to a power of two,
/// at most the adapter's smallest subgroup size and 32, 128 invocations, the next step's loads
/// issued before this step's math (prefetch), keys per team and step 4 (f32) or 2 (f16), chunks
/// of at least 128 keys sized for about 4 workgroups per SM of a 132-SM GPU (smaller chunks at
/// short contexts: `teams_split`). On NVIDIA (H100, 2026-11-25) this kernel keeps at most 512
/// invocations resident per SM (128 registers each), so 4 x 128 is one full wave and a bigger
/// grid only adds a partial second one (f16 32k: 512 workgroups 67.0 µs, 656 83.5;
/// results/2026-11-25-h100-01). Measured on the H200
/// (2026-11-22, 32/8 heads, d 128, single µs at kv 4k / 16k / 32k; examples/decode_sweep):
/// f16 B=2 with prefetch 23.4 / 41.2 / 59.1, B=4 with prefetch 23.5 / 51.7 / 70.5, B=4 without
/// 24.1 / 43.2 / 60.1; f32 B=4 with prefetch 25.0 / 50.9 / 81.1, without 26.9 / 52.0 / 82.9,
/// B=2 with prefetch 26.3 / 51.0 / 83.0. Rows that would need more than
/// 8 pieces per lane (e.g. head_dim 256 f32 at subgroup size 4, or a head_dim that is not a
/// multiple of 4 (f32) / 8 (f16), whose 4-byte pieces are many) fall back to the Portable kernel. The teams kernel's register arrays bound GB * pieces per lane to 16 and
/// keys * pieces per lane to 32. Query heads per workgroup: the GQA group up to 8 (and 16 /
/// pieces per lane), 2 where the keys are too few to fill the GPU otherwise (`few_keys`).
/// Overrides (the `decode_*` fields of [`crate::Tuning`], taken from
/// `caps.tuning`): `decode_wg` (64..1024), `decode_lanes` (max L), `decode_keys` (1..8),
/// `decode_workgroups` (target workgroups), `decode_prefetch`, `decode_min_chunk` (fewest keys per
/// chunk), `decode_gb` (most query heads per workgroup, 1..8).
///
/// Native: see [`native_decode_plan`]; head dims without an MSL entry point take the Subgroup plan.
pub fn decode_plan(caps: &Caps, variant: Variant, s: &AttnShape, kv_f16: bool, kv_len: usize) -> Result<DecodePlan> {
    s.validate()?;
    ensure(kv_len > 0, || Error::Shape("kv_len = 0".into()))?;
    dims::u32_of("kv_len", kv_len)?;
    let d = s.head_dim;
    let mem = caps.limits.max_compute_workgroup_storage_size as usize;
    let pow2 = |v: usize| v.is_power_of_two();
    let t = &caps.tuning;
    if variant == Variant::Matrix {
        if let Ok(plan) = decode_matrix::matrix_plan(caps, s, kv_f16, kv_len) {
            return Ok(plan);
        }
        return decode_plan(caps, matrix_fallback(caps), s, kv_f16, kv_len);
    }
    if variant == Variant::Native {
        if let Some(plan) = native_decode_plan(caps, s, kv_f16, kv_len)? {
            return Ok(plan);
        }
    }
    if matches!(variant, Variant::Subgroup | Variant::Native) {
        let words = if kv_f16 { d / 2 } else { d };
        let pieces = if words % 4 == 0 { words / 4 } else { words };
        let sg = 1usize << (caps.subgroup_min_size.max(1).ilog2());
        let max_lanes = accepted(t.decode_lanes, |v| pow2(v) && v <= 128).unwrap_or(32);
        let lanes = pieces.next_power_of_two().min(sg).min(max_lanes);
        let max_wg = caps.limits.max_compute_invocations_per_workgroup as usize;
        let wg = accepted(t.decode_wg, |v| pow2(v) && (64..=1024).contains(&v)).unwrap_or(128).min(max_wg).max(lanes);
        let teams = wg / lanes;
        let ppl = pieces.div_ceil(lanes);
        if ppl <= 8 {
            let prefetch = t.decode_prefetch != Some(false);
            let keys = accepted(t.decode_keys, |v| (1..=8).contains(&v)).unwrap_or(if kv_f16 && prefetch { 2 } else { 4 }).min(32 / ppl);
            let max_gb = accepted(t.decode_gb, |v| (1..=8).contains(&v)).unwrap_or(8);
            let mut gb = head_block(s, mem.saturating_sub(64), 4 * d + 8 * teams)?.min(16 / ppl).min(max_gb);
            let target = accepted(caps.tuning.decode_workgroups, |v| (1..=1 << 16).contains(&v)).unwrap_or(528);
            if t.decode_gb.is_none() && gb > NARROW_GB && few_keys(caps, kv_len, s.kv_heads * s.group().div_ceil(gb), target, teams * keys) {
                gb = NARROW_GB;
            }
            let gblocks = s.group().div_ceil(gb);
            let (chunk, nchunks) = teams_split(caps, kv_len, s.kv_heads * gblocks, target, teams * keys);
            return Ok(DecodePlan { teams: true, native: false, matrix: None, wg, gb, tile: 0, lanes, keys, prefetch, chunk, nchunks, gblocks });
        }
    }
    let wg = (d / 2).next_power_of_two().clamp(32, 128);
    let tile = 128;
    let gb = head_block(s, mem, 4 * (d + tile + wg))?;
    let gblocks = s.group().div_ceil(gb);
    let want = (TARGET_WORKGROUPS / (s.kv_heads * gblocks)).max(1);
    let nchunks = want.min(MAX_CHUNKS).min(kv_len.div_ceil(MIN_CHUNK)).max(1);
    let chunk = kv_len.div_ceil(nchunks);
    Ok(DecodePlan { teams: false, native: false, matrix: None, wg, gb, tile, lanes: 1, keys: 1, prefetch: false, chunk, nchunks: kv_len.div_ceil(chunk), gblocks })
}

/// The variant a decode the Matrix kernel can't take runs instead: the best other supported one.
fn matrix_fallback(caps: &Caps) -> Variant {
    DECODE.variants.iter().rev().copied().find(|&v| v != Variant::Matrix && DECODE.support(caps, v).is_ok()).unwrap_or(Variant::Portable)
}

/// The Native decode plan, or `None` where the MSL has no entry point for this head_dim.
///
/// The teams kernel with what msl/attn_decode.metal is compiled for: 128 threads,
/// L = min(NP rounded up to a power of two, 32) (NP = the row's 16-byte pieces; 32 = Apple's
/// simdgroup width, checked at run time by the kernel, which falls back to threadgroup-memory team
/// sums on another width), B = min(4, 32 / PPL) keys per team and step, and GB <= min(8, 16 / PPL)
/// heads, taken as the fixed point GB = ceil(group / ceil(group / GB)) because the kernel derives
/// GB from the params as ceil(group / gblocks). The plan is checked against the MSL's static
/// threadgroup arrays (GB * head_dim <= `TO_LEN`, teams * GB cap <= `TML_LEN`); a plan that would
/// not fit returns `None` (never happens for the entry points' head dims; unit-tested). Chunks as
/// for Subgroup (`decode_workgroups` of [`crate::Tuning`] applies; the wg / lanes / keys overrides do not).
///
/// Off Metal (SPIR-V twin mode on Vulkan, a testing aid) L is further capped by the adapter's
/// smallest subgroup size, because there the WGSL twin itself runs on the adapter's subgroups.
pub fn native_decode_plan(caps: &Caps, s: &AttnShape, kv_f16: bool, kv_len: usize) -> Result<Option<DecodePlan>> {
    s.validate()?;
    dims::u32_of("kv_len", kv_len)?;
    let d = s.head_dim;
    if native_decode_entry(d, kv_f16).is_none() {
        return Ok(None);
    }
    let np = (if kv_f16 { d / 2 } else { d }) / 4;
    // What the MSL is compiled for (its L, PPL, GBX, teams).
    let msl_lanes = np.next_power_of_two().min(NATIVE_SIMD_W);
    let msl_ppl = np.div_ceil(msl_lanes);
    let msl_gbx = NATIVE_GB_CAP.min(16 / msl_ppl);
    let msl_teams = NATIVE_WG / msl_lanes;
    let lanes = if caps.backend == wgpu::Backend::Metal { msl_lanes } else { msl_lanes.min(1 << caps.subgroup_min_size.max(1).ilog2()) };
    let ppl = np.div_ceil(lanes);
    if ppl > 8 {
        return Ok(None);
    }
    let keys = 4.min(32 / ppl);
    let teams = NATIVE_WG / lanes;
    let mem = caps.limits.max_compute_workgroup_storage_size as usize;
    let gb = head_block(s, mem.saturating_sub(64), 4 * d + 8 * teams)?.min(NATIVE_GB_CAP).min(16 / ppl);
    let gblocks = s.group().div_ceil(gb);
    let gb = s.group().div_ceil(gblocks);
    let fits = gb <= msl_gbx && gb * d <= NATIVE_TO_LEN && msl_teams * msl_gbx <= NATIVE_TML_LEN && s.group().div_ceil(gb) == gblocks;
    if !fits {
        return Ok(None);
    }
    let target = accepted(caps.tuning.decode_workgroups, |v| (1..=1 << 16).contains(&v)).unwrap_or(528);
    let (chunk, nchunks) = teams_split(caps, kv_len, s.kv_heads * gblocks, target, teams * keys);
    Ok(Some(DecodePlan { teams: true, native: true, matrix: None, wg: NATIVE_WG, gb, tile: 0, lanes, keys, prefetch: false, chunk, nchunks, gblocks }))
}

/// Decode attention over keys `0..kv_len` (the last `window` of them, if set) of a cache of
/// rotated keys, for an already rotated query `q_rot` `[heads, head_dim]` (see [`decode_attention`]).
pub struct DecodeAttention<'a, KV: Elem> {
    pub shape: AttnShape,
    pub q_rot: &'a GpuBuffer<f32>,
    pub k_cache: &'a GpuBuffer<KV>,
    pub v_cache: &'a GpuBuffer<KV>,
    pub kv_len: usize,
    /// Softmax scale; `None` = `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
    /// Sliding window `W`: only the last `W` keys (`kv_len - W ..`) are attended; `None` = all.
    pub window: Option<usize>,
    /// Score soft-cap (`cap * tanh(score / cap)`); `None` = off.
    pub softcap: Option<f32>,
    pub scratch: &'a DecodeScratch,
    pub out: &'a GpuBuffer<f32>,
}

/// Record the split pass and the merge pass of a decode into `out` `[heads, head_dim]`.
pub fn decode_attention<KV: Elem>(b: &mut Batch, a: &DecodeAttention<KV>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&DECODE)?;
    check_attention(a)?;
    ctx.with_native_fallback(&DECODE, |variant| record_decode(b, a, variant, None, None))
}

fn check_attention<KV: Elem>(a: &DecodeAttention<KV>) -> Result<()> {
    let DecodeAttention { shape, q_rot, k_cache, v_cache, kv_len, scratch, out, .. } = *a;
    shape.validate()?;
    ensure(scratch.shape == shape, || Error::Argument(format!("scratch made for {:?}, decode has {shape:?}", scratch.shape)))?;
    let d = shape.head_dim;
    ensure(kv_len > 0, || Error::Shape("kv_len = 0".into()))?;
    dims::u32_of("kv_len", kv_len)?;
    let kv_elems = shape.kv_elems(kv_len)?;
    q_rot.require("q_rot", shape.q_elems(1)?)?;
    k_cache.require("k_cache", kv_elems)?;
    v_cache.require("v_cache", kv_elems)?;
    out.require("out", shape.q_elems(1)?)?;
    window_u32(a.window)?;
    softcap_log2(a.softcap)?;
    scale_log2(a.scale, d).map(|_| ())
}

/// Most chunks a merge that also quantises its output ([`q8::merge_quantize`]) takes: one
/// workgroup per 256 output columns, each invocation summing its 4 columns over every chunk, is
/// quicker than the merge's workgroup per head plus the quantisation at short contexts and slower
/// at long ones. Measured on the H200 (2026-11-28, Llama-3-8B's 32 heads of 128): GPU time per
/// decode step 2.955 -> 2.836 ms from an empty cache (under 32 chunks), 3.196 -> 3.186 at 4096
/// positions (32 chunks), 4.357 -> 4.453 at 32768 (66 chunks).
const MERGE_Q8_MAX_CHUNKS: usize = 32;

/// A dispatch recorded ahead of the attention passes (the append pass of [`decode`]).
type First<'b> = (&'b AttnPipeline, &'b AppendParams, &'b [crate::buffer::BufRef<'b>], [u32; 3]);

/// Record `first` (if any), the split pass for `variant` and the merge pass, and with `q8` the
/// quantisation of the output into it (in the merge's dispatch where the head size is a multiple
/// of 32). Every pipeline is built before anything is recorded, so a Native pipeline that fails
/// to build leaves no stray dispatch behind when [`Context::with_native_fallback`] retries with
/// the fallback variant.
fn record_decode<KV: Elem>(b: &mut Batch, a: &DecodeAttention<KV>, variant: Variant, first: Option<First>, q8: Option<&Q8Activations>) -> Result<()> {
    let DecodeAttention { shape, q_rot, k_cache, v_cache, kv_len, scale, window, softcap, scratch, out } = *a;
    let ctx = b.context();
    let d = shape.head_dim;
    // The keys attended: key_lo .. kv_len (the last `window` of them); the plan splits those.
    let key_lo = kv_len - window.map_or(kv_len, |w| w.min(kv_len));
    let keys = kv_len - key_lo;
    if variant == Variant::Matrix {
        if let (Err(reason), crate::caps::VariantPolicy::Require(_)) = (decode_matrix::matrix_plan(ctx.caps(), &shape, KV::F16, keys), ctx.options().policy) {
            return Err(Error::Unsupported { kernel: DECODE.name, variant, reason });
        }
    }
    let plan = decode_plan(ctx.caps(), variant, &shape, KV::F16, keys)?;
    let scale_log2 = scale_log2(scale, d)?;
    let params = DecodeParams {
        kv_len: kv_len as u32,
        kv_heads: shape.kv_heads as u32,
        heads: shape.heads as u32,
        group: shape.group() as u32,
        chunk: plan.chunk as u32,
        nchunks: plan.nchunks as u32,
        gblocks: plan.gblocks as u32,
        scale_log2,
        key_lo: key_lo as u32,
        softcap: softcap_log2(softcap)?,
        _p0: 0,
        _p1: 0,
    };
    let grid = ctx.grid(dims::prod("chunks * head blocks * kv_heads", &[plan.nchunks, plan.gblocks, shape.kv_heads])? as u64)?;
    let bufs = [q_rot.raw(), k_cache.raw(), v_cache.raw(), scratch.part_o.raw(), scratch.part_ml.raw()];
    let key = plan.key(d, KV::F16, softcap.is_some());
    if let Some((k, _, _, _)) = first {
        ctx.pipeline(k)?;
    }
    ctx.pipeline(&key)?;
    // Merge loads in flight: 8 (`Tuning::decode_merge_unroll` 1..8 overrides; 4 was the old loop).
    let merge = AttnPipeline::Merge { unroll: accepted(ctx.caps().tuning.decode_merge_unroll, |v| (1..=8).contains(&v)).unwrap_or(8) as u32 };
    let fused = q8.is_some() && d % q8::QB == 0 && plan.nchunks <= MERGE_Q8_MAX_CHUNKS;
    if fused {
        ctx.pipeline(&q8::Q8Pipeline::MergeQuantize)?;
    } else {
        ctx.pipeline(&merge)?;
        if q8.is_some() {
            ctx.pipeline(&q8::Q8Pipeline::Quantize)?;
        }
    }
    if let Some((k, p, bufs, grid)) = first {
        b.dispatch(k, p, bufs, grid)?;
    }
    b.dispatch(&key, &params, &bufs, grid)?;
    match q8 {
        Some(xq) if fused => {
            let parts = MergeParts { part_o: &scratch.part_o, part_ml: &scratch.part_ml, heads: shape.heads, nchunks: plan.nchunks, d };
            q8::record_merge_quantize(b, &parts, out, xq)
        }
        _ => {
            let mp = MergeParams { heads: shape.heads as u32, nchunks: plan.nchunks as u32, d: d as u32, _p: 0 };
            b.dispatch(&merge, &mp, &[scratch.part_o.raw(), scratch.part_ml.raw(), out.raw()], ctx.grid(shape.heads as u64)?)?;
            q8.map_or(Ok(()), |xq| q8::record_quantize(b, out, xq, 1))
        }
    }
}

/// One decode step (see [`decode`]).
pub struct Decode<'a, KV: Elem> {
    pub shape: AttnShape,
    /// Position of the new token; the cache holds rotated keys for positions `0..pos`.
    pub pos: usize,
    pub layout: PairLayout,
    pub scale: Option<f32>,
    /// Sliding window `W`: the token attends to positions `pos - W + 1 ..= pos`; `None` = all.
    pub window: Option<usize>,
    /// Score soft-cap (`cap * tanh(score / cap)`); `None` = off.
    pub softcap: Option<f32>,
    /// New token's q `[heads, d]`, k and v `[kv_heads, d]`, unrotated, f32.
    pub q: &'a GpuBuffer<f32>,
    pub k_new: &'a GpuBuffer<f32>,
    pub v_new: &'a GpuBuffer<f32>,
    /// Caches `[capacity, kv_heads, d]`; row `pos` is written.
    pub k_cache: &'a GpuBuffer<KV>,
    pub v_cache: &'a GpuBuffer<KV>,
    pub capacity: usize,
    pub table: &'a RopeTable,
    pub scratch: &'a DecodeScratch,
    pub out: &'a GpuBuffer<f32>,
}

/// Record one decode step: rotate q and k at `pos`, append k and v to the caches, attend over
/// positions `0..=pos` (the last `window` of them, if set; split-K + merge).
pub fn decode<KV: Elem>(b: &mut Batch, a: &Decode<KV>) -> Result<()> {
    record_step(b, a, None)
}

/// [`decode`], and the quantisation of its output into `xq` (int8 activations of one row of
/// `heads * head_dim`, for the output projection's GEMV,
/// [`crate::kernels::matmul::gemv_q8`]): where the head size is a multiple of 32 and the split
/// has at most 32 chunks (short and medium contexts) the merge pass writes both
/// ([`q8::merge_quantize`]: one dispatch fewer), else the quantisation
/// ([`q8::quantize_activations`]) follows the merge. `xq` holds exactly the quantisation of the output
/// written.
pub fn decode_q8<KV: Elem>(b: &mut Batch, a: &Decode<KV>, xq: &Q8Activations) -> Result<()> {
    xq.require_one_row("decode_q8")?;
    let k = a.shape.q_elems(1)?;
    ensure(xq.k() == k, || Error::Shape(format!("decode output of heads * head_dim = {k} into q8 activations of k = {}", xq.k())))?;
    record_step(b, a, Some(xq))
}

/// [`decode`] and [`decode_q8`].
fn record_step<KV: Elem>(b: &mut Batch, a: &Decode<KV>, q8: Option<&Q8Activations>) -> Result<()> {
    let ctx = b.context();
    let s = a.shape;
    s.validate()?;
    s.check_table(a.table)?;
    let d = s.head_dim;
    ensure(a.pos < a.capacity, || Error::Shape(format!("position {} does not fit a cache of {} tokens", a.pos, a.capacity)))?;
    let pos = dims::u32_of("pos", a.pos)?;
    a.table.check_positions(a.pos as u64)?;
    a.q.require("q", s.q_elems(1)?)?;
    a.k_new.require("k_new", s.kv_elems(1)?)?;
    a.v_new.require("v_new", s.kv_elems(1)?)?;
    let cache = s.kv_elems(a.capacity)?;
    a.k_cache.require("k_cache", cache)?;
    a.v_cache.require("v_cache", cache)?;
    ensure(a.scratch.shape == s, || Error::Argument(format!("scratch made for {:?}, decode has {s:?}", a.scratch.shape)))?;
    let params = AppendParams { heads: s.heads as u32, kv_heads: s.kv_heads as u32, d: d as u32, half: (d / 2) as u32, pos, table_half: (d / 2) as u32, _p0: 0, _p1: 0 };
    // heads + 2 kv_heads <= 3 heads; heads * d fits 32 bits (validate): no overflow in usize.
    let units = (s.heads + 2 * s.kv_heads) * d / 2;
    let key = AttnPipeline::Append { kv_f16: KV::F16, neox: a.layout == PairLayout::HalfSplit };
    let bufs = [a.q.raw(), a.k_new.raw(), a.v_new.raw(), a.table.buffer().raw(), a.scratch.q_rot.raw(), a.k_cache.raw(), a.v_cache.raw()];
    let grid = ctx.grid((units as u64).div_ceil(64))?;
    let attend = DecodeAttention {
        shape: s,
        q_rot: &a.scratch.q_rot,
        k_cache: a.k_cache,
        v_cache: a.v_cache,
        kv_len: a.pos + 1,
        scale: a.scale,
        window: a.window,
        softcap: a.softcap,
        scratch: a.scratch,
        out: a.out,
    };
    ctx.variant_for(&DECODE)?;
    check_attention(&attend)?;
    ctx.with_native_fallback(&DECODE, |variant| record_decode(b, &attend, variant, Some((&key, &params, &bufs[..], grid)), q8))
}
