//! Attention with fused RoPE: flash-attention prefill and split-K decode, GQA throughout.
//!
//! Layouts: Q and O `[tokens, heads, head_dim]` f32; K and V `[kv_tokens, kv_heads, head_dim]`, f32
//! or f16 ([`Elem`]). `O = softmax(Q K^T * scale + mask) V` per query head; query head `h` reads
//! KV head `h / (heads / kv_heads)`. Query token `t` sits at absolute position `offset + t`; when
//! causal it sees keys `j <= offset + t`. RoPE comes from a [`RopeTable`] (any scaling mode).
//!
//! * [`prefill`]: rotates Q (at `offset + t`) and, unless the keys come rotated, K (key `j` at
//!   position `j`) while loading tiles into workgroup memory; online softmax over KV tiles; one
//!   workgroup holds BQ (token, head-of-group) rows so a K/V tile serves the whole GQA group.
//!   Tile sizes are chosen from the adapter's workgroup-memory limit (16 KiB fits every head_dim).
//! * [`decode`]: one new token: rotates its q and k (k appended to the cache, which holds rotated
//!   keys), then splits the KV length across workgroups (each reads a K/V row once for all query
//!   heads of its group, up to 8) and merges the partial results by log-sum-exp.
//!
//! Variants: decode has Portable (one invocation per key, tree reductions in workgroup memory),
//! Subgroup (teams of subgroup lanes read each K/V row as consecutive 16-byte pieces and
//! complete the dot products with subgroupShuffleXor; no barrier in the key loop; any subgroup
//! size, see attn_decode_subgroup.wgsl) and Native (Metal passthrough: msl/attn_decode.metal, the
//! same teams kernel in MSL with simd_shuffle_xor, one entry point per K/V type and head_dim 64,
//! 80, 96, 128, 256; its WGSL twin is the Subgroup teams pipeline of the same plan). The Native
//! variant replaces only the split-K partial pass: the append (RoPE + KV write) and merge passes
//! are not simdgroup paths and stay the WGSL pipelines every variant uses; head dims without an
//! MSL entry point run the Subgroup plan (see [`decode_plan`]).
//!
//! Prefill has Portable (f32 tile products, one invocation per row of the online softmax),
//! Subgroup (the same products; each softmax row is spread over a subgroup's lanes with
//! subgroupShuffleXor, any subgroup size) and Matrix (cooperative matrices, f16 inputs and f32
//! sums; see [`prefill_matrix`]), which takes head_dim a multiple of 16 and otherwise falls back
//! (or, when required, is unsupported for that shape).
//!
//! Sources: wgsl/attn_prefill.wgsl (+ _portable / _subgroup), attn_prefill_matrix.wgsl (both + attn_prefill_params.wgsl),
//! attn_append.wgsl, attn_decode.wgsl + attn_decode_portable.wgsl (Portable),
//! attn_decode_subgroup.wgsl (Subgroup), attn_merge.wgsl; msl/attn_decode.metal (Native decode).

pub mod cases;
pub mod decode_matrix;
pub mod prefill_matrix;

pub use cases::kernels;

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::kernels::rope::{Elem, PairLayout, RopeTable, MAX_HEAD_DIM};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};

/// Prefill variants, most preferred last: Matrix where it runs; then Portable ahead of Subgroup,
/// which measured 3-4% slower on the H200 (the serial per-row softmax of one warp overlaps the
/// other warps' V loads; see BENCHMARKS.md).
pub const PREFILL: KernelInfo =
    KernelInfo { name: "attn_prefill", variants: &[Variant::Subgroup, Variant::Portable, Variant::Matrix], extra: Some(prefill_matrix::prefill_extra) };
/// Decode variants, least preferred first. Native and Matrix replace the split-K partial pass
/// only; Matrix takes f16 caches (see [`decode_matrix`]), other decodes fall back. Matrix ranks
/// below Subgroup: on the H100 (2026-11-22) it measured 2.3-2.8x slower than the teams kernel at
/// kv 4k-32k (BENCHMARKS.md), so it runs only when asked for (`Prefer` / `Require`).
pub const DECODE: KernelInfo =
    KernelInfo { name: "attn_decode", variants: &[Variant::Portable, Variant::Matrix, Variant::Subgroup, Variant::Native], extra: Some(decode_extra) };

/// `KernelInfo::extra` of the decode: the Matrix variant's adapter-level needs (one subgroup per
/// workgroup).
fn decode_extra(caps: &Caps, v: Variant) -> std::result::Result<(), String> {
    match v {
        Variant::Matrix => prefill_matrix::matrix_support_with(caps, 1).map(|_| ()),
        _ => Ok(()),
    }
}

const PREFILL_WGSL: &str = include_str!("../../../wgsl/attn_prefill.wgsl");
/// `struct Params` of every prefill pipeline (the layout of [`PrefillParams`]).
const PREFILL_PARAMS_WGSL: &str = include_str!("../../../wgsl/attn_prefill_params.wgsl");
const PREFILL_PORTABLE: &str = include_str!("../../../wgsl/attn_prefill_portable.wgsl");
const PREFILL_SUBGROUP: &str = include_str!("../../../wgsl/attn_prefill_subgroup.wgsl");
const DECODE_WGSL: &str = include_str!("../../../wgsl/attn_decode.wgsl");
const DECODE_PORTABLE: &str = include_str!("../../../wgsl/attn_decode_portable.wgsl");
const DECODE_SUBGROUP: &str = include_str!("../../../wgsl/attn_decode_subgroup.wgsl");
const MERGE_WGSL: &str = include_str!("../../../wgsl/attn_merge.wgsl");
const APPEND_WGSL: &str = include_str!("../../../wgsl/attn_append.wgsl");
const DECODE_MSL: &str = include_str!("../../../msl/attn_decode.metal");

/// Head dims with a Native (MSL) decode entry point: (head_dim, f32 K/V entry, f16 K/V entry).
const NATIVE_ENTRIES: [(usize, &str, &str); 5] = [
    (64, "attn_decode_f32_d64", "attn_decode_f16_d64"),
    (80, "attn_decode_f32_d80", "attn_decode_f16_d80"),
    (96, "attn_decode_f32_d96", "attn_decode_f16_d96"),
    (128, "attn_decode_f32_d128", "attn_decode_f16_d128"),
    (256, "attn_decode_f32_d256", "attn_decode_f16_d256"),
];
/// Threads per threadgroup of the Native decode (`WG` in msl/attn_decode.metal).
const NATIVE_WG: usize = 128;
/// Team width bound the MSL is compiled for: Apple's simdgroup width (`SIMD_W`).
const NATIVE_SIMD_W: usize = 32;
/// Most query heads per threadgroup (`GB_CAP`).
const NATIVE_GB_CAP: usize = 8;
/// Static threadgroup arrays of the MSL: team (m, l) slots (`TML_LEN`, float2) and the combined
/// O (`TO_LEN`, float).
const NATIVE_TML_LEN: usize = 128;
const NATIVE_TO_LEN: usize = 2048;
/// The sizes above by their names in msl/attn_decode.metal (tests/msl_bindings.rs checks them).
pub const NATIVE_DECODE_MSL_CONSTS: [(&str, usize); 5] =
    [("WG", NATIVE_WG), ("SIMD_W", NATIVE_SIMD_W), ("GB_CAP", NATIVE_GB_CAP), ("TML_LEN", NATIVE_TML_LEN), ("TO_LEN", NATIVE_TO_LEN)];

/// The MSL entry point of the Native decode for head_dim `d` and K/V type, if it has one.
pub fn native_decode_entry(d: usize, kv_f16: bool) -> Option<&'static str> {
    NATIVE_ENTRIES.iter().find(|e| e.0 == d).map(|e| if kv_f16 { e.2 } else { e.1 })
}

/// Most chunks a decode splits the KV length into (sizes [`DecodeScratch`]).
pub const MAX_CHUNKS: usize = 256;
/// Workgroups a decode aims for (enough to fill a large GPU).
const TARGET_WORKGROUPS: usize = 1024;
/// Fewest keys per decode chunk.
const MIN_CHUNK: usize = 64;
const PREFILL_WG: usize = 128;
/// Invocations of the merge pass (attn_merge.wgsl's WG).
const MERGE_WG: u32 = 256;

/// Head counts and head dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl AttnShape {
    pub fn new(heads: usize, kv_heads: usize, head_dim: usize) -> AttnShape {
        AttnShape { heads, kv_heads, head_dim }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// heads, kv_heads > 0; heads % kv_heads == 0; head_dim even, 2..=256.
    pub fn validate(&self) -> Result<()> {
        let (h, kvh, d) = (self.heads, self.kv_heads, self.head_dim);
        ensure(h > 0 && kvh > 0, || Error::Shape(format!("heads = {h}, kv_heads = {kvh}: both must be > 0")))?;
        ensure(h % kvh == 0, || Error::Shape(format!("heads = {h} is not a multiple of kv_heads = {kvh}")))?;
        ensure(d >= 2 && d % 2 == 0, || Error::Shape(format!("head_dim = {d} must be even and >= 2")))?;
        ensure(d <= MAX_HEAD_DIM, || Error::Shape(format!("head_dim = {d} over the supported maximum {MAX_HEAD_DIM}")))
    }

    fn check_table(&self, table: &RopeTable) -> Result<()> {
        ensure(table.head_dim() == self.head_dim, || {
            Error::Shape(format!("RoPE table is for head_dim {}, attention has {}", table.head_dim(), self.head_dim))
        })
    }
}

/// Prefill arguments (see the module docs for the semantics).
pub struct Prefill<'a, KV: Elem> {
    pub shape: AttnShape,
    pub tokens: usize,
    /// Absolute position of query token 0.
    pub offset: usize,
    /// Keys in `k` / `v` (must cover `offset + tokens`).
    pub kv_len: usize,
    pub causal: bool,
    /// `k` holds rotated keys (a cache); otherwise key `j` is rotated at position `j` on load.
    pub k_rotated: bool,
    pub layout: PairLayout,
    /// Softmax scale; `None` = `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
    pub q: &'a GpuBuffer<f32>,
    pub k: &'a GpuBuffer<KV>,
    pub v: &'a GpuBuffer<KV>,
    pub table: &'a RopeTable,
    pub out: &'a GpuBuffer<f32>,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct PrefillParams {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,
    kv_len: u32,
    offset: u32,
    causal: u32,
    rotate_k: u32,
    row_blocks: u32,
    table_half: u32,
    scale_log2: f32,
    _p: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DecodeParams {
    kv_len: u32,
    kv_heads: u32,
    heads: u32,
    group: u32,
    chunk: u32,
    nchunks: u32,
    gblocks: u32,
    scale_log2: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MergeParams {
    heads: u32,
    nchunks: u32,
    d: u32,
    _p: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct AppendParams {
    heads: u32,
    kv_heads: u32,
    d: u32,
    half: u32,
    pos: u32,
    table_half: u32,
    _p: [u32; 2],
}

const PREFILL_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q", "f32"),
    StorageBinding::read("k", "u32"),
    StorageBinding::read("v", "u32"),
    StorageBinding::read("table", "vec2<f32>"),
    StorageBinding::write("out", "f32"),
];
const DECODE_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q_rot", "f32"),
    StorageBinding::read("k_cache", "vec4<u32>"),
    StorageBinding::read("v_cache", "vec4<u32>"),
    StorageBinding::write("part_o", "f32"),
    StorageBinding::write("part_ml", "vec2<f32>"),
];
/// The Matrix decode's bindings: K and V as 8-byte vectors of f16, staged without conversion into
/// the f16 workgroup memory its cooperative matrices load from.
const DECODE_BINDINGS_F16: &[StorageBinding] = &[
    StorageBinding::read("q_rot", "f32"),
    StorageBinding::read("k_cache", "vec4<f16>"),
    StorageBinding::read("v_cache", "vec4<f16>"),
    StorageBinding::write("part_o", "f32"),
    StorageBinding::write("part_ml", "vec2<f32>"),
];
const MERGE_BINDINGS: &[StorageBinding] =
    &[StorageBinding::read("part_o", "f32"), StorageBinding::read("part_ml", "vec2<f32>"), StorageBinding::write("out", "f32")];
const APPEND_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q", "f32"),
    StorageBinding::read("k_new", "f32"),
    StorageBinding::read("v_new", "f32"),
    StorageBinding::read("table", "vec2<f32>"),
    StorageBinding::write("q_rot", "f32"),
    StorageBinding::write("k_cache", "u32"),
    StorageBinding::write("v_cache", "u32"),
];

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttnPipeline {
    /// Portable or Subgroup prefill.
    Prefill { subgroup: bool, d: u32, bq: u32, bk: u32, kv_f16: bool, neox: bool },
    /// Matrix prefill (see [`prefill_matrix`]); `sg` is the subgroup size it is built for.
    PrefillMatrix { d: u32, bk: u32, sg: u32, nsg: u32, neox: bool, tau: u32 },
    /// The Matrix prefill's staging pass: K (rotated unless it comes rotated) or V to f16.
    PrefillStage { d: u32, in_f16: bool, neox: bool },
    /// One invocation per key, tiles of `tile` keys, workgroup-memory reductions (Portable).
    Decode { d: u32, gb: u32, tile: u32, wg: u32, kv_f16: bool },
    /// Teams of `lanes` subgroup lanes per key, `keys` keys per team and step: Subgroup (WGSL) or
    /// Native (the MSL entry point for `d` and the K/V type; its twin is the Subgroup key).
    /// `prefetch`: the next step's loads are issued before this step's math (the MSL never does).
    DecodeTeams { variant: Variant, d: u32, gb: u32, wg: u32, lanes: u32, keys: u32, kv_f16: bool, prefetch: bool },
    /// Matrix partial pass for f16 caches (see [`decode_matrix`]): `nw` subgroups of `sg`
    /// invocations, scores of up to `maxc` keys per chunk.
    DecodeMatrix { d: u32, gb: u32, sg: u32, nw: u32, maxc: u32 },
    /// `unroll`: chunks summed per round (loads in flight per invocation, 1..8).
    Merge { unroll: u32 },
    Append { kv_f16: bool, neox: bool },
}

fn flag(b: bool) -> f64 {
    b as u32 as f64
}

impl PipelineKey for AttnPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            AttnPipeline::PrefillMatrix { d, bk, sg, nsg, neox, tau } => prefill_matrix::matrix_desc(d, bk, sg, nsg, neox, f32::from_bits(tau)),
            AttnPipeline::DecodeMatrix { d, gb, sg, nw, maxc } => decode_matrix::matrix_desc(d, gb, sg, nw, maxc),
            AttnPipeline::PrefillStage { d, in_f16, neox } => prefill_matrix::stage_desc(d, in_f16, neox),
            AttnPipeline::Prefill { subgroup, d, bq, bk, kv_f16, neox } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![if subgroup { PREFILL_SUBGROUP } else { PREFILL_PORTABLE }, PREFILL_PARAMS_WGSL, PREFILL_WGSL]),
                entry: "main",
                constants: {
                    let (rq, rk) = score_block(bq as usize, bk as usize);
                    vec![
                        ("D", d as f64),
                        ("BQ", bq as f64),
                        ("BK", bk as f64),
                        ("RQ", rq as f64),
                        ("RK", rk as f64),
                        ("RO", pv_rows(bq as usize) as f64),
                        ("KV_F16", flag(kv_f16)),
                        ("NEOX", flag(neox)),
                    ]
                },
                workgroup_size: [PREFILL_WG as u32, 1, 1],
                params_size: std::mem::size_of::<PrefillParams>() as u64,
                bindings: PREFILL_BINDINGS,
            },
            AttnPipeline::Decode { d, gb, tile, wg, kv_f16 } => {
                let words = if kv_f16 { d / 2 } else { d };
                PipelineDesc {
                    source: ShaderSource::Wgsl(vec![DECODE_PORTABLE, DECODE_WGSL]),
                    entry: "main",
                    constants: vec![
                        ("D", d as f64),
                        ("GB", gb as f64),
                        ("TILE", tile as f64),
                        ("WG", wg as f64),
                        ("KV_F16", flag(kv_f16)),
                        ("VEC4", flag(words % 4 == 0)),
                    ],
                    workgroup_size: [wg, 1, 1],
                    params_size: std::mem::size_of::<DecodeParams>() as u64,
                    bindings: DECODE_BINDINGS,
                }
            }
            AttnPipeline::DecodeTeams { variant: Variant::Native, d, gb, wg, lanes, keys, kv_f16, .. } => {
                let twin = AttnPipeline::DecodeTeams { variant: Variant::Subgroup, d, gb, wg, lanes, keys, kv_f16, prefetch: false }.describe(_caps);
                // decode_plan makes Native keys only for head dims with an entry point; a key
                // made otherwise names none and fails to build (falls back, never runs wrong).
                PipelineDesc::native(DECODE_MSL, native_decode_entry(d as usize, kv_f16).unwrap_or("attn_decode_no_entry_point"), twin)
            }
            AttnPipeline::DecodeTeams { d, gb, wg, lanes, keys, kv_f16, prefetch, .. } => {
                let words = if kv_f16 { d / 2 } else { d };
                PipelineDesc {
                    source: ShaderSource::Wgsl(vec![DECODE_SUBGROUP]),
                    entry: "main",
                    constants: vec![
                        ("D", d as f64),
                        ("GB", gb as f64),
                        ("WG", wg as f64),
                        ("L", lanes as f64),
                        ("B", keys as f64),
                        ("KV_F16", flag(kv_f16)),
                        ("VEC", flag(words % 4 == 0)),
                        ("PF", flag(prefetch)),
                    ],
                    workgroup_size: [wg, 1, 1],
                    params_size: std::mem::size_of::<DecodeParams>() as u64,
                    bindings: DECODE_BINDINGS,
                }
            }
            AttnPipeline::Merge { unroll } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![MERGE_WGSL]),
                entry: "main",
                constants: vec![("U", unroll as f64)],
                workgroup_size: [MERGE_WG, 1, 1],
                params_size: std::mem::size_of::<MergeParams>() as u64,
                bindings: MERGE_BINDINGS,
            },
            AttnPipeline::Append { kv_f16, neox } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![APPEND_WGSL]),
                entry: "main",
                constants: vec![("KV_F16", flag(kv_f16)), ("NEOX", flag(neox))],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<AppendParams>() as u64,
                bindings: APPEND_BINDINGS,
            },
        }
    }
}

/// Scores per invocation (rows x keys) for a BQ x BK tile over [`PREFILL_WG`] invocations.
fn score_block(bq: usize, bk: usize) -> (usize, usize) {
    match (bq * bk / PREFILL_WG).max(1) {
        1 => (1, 1),
        2 => (2.min(bq), 1),
        4 => (2.min(bq), 2),
        _ => (4.min(bq), 2),
    }
}

/// Rows per invocation in the prefill's P V product (4 at BQ = 32: 16 invocations per row
/// group, at most 8 column pairs each for head_dim 256).
fn pv_rows(bq: usize) -> usize {
    (bq / 8).clamp(1, 4)
}

/// Prefill tiles (rows per workgroup, keys per tile) for head_dim `d` within `mem` bytes of
/// workgroup memory, with at most `rows` rows worth having.
pub fn prefill_tiles(d: usize, rows: usize, mem: usize) -> Result<(usize, usize)> {
    let half = d / 2;
    let candidates = [(32, 32), (16, 32), (16, 16), (8, 16), (8, 8), (4, 8), (4, 4), (2, 4), (1, 4)];
    let max_rows = rows.next_power_of_two().max(1);
    for (bq, bk) in candidates {
        let bq = usize::min(bq, max_rows);
        let bytes = 4 * (bq * (d + 1) + bk * (d + 1) + bq * (bk + 1) + 3 * bq);
        let ro = pv_rows(bq);
        let pairs_per_inv = half.div_ceil(PREFILL_WG * ro / bq);
        if bytes <= mem && ro * pairs_per_inv <= 32 {
            return Ok((bq, bk));
        }
    }
    Err(Error::Limit(format!("head_dim {d} needs more workgroup memory than the adapter's {mem} bytes")))
}

/// The prefill pipeline for head_dim `d` in `ctx`: the selected variant, or, when the Matrix
/// variant is selected but can't take this head_dim (not a multiple of 16, tiles over the
/// workgroup-memory limit), the best other supported variant, unless Matrix is required
/// ([`crate::Error::Unsupported`] then).
pub fn prefill_pipeline(ctx: &Context, d: usize, kv_f16: bool, neox: bool, rows: usize) -> Result<(Variant, AttnPipeline)> {
    let mut variant = ctx.variant_for(&PREFILL)?;
    if variant == Variant::Matrix {
        match prefill_matrix::matrix_key(ctx.caps(), d, neox) {
            Ok(key) => return Ok((variant, key)),
            Err(reason) => {
                if let crate::caps::VariantPolicy::Require(_) = ctx.options().policy {
                    return Err(Error::Unsupported { kernel: PREFILL.name, variant, reason });
                }
                variant = PREFILL.variants.iter().rev().copied().find(|&v| v != Variant::Matrix && PREFILL.support(ctx.caps(), v).is_ok()).unwrap_or(Variant::Portable);
            }
        }
    }
    let (bq, bk) = prefill_tiles(d, rows, ctx.caps().limits.max_compute_workgroup_storage_size as usize)?;
    Ok((variant, AttnPipeline::Prefill { subgroup: variant == Variant::Subgroup, d: d as u32, bq: bq as u32, bk: bk as u32, kv_f16, neox }))
}

/// Record a prefill (see [`Prefill`]).
pub fn prefill<KV: Elem>(b: &mut Batch, a: &Prefill<KV>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&PREFILL)?;
    let s = a.shape;
    s.validate()?;
    s.check_table(a.table)?;
    let d = s.head_dim;
    ensure(a.tokens > 0, || Error::Shape("tokens = 0".into()))?;
    ensure(a.kv_len >= a.offset + a.tokens, || {
        Error::Shape(format!("kv_len = {} is shorter than offset + tokens = {}", a.kv_len, a.offset + a.tokens))
    })?;
    a.table.check_positions((a.offset + a.tokens - 1) as u64)?;
    if !a.k_rotated {
        a.table.check_positions(a.kv_len as u64 - 1)?;
    }
    let q_len = a.tokens * s.heads * d;
    ensure((a.kv_len * s.kv_heads * d) as u64 <= u32::MAX as u64 && q_len as u64 <= u32::MAX as u64, || Error::Shape("tensor over 2^32 elements".into()))?;
    a.q.require("q", q_len)?;
    a.out.require("out", q_len)?;
    a.k.require("k", a.kv_len * s.kv_heads * d)?;
    a.v.require("v", a.kv_len * s.kv_heads * d)?;
    let rows = a.tokens * s.group();
    let (_, key) = prefill_pipeline(ctx, d, KV::F16, a.layout == PairLayout::HalfSplit, rows)?;
    let bq = match key {
        AttnPipeline::Prefill { bq, .. } => bq as usize,
        AttnPipeline::PrefillMatrix { nsg, .. } => prefill_matrix::rows_per_workgroup(nsg),
        _ => return Err(Error::Argument("not a prefill pipeline".into())),
    };
    let row_blocks = rows.div_ceil(bq);
    let scale = a.scale.unwrap_or(1.0 / (d as f32).sqrt());
    let params = PrefillParams {
        tokens: a.tokens as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        group: s.group() as u32,
        kv_len: a.kv_len as u32,
        offset: a.offset as u32,
        causal: a.causal as u32,
        rotate_k: !a.k_rotated as u32,
        row_blocks: row_blocks as u32,
        table_half: (d / 2) as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        _p: 0,
    };
    let grid = ctx.grid((row_blocks * s.kv_heads) as u64)?;
    if let AttnPipeline::PrefillMatrix { .. } = key {
        return prefill_matrix::encode(b, a, key, params, grid);
    }
    b.dispatch(&key, &params, &[a.q.raw(), a.k.raw(), a.v.raw(), a.table.buffer().raw(), a.out.raw()], grid)
}

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
        Ok(DecodeScratch { shape, q_rot: ctx.alloc(h * d)?, part_o: ctx.alloc(h * MAX_CHUNKS * d)?, part_ml: ctx.alloc(h * MAX_CHUNKS)? })
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
    /// The partial pass's pipeline for head_dim `d` and the cache's element type.
    pub fn key(&self, d: usize, kv_f16: bool) -> AttnPipeline {
        let (d, gb, wg) = (d as u32, self.gb as u32, self.wg as u32);
        if let Some(m) = self.matrix {
            AttnPipeline::DecodeMatrix { d, gb, sg: m.sg as u32, nw: m.nw as u32, maxc: m.maxc as u32 }
        } else if self.teams {
            let variant = if self.native { Variant::Native } else { Variant::Subgroup };
            AttnPipeline::DecodeTeams { variant, d, gb, wg, lanes: self.lanes as u32, keys: self.keys as u32, kv_f16, prefetch: self.prefetch }
        } else {
            AttnPipeline::Decode { d, gb, tile: self.tile as u32, wg, kv_f16 }
        }
    }
}

/// A tuning override from the environment, if set and accepted by `ok`.
fn knob(name: &str, ok: impl Fn(usize) -> bool) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok().filter(|&v| ok(v))
}

/// Chunks of a multiple of `step` keys so that about `target` workgroups run (at most
/// [`MAX_CHUNKS`] per head block), but at least `min_chunk` keys: (chunk, nchunks).
fn split(kv_len: usize, blocks: usize, target: usize, step: usize, min_chunk: usize) -> (usize, usize) {
    let want = target.div_ceil(blocks).clamp(1, MAX_CHUNKS);
    let chunk = kv_len.div_ceil(want).max(min_chunk).div_ceil(step) * step;
    (chunk, kv_len.div_ceil(chunk))
}

/// Fewest keys per chunk of the teams kernel at long contexts (`WGKERNELS_DECODE_MINCHUNK`
/// overrides, and then also applies at short ones). At kv 4k (32/8 heads, d 128) the
/// 528-workgroup target alone makes 64-key chunks (512 workgroups of two steps); 128-key chunks
/// (256 workgroups) halve the partial rows to write and merge and the per-workgroup fixed cost
/// (q load, team combine). Measured on the H200 (2026-11-22) at 4k, no prefetch, merge U=4: f16
/// 24.5 vs 25.8 µs; f32 27.1 vs 26.5 (with prefetch f32 takes 25.0 at 128-key chunks); 256-key
/// chunks: 27.9 / 32.9; on the H100 (2026-11-25, attend-only) f16 21.3 µs with 128-key chunks
/// against 23.6 with 64.
fn teams_min_chunk() -> Option<usize> {
    knob("WGKERNELS_DECODE_MINCHUNK", |v| v <= 1 << 20)
}

/// Workgroups a short context is spread over, and the fewest keys per chunk it may take.
const SHORT_WORKGROUPS: usize = 256;
const SHORT_MIN_CHUNK: usize = 16;

/// (chunk, nchunks) of the teams kernel: about `target` workgroups with chunks of at least 128
/// keys. Where that leaves fewer than [`SHORT_WORKGROUPS`] (short contexts), smaller chunks
/// (at least 16 keys) spread the keys over about that many, since there each team's serial key
/// steps, not the bytes, set the time. Measured on the H100 (2026-11-25, f16 attend-only, 32/8
/// heads, d 128; benches/peers/results/2026-11-25-s6 run 7), single µs with 128-key chunks ->
/// this rule: kv 256 17.2 -> 14.4, 512 17.4 -> 14.9, 1024 19.0 -> 16.2, 2048 18.8 -> 17.9 (f32
/// 17.0 -> 12.9, 17.7 -> 13.9, 18.4 -> 15.5, 19.3 -> 18.4); from 4k on nothing changes (twice the
/// workgroups at 4k measured 23.6 against 21.3).
fn teams_split(kv_len: usize, blocks: usize, target: usize, step: usize) -> (usize, usize) {
    if let Some(min_chunk) = teams_min_chunk() {
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
    (1..=s.group().min(8))
        .rev()
        .find(|gb| gb * per_head <= mem)
        .ok_or_else(|| Error::Limit(format!("head_dim {d} needs more workgroup memory than the adapter's {mem} bytes")))
}

/// The split of a decode over `kv_len` keys for `variant` on an adapter with `caps`.
///
/// Subgroup: the teams kernel with L = the row's 16-byte pieces rounded up to a power of two,
/// at most the adapter's smallest subgroup size and 32, 128 invocations, the next step's loads
/// issued before this step's math (prefetch), keys per team and step 4 (f32) or 2 (f16), chunks
/// of at least 128 keys sized for about 4 workgroups per SM of a 132-SM GPU (smaller chunks at
/// short contexts: [`teams_split`]). On NVIDIA (H100, session 6) this kernel keeps at most 512
/// invocations resident per SM (128 registers each), so 4 x 128 is one full wave and a bigger
/// grid only adds a partial second one (f16 32k: 512 workgroups 67.0 µs, 656 83.5;
/// benches/peers/results/2026-11-25-s6). Measured on the H200
/// (2026-11-22, 32/8 heads, d 128, single µs at kv 4k / 16k / 32k; examples/decode_sweep):
/// f16 B=2 with prefetch 23.4 / 41.2 / 59.1, B=4 with prefetch 23.5 / 51.7 / 70.5, B=4 without
/// 24.1 / 43.2 / 60.1; f32 B=4 with prefetch 25.0 / 50.9 / 81.1, without 26.9 / 52.0 / 82.9,
/// B=2 with prefetch 26.3 / 51.0 / 83.0. Rows that would need more than
/// 8 pieces per lane (e.g. head_dim 256 f32 at subgroup size 4, or a head_dim that is not a
/// multiple of 4 (f32) / 8 (f16), whose 4-byte pieces are many) fall back to the Portable kernel. The teams kernel's register arrays bound GB * pieces per lane to 16 and
/// keys * pieces per lane to 32. Tuning overrides: `WGKERNELS_DECODE_WG` (64..1024), `_LANES`
/// (max L), `_KEYS` (1..8), `_WGS` (target workgroups), `_PF` (0: no prefetch of the next step),
/// `_MINCHUNK` (fewest keys per chunk), `_GB` (most query heads per workgroup, 1..8).
///
/// Native: see [`native_decode_plan`]; head dims without an MSL entry point take the Subgroup plan.
pub fn decode_plan(caps: &Caps, variant: Variant, s: &AttnShape, kv_f16: bool, kv_len: usize) -> Result<DecodePlan> {
    let d = s.head_dim;
    let mem = caps.limits.max_compute_workgroup_storage_size as usize;
    let pow2 = |v: usize| v.is_power_of_two();
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
        let max_lanes = knob("WGKERNELS_DECODE_LANES", |v| pow2(v) && v <= 128).unwrap_or(32);
        let lanes = pieces.next_power_of_two().min(sg).min(max_lanes);
        let max_wg = caps.limits.max_compute_invocations_per_workgroup as usize;
        let wg = knob("WGKERNELS_DECODE_WG", |v| pow2(v) && (64..=1024).contains(&v)).unwrap_or(128).min(max_wg).max(lanes);
        let teams = wg / lanes;
        let ppl = pieces.div_ceil(lanes);
        if ppl <= 8 {
            let prefetch = knob("WGKERNELS_DECODE_PF", |v| v <= 1) != Some(0);
            let keys = knob("WGKERNELS_DECODE_KEYS", |v| (1..=8).contains(&v)).unwrap_or(if kv_f16 && prefetch { 2 } else { 4 }).min(32 / ppl);
            let max_gb = knob("WGKERNELS_DECODE_GB", |v| (1..=8).contains(&v)).unwrap_or(8);
            let gb = head_block(s, mem.saturating_sub(64), 4 * d + 8 * teams)?.min(16 / ppl).min(max_gb);
            let gblocks = s.group().div_ceil(gb);
            let target = knob("WGKERNELS_DECODE_WGS", |v| (1..=1 << 16).contains(&v)).unwrap_or(528);
            let (chunk, nchunks) = teams_split(kv_len, s.kv_heads * gblocks, target, teams * keys);
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
/// for Subgroup (`WGKERNELS_DECODE_WGS` applies; the WG / LANES / KEYS knobs do not).
///
/// Off Metal (SPIR-V twin mode on Vulkan, a testing aid) L is further capped by the adapter's
/// smallest subgroup size, because there the WGSL twin itself runs on the adapter's subgroups.
pub fn native_decode_plan(caps: &Caps, s: &AttnShape, kv_f16: bool, kv_len: usize) -> Result<Option<DecodePlan>> {
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
    let target = knob("WGKERNELS_DECODE_WGS", |v| (1..=1 << 16).contains(&v)).unwrap_or(528);
    let (chunk, nchunks) = teams_split(kv_len, s.kv_heads * gblocks, target, teams * keys);
    Ok(Some(DecodePlan { teams: true, native: true, matrix: None, wg: NATIVE_WG, gb, tile: 0, lanes, keys, prefetch: false, chunk, nchunks, gblocks }))
}

/// Decode attention over keys `0..kv_len` of a cache of rotated keys, for an already rotated
/// query `q_rot` `[heads, head_dim]` (see [`decode_attention`]).
pub struct DecodeAttention<'a, KV: Elem> {
    pub shape: AttnShape,
    pub q_rot: &'a GpuBuffer<f32>,
    pub k_cache: &'a GpuBuffer<KV>,
    pub v_cache: &'a GpuBuffer<KV>,
    pub kv_len: usize,
    /// Softmax scale; `None` = `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
    pub scratch: &'a DecodeScratch,
    pub out: &'a GpuBuffer<f32>,
}

/// Record the split pass and the merge pass of a decode into `out` `[heads, head_dim]`.
pub fn decode_attention<KV: Elem>(b: &mut Batch, a: &DecodeAttention<KV>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&DECODE)?;
    check_attention(a)?;
    ctx.with_native_fallback(&DECODE, |variant| record_decode(b, a, variant, None))
}

fn check_attention<KV: Elem>(a: &DecodeAttention<KV>) -> Result<()> {
    let DecodeAttention { shape, q_rot, k_cache, v_cache, kv_len, scratch, out, .. } = *a;
    shape.validate()?;
    ensure(scratch.shape == shape, || Error::Argument(format!("scratch made for {:?}, decode has {shape:?}", scratch.shape)))?;
    let d = shape.head_dim;
    ensure(kv_len > 0, || Error::Shape("kv_len = 0".into()))?;
    ensure((kv_len * shape.kv_heads * d) as u64 <= u32::MAX as u64, || Error::Shape("cache over 2^32 elements".into()))?;
    q_rot.require("q_rot", shape.heads * d)?;
    k_cache.require("k_cache", kv_len * shape.kv_heads * d)?;
    v_cache.require("v_cache", kv_len * shape.kv_heads * d)?;
    out.require("out", shape.heads * d)
}

/// A dispatch recorded ahead of the attention passes (the append pass of [`decode`]).
type First<'b> = (&'b AttnPipeline, &'b AppendParams, &'b [&'b wgpu::Buffer], [u32; 3]);

/// Record `first` (if any), the split pass for `variant` and the merge pass. Every pipeline is
/// built before anything is recorded, so a Native pipeline that fails to build leaves no stray
/// dispatch behind when [`Context::with_native_fallback`] retries with the fallback variant.
fn record_decode<KV: Elem>(b: &mut Batch, a: &DecodeAttention<KV>, variant: Variant, first: Option<First>) -> Result<()> {
    let DecodeAttention { shape, q_rot, k_cache, v_cache, kv_len, scale, scratch, out } = *a;
    let ctx = b.context();
    let d = shape.head_dim;
    if variant == Variant::Matrix {
        if let (Err(reason), crate::caps::VariantPolicy::Require(_)) = (decode_matrix::matrix_plan(ctx.caps(), &shape, KV::F16, kv_len), ctx.options().policy) {
            return Err(Error::Unsupported { kernel: DECODE.name, variant, reason });
        }
    }
    let plan = decode_plan(ctx.caps(), variant, &shape, KV::F16, kv_len)?;
    let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
    let params = DecodeParams {
        kv_len: kv_len as u32,
        kv_heads: shape.kv_heads as u32,
        heads: shape.heads as u32,
        group: shape.group() as u32,
        chunk: plan.chunk as u32,
        nchunks: plan.nchunks as u32,
        gblocks: plan.gblocks as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
    };
    let grid = ctx.grid((plan.nchunks * plan.gblocks * shape.kv_heads) as u64)?;
    let bufs = [q_rot.raw(), k_cache.raw(), v_cache.raw(), scratch.part_o.raw(), scratch.part_ml.raw()];
    let key = plan.key(d, KV::F16);
    if let Some((k, _, _, _)) = first {
        ctx.pipeline(k)?;
    }
    ctx.pipeline(&key)?;
    // Merge loads in flight: 8 (`WGKERNELS_DECODE_MERGE_U` 1..8 overrides; 4 was the old loop).
    let merge = AttnPipeline::Merge { unroll: knob("WGKERNELS_DECODE_MERGE_U", |v| (1..=8).contains(&v)).unwrap_or(8) as u32 };
    ctx.pipeline(&merge)?;
    if let Some((k, p, bufs, grid)) = first {
        b.dispatch(k, p, bufs, grid)?;
    }
    b.dispatch(&key, &params, &bufs, grid)?;
    let mp = MergeParams { heads: shape.heads as u32, nchunks: plan.nchunks as u32, d: d as u32, _p: 0 };
    b.dispatch(&merge, &mp, &[scratch.part_o.raw(), scratch.part_ml.raw(), out.raw()], ctx.grid(shape.heads as u64)?)
}

/// One decode step (see [`decode`]).
pub struct Decode<'a, KV: Elem> {
    pub shape: AttnShape,
    /// Position of the new token; the cache holds rotated keys for positions `0..pos`.
    pub pos: usize,
    pub layout: PairLayout,
    pub scale: Option<f32>,
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
/// positions `0..=pos` (split-K + merge).
pub fn decode<KV: Elem>(b: &mut Batch, a: &Decode<KV>) -> Result<()> {
    let ctx = b.context();
    let s = a.shape;
    s.validate()?;
    s.check_table(a.table)?;
    let d = s.head_dim;
    ensure(a.pos < a.capacity, || Error::Shape(format!("position {} does not fit a cache of {} tokens", a.pos, a.capacity)))?;
    a.table.check_positions(a.pos as u64)?;
    a.q.require("q", s.heads * d)?;
    a.k_new.require("k_new", s.kv_heads * d)?;
    a.v_new.require("v_new", s.kv_heads * d)?;
    a.k_cache.require("k_cache", a.capacity * s.kv_heads * d)?;
    a.v_cache.require("v_cache", a.capacity * s.kv_heads * d)?;
    ensure(a.scratch.shape == s, || Error::Argument(format!("scratch made for {:?}, decode has {s:?}", a.scratch.shape)))?;
    let params = AppendParams {
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        d: d as u32,
        half: (d / 2) as u32,
        pos: a.pos as u32,
        table_half: (d / 2) as u32,
        _p: [0; 2],
    };
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
        scratch: a.scratch,
        out: a.out,
    };
    ctx.variant_for(&DECODE)?;
    check_attention(&attend)?;
    ctx.with_native_fallback(&DECODE, |variant| record_decode(b, &attend, variant, Some((&key, &params, &bufs[..], grid))))
}

/// Every pipeline the family can pick for a sample of head dims (for the shader checks).
pub(crate) fn sample_pipelines() -> Vec<AttnPipeline> {
    let mut v = vec![AttnPipeline::Merge { unroll: 8 }, AttnPipeline::Merge { unroll: 1 }];
    v.extend(prefill_matrix::sample_matrix_pipelines());
    v.extend(decode_matrix::sample_matrix_pipelines());
    for kv_f16 in [false, true] {
        for neox in [false, true] {
            v.push(AttnPipeline::Append { kv_f16, neox });
        }
        for d in [6u32, 64, 80, 128, 256] {
            let (bq, bk) = prefill_tiles(d as usize, 1 << 20, 16 << 10).unwrap_or((1, 4));
            for subgroup in [false, true] {
                v.push(AttnPipeline::Prefill { subgroup, d, bq: bq as u32, bk: bk as u32, kv_f16, neox: d % 4 == 0 });
            }
            for gb in [1u32, 8] {
                let wg = (d / 2).next_power_of_two().clamp(32, 128);
                v.push(AttnPipeline::Decode { d, gb, tile: 128, wg, kv_f16 });
                for lanes in [8u32, 32] {
                    let words = if kv_f16 { d / 2 } else { d } as usize;
                    let ppl = (if words % 4 == 0 { words / 4 } else { words }).div_ceil(lanes as usize) as u32;
                    let gb = gb.min(16 / ppl).max(1);
                    if ppl <= 8 {
                        for prefetch in [false, true] {
                            v.push(AttnPipeline::DecodeTeams { variant: Variant::Subgroup, d, gb, wg: 128, lanes, keys: 4.min(32 / ppl), kv_f16, prefetch });
                        }
                    }
                }
            }
        }
        // Native: the Metal plan for every entry point (GQA groups 1 and 8), with its Subgroup twin.
        let metal = Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() };
        for (d, _, _) in NATIVE_ENTRIES {
            for (heads, kv_heads) in [(8, 8), (32, 4)] {
                let plan = native_decode_plan(&metal, &AttnShape::new(heads, kv_heads, d), kv_f16, 4096).ok().flatten().expect("Native plan for an entry point");
                for variant in [Variant::Subgroup, Variant::Native] {
                    let (d, gb, wg, lanes, keys) = (d as u32, plan.gb as u32, plan.wg as u32, plan.lanes as u32, plan.keys as u32);
                    v.push(AttnPipeline::DecodeTeams { variant, d, gb, wg, lanes, keys, kv_f16, prefetch: false });
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every Native plan the Rust side can choose fits what msl/attn_decode.metal is compiled for:
    /// on Metal, L and B equal the MSL's compile-time values and GB is the MSL's run-time
    /// ceil(group / gblocks), within its register bound and static arrays; in twin mode (Vulkan,
    /// subgroups of 4..128) the same GB bounds hold. Head dims without an entry point: no plan.
    #[test]
    fn native_plans_fit_the_msl() {
        let mut caps_list = vec![Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() }];
        for sg in [4u32, 8, 16, 32, 64, 128] {
            caps_list.push(Caps { backend: wgpu::Backend::Vulkan, subgroup_min_size: sg, subgroup_max_size: sg, ..Caps::nominal() });
        }
        let mut checked = 0;
        for caps in &caps_list {
            for d in (2..=256).step_by(2) {
                for kv_f16 in [false, true] {
                    for group in 1..=40 {
                        for kv_heads in [1, 3, 8] {
                            let s = AttnShape::new(group * kv_heads, kv_heads, d);
                            for kv_len in [1, 63, 4097] {
                                let plan = native_decode_plan(caps, &s, kv_f16, kv_len).unwrap();
                                let Some(plan) = plan else {
                                    assert!(native_decode_entry(d, kv_f16).is_none() || caps.backend != wgpu::Backend::Metal, "d {d}: no Metal plan");
                                    continue;
                                };
                                assert!(native_decode_entry(d, kv_f16).is_some());
                                let np = (if kv_f16 { d / 2 } else { d }) / 4;
                                let msl_l = np.next_power_of_two().min(32);
                                let msl_ppl = np.div_ceil(msl_l);
                                let gbx = 8.min(16 / msl_ppl);
                                if caps.backend == wgpu::Backend::Metal {
                                    assert_eq!((plan.lanes, plan.keys, plan.wg), (msl_l, 4.min(32 / msl_ppl), 128), "d {d}");
                                }
                                assert!(plan.teams && plan.native);
                                assert!(caps.backend == wgpu::Backend::Metal || plan.lanes <= caps.subgroup_min_size as usize, "twin lanes within the subgroup");
                                assert_eq!(plan.gb, s.group().div_ceil(plan.gblocks), "GB must be what the kernel derives");
                                assert_eq!(plan.gblocks, s.group().div_ceil(plan.gb));
                                assert!(plan.gb >= 1 && plan.gb <= gbx && plan.gb * d <= NATIVE_TO_LEN);
                                assert!((128 / msl_l) * gbx <= NATIVE_TML_LEN);
                                assert!(plan.nchunks <= MAX_CHUNKS && plan.chunk * plan.nchunks >= kv_len && plan.chunk * (plan.nchunks - 1) < kv_len);
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 1000);
    }
}
