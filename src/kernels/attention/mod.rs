//! Attention with fused RoPE: flash-attention prefill and split-K decode, GQA throughout.
//!
//! Layouts: Q and O `[tokens, heads, head_dim]` f32; K and V `[kv_tokens, kv_heads, head_dim]`, f32
//! or f16 ([`Elem`]). `O = softmax(Q K^T * scale + mask) V` per query head; query head `h` reads
//! KV head `h / (heads / kv_heads)`. Query token `t` sits at absolute position `offset + t`; when
//! causal it sees keys `j <= offset + t`. RoPE comes from a [`RopeTable`] (any scaling mode).
//! Two options of Gemma-style models apply to every variant: a sliding window `W` (a query at
//! position `P` sees only keys `j > P - W`; `window: None` is unlimited) and logit soft-capping of
//! the scaled scores, `cap * tanh(score / cap)` before the softmax (`softcap: None` is off).
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
//! (or, when required, is unsupported for that shape), and Native (Metal passthrough:
//! msl/attn_prefill.metal, the same flash attention on 8x8 simdgroup matrices with the Matrix
//! variant's numerics; one entry point per head_dim 64/128/256, f32 or f16 K/V, both layouts; its
//! twin is the Subgroup prefill; other head dims run the Subgroup plan; see [`prefill_native`]).
//!
//! Code: this file (shapes, pipelines, the prefill), `decode.rs` (the decode plan and recording),
//! [`prefill_matrix`] and [`decode_matrix`] (the Matrix variants), `cases.rs` (harness cases).
//! Sources: wgsl/attn_prefill.wgsl (+ _portable / _subgroup, + attn_prefill_params.wgsl),
//! attn_prefill_matrix.wgsl (+ attn_prefill_params.wgsl) with its staging pass
//! attn_prefill_stage.wgsl, attn_append.wgsl, attn_decode.wgsl + attn_decode_portable.wgsl
//! (Portable), attn_decode_subgroup.wgsl (Subgroup), attn_decode_matrix.wgsl (Matrix),
//! attn_merge.wgsl; msl/attn_decode.metal (Native decode), msl/attn_prefill.metal (Native prefill).
//!
//! ```
//! use wgkernels::kernels::attention::{self, AttnShape, Decode, DecodeScratch, Prefill};
//! use wgkernels::kernels::rope::{PairLayout, RopeConfig, RopeScaling, RopeTable};
//! use wgkernels::{Context, ContextOptions, GpuBuffer};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (shape, tokens, capacity) = (AttnShape::new(8, 2, 64), 32, 64);
//! let table = RopeTable::build(&ctx, RopeConfig::new(64, 10000.0, RopeScaling::Default), capacity)?;
//! let layout = PairLayout::HalfSplit;
//! let q = ctx.upload(&vec![0.1f32; tokens * 8 * 64])?;
//! // Keys zero, values 0.2: every output is a weighted mean of 0.2s.
//! let (k_cache, v_cache): (GpuBuffer<f32>, GpuBuffer<f32>) = (ctx.alloc(capacity * 2 * 64)?, ctx.upload(&vec![0.2f32; capacity * 2 * 64])?);
//! let out = ctx.alloc::<f32>(tokens * 8 * 64)?;
//! let mut b = ctx.batch();
//! let p = Prefill { shape, tokens, offset: 0, kv_len: tokens, causal: true, k_rotated: false, layout, scale: None, window: None, softcap: None, q: &q, k: &k_cache, v: &v_cache, table: &table, out: &out };
//! attention::prefill(&mut b, &p)?;
//! // One decode step: rotate the new q/k, append k/v at `pos`, attend over 0..=pos.
//! let (q1, k1, v1) = (ctx.upload(&vec![0.1f32; 8 * 64])?, ctx.upload(&vec![0.1f32; 2 * 64])?, ctx.upload(&vec![0.2f32; 2 * 64])?);
//! let (scratch, o1) = (DecodeScratch::new(&ctx, shape)?, ctx.alloc::<f32>(8 * 64)?);
//! let d = Decode { shape, pos: tokens, layout, scale: None, window: None, softcap: None, q: &q1, k_new: &k1, v_new: &v1, k_cache: &k_cache, v_cache: &v_cache, capacity, table: &table, scratch: &scratch, out: &o1 };
//! attention::decode(&mut b, &d)?;
//! b.run()?;
//! assert!(ctx.read(&out)?.iter().chain(&ctx.read(&o1)?).all(|o| (o - 0.2).abs() < 1e-5));
//! # Ok(()) }
//! ```

#[cfg(feature = "testkit")]
pub mod cases;
mod check;
mod decode;
pub mod decode_matrix;
mod prefill_case;
pub mod prefill_matrix;
pub mod prefill_native;

#[cfg(feature = "testkit")]
pub use cases::kernels;
pub(crate) use check::decode_checks;
pub use decode::*;
pub(crate) use prefill_case::prefill_checks;
crate::testkit_pub! {
    pub use prefill_case::{PrefillCase, MATRIX_TOL};
}

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{dims, ensure, Error, Result};
use crate::kernels::rope::{Elem, PairLayout, RopeTable, MAX_HEAD_DIM};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

/// `text` with its `//@{marker}` templates expanded for k = 0..count, `key` (e.g. `{k}`)
/// replaced by k: a line starting `//@{marker} ` (after indentation) becomes count lines; the
/// lines between `//@{marker} begin` and `//@{marker} end` are repeated as a block, count times.
/// The Matrix kernels name their per-column-block matrices this way (o0, o1, ..): as a
/// function-scope array indexed in a loop, NVIDIA's driver keeps them in local memory
/// (`examples/shader_stats.rs`, 2026-11-25).
pub(crate) fn expand(text: &str, marker: &str, key: &str, count: usize) -> String {
    let (begin, end, line_prefix) = (format!("//@{marker} begin"), format!("//@{marker} end"), format!("//@{marker} "));
    let mut out = String::with_capacity(text.len() + 4096);
    let mut block: Option<Vec<&str>> = None;
    let emit = |out: &mut String, line: &str, k: usize| {
        *out += &line.replace(key, &k.to_string());
        out.push('\n');
    };
    for line in text.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if let Some(lines) = block.as_mut() {
            if body == end {
                for k in 0..count {
                    for l in lines.iter() {
                        emit(&mut out, l, k);
                    }
                }
                block = None;
            } else {
                lines.push(line);
            }
        } else if body == begin {
            block = Some(Vec::new());
        } else if let Some(template) = body.strip_prefix(&line_prefix) {
            for k in 0..count {
                out += indent;
                emit(&mut out, template, k);
            }
        } else {
            out += line;
            out.push('\n');
        }
    }
    out
}

/// A kernel text with its templates expanded ([`expand`]), in the order given: each entry is
/// (marker, placeholder, count). A template inside another's block is expanded first when its
/// marker comes first.
pub(crate) fn expand_templates(text: &str, templates: &[(&str, &str, usize)]) -> String {
    templates.iter().fold(text.to_string(), |t, &(marker, key, count)| expand(&t, marker, key, count))
}

/// [`expand_templates`], made once per (text, templates) and kept for the process (pipeline
/// descriptions hold `&'static str` parts).
pub(crate) fn unrolled(text: &'static str, templates: &[(&'static str, &'static str, usize)]) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Texts = HashMap<(usize, Vec<(&'static str, &'static str, usize)>), &'static str>;
    static TEXTS: OnceLock<Mutex<Texts>> = OnceLock::new();
    let mut texts = TEXTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    texts.entry((text.as_ptr() as usize, templates.to_vec())).or_insert_with(|| Box::leak(expand_templates(text, templates).into_boxed_str()))
}

/// Prefill variants, most preferred last: Matrix where it runs; then Portable ahead of Subgroup,
/// which measured 3-4% slower on the H200 (the serial per-row softmax of one warp overlaps the
/// other warps' V loads; see docs/PERFORMANCE.md).
/// Native (msl/attn_prefill.metal, 8x8 simdgroup matrices) runs only on Metal, where Matrix
/// (16x16) does not: there it is preferred over the WGSL variants.
pub const PREFILL: KernelInfo =
    KernelInfo::new("attn_prefill", &[Variant::Subgroup, Variant::Portable, Variant::Matrix, Variant::Native], Some(prefill_matrix::prefill_extra)).checked(|_| prefill_checks());
/// Decode variants, least preferred first. Native and Matrix replace the split-K partial pass
/// only; Matrix takes f16 caches (see [`decode_matrix`]), other decodes fall back. Matrix ranks
/// below Subgroup: on the H100 (2026-11-22) it measured 2.3-2.8x slower than the teams kernel at
/// kv 4k-32k (docs/PERFORMANCE.md), so it runs only when asked for (`Prefer` / `Require`).
pub const DECODE: KernelInfo =
    KernelInfo::new("attn_decode", &[Variant::Portable, Variant::Matrix, Variant::Subgroup, Variant::Native], Some(decode_extra)).checked(|_| decode_checks());

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
/// `softcap` / `softcap4` of every attention kernel (the score soft-cap).
const SOFTCAP_WGSL: &str = include_str!("../../../wgsl/attn_softcap.wgsl");
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
crate::testkit_pub! {
    /// The sizes above by their names in msl/attn_decode.metal (tests/msl_bindings.rs checks them).
    pub const NATIVE_DECODE_MSL_CONSTS: [(&str, usize); 5] =
        [("WG", NATIVE_WG), ("SIMD_W", NATIVE_SIMD_W), ("GB_CAP", NATIVE_GB_CAP), ("TML_LEN", NATIVE_TML_LEN), ("TO_LEN", NATIVE_TO_LEN)];
}

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

    /// heads, kv_heads > 0; heads % kv_heads == 0; head_dim even, 2..=256; one token's
    /// `heads * head_dim` within 32 bits.
    pub fn validate(&self) -> Result<()> {
        let (h, kvh, d) = (self.heads, self.kv_heads, self.head_dim);
        ensure(h > 0 && kvh > 0, || Error::Shape(format!("heads = {h}, kv_heads = {kvh}: both must be > 0")))?;
        ensure(h % kvh == 0, || Error::Shape(format!("heads = {h} is not a multiple of kv_heads = {kvh}")))?;
        ensure(d >= 2 && d % 2 == 0, || Error::Shape(format!("head_dim = {d} must be even and >= 2")))?;
        ensure(d <= MAX_HEAD_DIM, || Error::Shape(format!("head_dim = {d} over the supported maximum {MAX_HEAD_DIM}")))?;
        dims::elems_u32("heads * head_dim", &[h, d]).map(|_| ())
    }

    /// Elements of `tokens` rows of `[heads, head_dim]` (queries, outputs), checked to fit 32 bits.
    pub fn q_elems(&self, tokens: usize) -> Result<usize> {
        dims::elems_u32("tokens * heads * head_dim", &[tokens, self.heads, self.head_dim])
    }

    /// Elements of `kv_len` rows of `[kv_heads, head_dim]` (K, V), checked to fit 32 bits.
    pub fn kv_elems(&self, kv_len: usize) -> Result<usize> {
        dims::elems_u32("kv_len * kv_heads * head_dim", &[kv_len, self.kv_heads, self.head_dim])
    }

    fn check_table(&self, table: &RopeTable) -> Result<()> {
        ensure(table.head_dim() == self.head_dim, || Error::Shape(format!("RoPE table is for head_dim {}, attention has {}", table.head_dim(), self.head_dim)))
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
    /// Sliding window `W`: query `t` sees only keys `j > offset + t - W`; `None` = unlimited.
    pub window: Option<usize>,
    /// Score soft-cap `cap`: scores become `cap * tanh(score / cap)` before the softmax; `None` = off.
    pub softcap: Option<f32>,
    pub q: &'a GpuBuffer<f32>,
    pub k: &'a GpuBuffer<KV>,
    pub v: &'a GpuBuffer<KV>,
    pub table: &'a RopeTable,
    pub out: &'a GpuBuffer<f32>,
}

params_struct! {
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
        /// Bit 0: half-split pairs; bit 1: f16 K/V (read by the Native kernel, which cannot take
        /// overrides; the WGSL kernels take NEOX and KV_F16 as overrides).
        flags: u32,
        /// Sliding window (0: unlimited).
        window: u32,
        /// Score soft-cap * log2(e) (0: off).
        softcap: f32,
        _p0: u32,
        _p1: u32,
    }
}

params_struct! {
    struct DecodeParams {
        kv_len: u32,
        kv_heads: u32,
        heads: u32,
        group: u32,
        chunk: u32,
        nchunks: u32,
        gblocks: u32,
        scale_log2: f32,
        /// First key attended (the sliding window's start; chunk c starts at key_lo + c * chunk).
        key_lo: u32,
        /// Score soft-cap * log2(e) (0: off).
        softcap: f32,
        _p0: u32,
        _p1: u32,
    }
}

params_struct! {
    struct MergeParams {
        heads: u32,
        nchunks: u32,
        d: u32,
        _p: u32,
    }
}

params_struct! {
    struct AppendParams {
        heads: u32,
        kv_heads: u32,
        d: u32,
        half: u32,
        pos: u32,
        table_half: u32,
        _p0: u32,
        _p1: u32,
    }
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
const MERGE_BINDINGS: &[StorageBinding] = &[StorageBinding::read("part_o", "f32"), StorageBinding::read("part_ml", "vec2<f32>"), StorageBinding::write("out", "f32")];
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
    /// Portable or Subgroup prefill (`variant`).
    Prefill {
        variant: Variant,
        d: u32,
        bq: u32,
        bk: u32,
        kv_f16: bool,
        neox: bool,
    },
    /// Matrix prefill (see [`prefill_matrix`]); `sg` is the subgroup size it is built for.
    PrefillMatrix {
        d: u32,
        bk: u32,
        sg: u32,
        nsg: u32,
        neox: bool,
        tau: u32,
    },
    /// Native prefill (msl/attn_prefill.metal, see [`prefill_native`]); `bq` rows per block (the
    /// MSL's and its twin's plan), `bk` its twin's keys per tile.
    PrefillNative {
        d: u32,
        bq: u32,
        bk: u32,
        kv_f16: bool,
        neox: bool,
    },
    /// The Matrix prefill's staging pass: K (rotated unless it comes rotated) or V to f16.
    PrefillStage {
        d: u32,
        in_f16: bool,
        neox: bool,
    },
    /// One invocation per key, tiles of `tile` keys, workgroup-memory reductions (Portable).
    Decode {
        d: u32,
        gb: u32,
        tile: u32,
        wg: u32,
        kv_f16: bool,
    },
    /// Teams of `lanes` subgroup lanes per key, `keys` keys per team and step: Subgroup (WGSL) or
    /// Native (the MSL entry point for `d` and the K/V type; its twin is the Subgroup key).
    /// `prefetch`: the next step's loads are issued before this step's math (the MSL never does).
    /// `softcap`: the pipeline soft-caps scores where the params ask (without it the soft-cap
    /// code is left out, and the pipeline serves only dispatches without a cap; the MSL always
    /// has it).
    DecodeTeams {
        variant: Variant,
        d: u32,
        gb: u32,
        wg: u32,
        lanes: u32,
        keys: u32,
        kv_f16: bool,
        prefetch: bool,
        softcap: bool,
    },
    /// Matrix partial pass for f16 caches (see [`decode_matrix`]): `nw` subgroups of `sg`
    /// invocations, scores of up to `maxc` keys per chunk.
    DecodeMatrix {
        d: u32,
        gb: u32,
        sg: u32,
        nw: u32,
        maxc: u32,
    },
    /// `unroll`: chunks summed per round (loads in flight per invocation, 1..8).
    Merge {
        unroll: u32,
    },
    Append {
        kv_f16: bool,
        neox: bool,
    },
}

fn flag(b: bool) -> f64 {
    b as u32 as f64
}

impl PipelineKey for AttnPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            AttnPipeline::PrefillMatrix { d, bk, sg, nsg, tau, .. } => prefill_matrix::matrix_desc(d, bk, sg, nsg, f32::from_bits(tau)),
            AttnPipeline::DecodeMatrix { d, gb, sg, nw, maxc } => decode_matrix::matrix_desc(d, gb, sg, nw, maxc),
            AttnPipeline::PrefillStage { d, in_f16, neox } => prefill_matrix::stage_desc(d, in_f16, neox),
            AttnPipeline::PrefillNative { d, bq, bk, kv_f16, neox } => prefill_native::native_desc(d, bq, bk, kv_f16, neox, _caps),
            AttnPipeline::Prefill { variant, d, bq, bk, kv_f16, neox } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![if variant == Variant::Subgroup { PREFILL_SUBGROUP } else { PREFILL_PORTABLE }, PREFILL_PARAMS_WGSL, PREFILL_WGSL, SOFTCAP_WGSL]),
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
                    source: ShaderSource::Wgsl(vec![DECODE_PORTABLE, DECODE_WGSL, SOFTCAP_WGSL]),
                    entry: "main",
                    constants: vec![("D", d as f64), ("GB", gb as f64), ("TILE", tile as f64), ("WG", wg as f64), ("KV_F16", flag(kv_f16)), ("VEC4", flag(words % 4 == 0))],
                    workgroup_size: [wg, 1, 1],
                    params_size: std::mem::size_of::<DecodeParams>() as u64,
                    bindings: DECODE_BINDINGS,
                }
            }
            AttnPipeline::DecodeTeams { variant: Variant::Native, d, gb, wg, lanes, keys, kv_f16, .. } => {
                let twin = AttnPipeline::DecodeTeams { variant: Variant::Subgroup, d, gb, wg, lanes, keys, kv_f16, prefetch: false, softcap: true }.describe(_caps);
                // decode_plan makes Native keys only for head dims with an entry point; a key
                // made otherwise names none and fails to build (falls back, never runs wrong).
                PipelineDesc::native(DECODE_MSL, native_decode_entry(d as usize, kv_f16).unwrap_or("attn_decode_no_entry_point"), twin)
            }
            AttnPipeline::DecodeTeams { d, gb, wg, lanes, keys, kv_f16, prefetch, softcap, .. } => {
                let words = if kv_f16 { d / 2 } else { d };
                PipelineDesc {
                    source: ShaderSource::Wgsl(vec![DECODE_SUBGROUP, SOFTCAP_WGSL]),
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
                        ("SOFTCAP", flag(softcap)),
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

/// The kernels' `scale * log2(e)` for softmax scale `scale` (`None` = `1 / sqrt(head_dim)`):
/// [`Error::Argument`] unless finite (the crate's parameter policy, see [`crate::error`]).
pub(crate) fn scale_log2(scale: Option<f32>, d: usize) -> Result<f32> {
    let s = dims::finite("scale", scale.unwrap_or(1.0 / (d as f32).sqrt()))?;
    dims::finite("scale * log2(e)", s * std::f32::consts::LOG2_E)
}

/// The kernels' soft-cap in their log2 domain, `cap * log2(e)` (0 = off): [`Error::Argument`]
/// unless `cap` is finite and > 0.
pub(crate) fn softcap_log2(cap: Option<f32>) -> Result<f32> {
    let Some(cap) = cap else { return Ok(0.0) };
    ensure(cap.is_finite() && cap > 0.0, || Error::Argument(format!("soft-cap {cap}: must be finite and > 0")))?;
    dims::finite("soft-cap * log2(e)", cap * std::f32::consts::LOG2_E)
}

/// The window as the kernels take it (0 = unlimited): [`Error::Argument`] for `Some(0)`, and
/// windows past 32 bits are unlimited in effect (no position reaches them).
pub(crate) fn window_u32(window: Option<usize>) -> Result<u32> {
    match window {
        None => Ok(0),
        Some(0) => Err(Error::Argument("sliding window 0: must be >= 1 (None for unlimited)".into())),
        Some(w) => Ok(u32::try_from(w).unwrap_or(0)),
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

/// Workgroup memory of the Portable / Subgroup prefill at head_dim `d`, `bq` rows and `bk` keys
/// per tile, or `None` where its P V step would hold more than 32 column pairs per invocation.
pub(crate) fn prefill_tile_bytes(d: usize, bq: usize, bk: usize) -> Option<usize> {
    let bytes = 4 * (bq * (d + 1) + bk * (d + 1) + bq * (bk + 1) + 3 * bq);
    let ro = pv_rows(bq);
    let pairs_per_inv = (d / 2).div_ceil(PREFILL_WG * ro / bq);
    (ro * pairs_per_inv <= 32).then_some(bytes)
}

/// Prefill tiles (rows per workgroup, keys per tile) for head_dim `d` within `mem` bytes of
/// workgroup memory, with at most `rows` rows worth having.
pub fn prefill_tiles(d: usize, rows: usize, mem: usize) -> Result<(usize, usize)> {
    let candidates = [(32, 32), (16, 32), (16, 16), (8, 16), (8, 8), (4, 8), (4, 4), (2, 4), (1, 4)];
    let max_rows = rows.next_power_of_two().max(1);
    for (bq, bk) in candidates {
        let bq = usize::min(bq, max_rows);
        if prefill_tile_bytes(d, bq, bk).is_some_and(|bytes| bytes <= mem) {
            return Ok((bq, bk));
        }
    }
    Err(Error::Limit(format!("head_dim {d} needs more workgroup memory than the adapter's {mem} bytes")))
}

/// The prefill pipeline for head_dim `d` in `ctx`: that of the selected variant (see
/// [`prefill_pipeline_for`]).
pub fn prefill_pipeline(ctx: &Context, d: usize, kv_f16: bool, neox: bool, rows: usize) -> Result<(Variant, AttnPipeline)> {
    prefill_pipeline_for(ctx, ctx.variant_for(&PREFILL)?, d, kv_f16, neox, rows)
}

/// The best supported prefill variant other than those in `skip`.
fn prefill_fallback(ctx: &Context, skip: &[Variant]) -> Variant {
    PREFILL.variants.iter().rev().copied().find(|v| !skip.contains(v) && PREFILL.support(ctx.caps(), *v).is_ok()).unwrap_or(Variant::Portable)
}

/// The prefill pipeline of `variant` for head_dim `d`, and the variant it is:
/// * Native: the MSL entry point for `d`, the K/V type and the pair layout; where there is none
///   (head dims other than 64, 128, 256), the best other variant's plan, under every policy, as the
///   Native decode does ([`prefill_native`]);
/// * Matrix, where it can't take this head_dim (not a multiple of 16, tiles over the
///   workgroup-memory limit): the best other supported variant, unless Matrix is required
///   ([`crate::Error::Unsupported`] then).
pub fn prefill_pipeline_for(ctx: &Context, mut variant: Variant, d: usize, kv_f16: bool, neox: bool, rows: usize) -> Result<(Variant, AttnPipeline)> {
    let asked = variant;
    if variant == Variant::Native {
        match prefill_native::native_key(ctx.caps(), d, kv_f16, neox, rows)? {
            Ok(key) => return Ok((variant, key)),
            Err(_) => variant = prefill_fallback(ctx, &[Variant::Native]),
        }
    }
    if variant == Variant::Matrix {
        match prefill_matrix::matrix_key(ctx.caps(), d, neox) {
            Ok(key) => return Ok((variant, key)),
            Err(reason) => {
                // Only a required Matrix is an error: a Native head dim without an entry point
                // that fell back to Matrix falls back further.
                if asked == Variant::Matrix && matches!(ctx.options().policy, crate::caps::VariantPolicy::Require(_)) {
                    return Err(Error::Unsupported { kernel: PREFILL.name, variant, reason });
                }
                variant = prefill_fallback(ctx, &[Variant::Native, Variant::Matrix]);
            }
        }
    }
    let mem = ctx.caps().limits.max_compute_workgroup_storage_size as usize;
    #[cfg(feature = "testkit")]
    let tuned = ctx.caps().tuning.prefill_tiles.map(|[q, k]| (q as usize, k as usize)).filter(|&(q, k)| prefill_tile_bytes(d, q, k).is_some_and(|b| b <= mem));
    #[cfg(not(feature = "testkit"))]
    let tuned = None;
    let (bq, bk) = match tuned {
        Some(t) => t,
        None => prefill_tiles(d, rows, mem)?,
    };
    let variant = if variant == Variant::Subgroup { Variant::Subgroup } else { Variant::Portable };
    Ok((variant, AttnPipeline::Prefill { variant, d: d as u32, bq: bq as u32, bk: bk as u32, kv_f16, neox }))
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
    let end = dims::add("offset + tokens", a.offset, a.tokens)?;
    ensure(a.kv_len >= end, || Error::Shape(format!("kv_len = {} is shorter than offset + tokens = {end}", a.kv_len)))?;
    dims::u32_of("kv_len", a.kv_len)?;
    a.table.check_positions((end - 1) as u64)?;
    if !a.k_rotated {
        a.table.check_positions(a.kv_len as u64 - 1)?;
    }
    let q_len = s.q_elems(a.tokens)?;
    let kv_elems = s.kv_elems(a.kv_len)?;
    a.q.require("q", q_len)?;
    a.out.require("out", q_len)?;
    a.k.require("k", kv_elems)?;
    a.v.require("v", kv_elems)?;
    let scale_log2 = scale_log2(a.scale, d)?;
    let (window, softcap_log2) = (window_u32(a.window)?, softcap_log2(a.softcap)?);
    let rows = dims::elems_u32("tokens * group", &[a.tokens, s.group()])?;
    let neox = a.layout == PairLayout::HalfSplit;
    ctx.with_native_fallback(&PREFILL, |variant| {
        let (_, key) = prefill_pipeline_for(ctx, variant, d, KV::F16, neox, rows)?;
        let bq = match key {
            AttnPipeline::Prefill { bq, .. } => bq as usize,
            AttnPipeline::PrefillMatrix { nsg, .. } => prefill_matrix::rows_per_workgroup(nsg),
            AttnPipeline::PrefillNative { bq, .. } => bq as usize,
            _ => return Err(Error::Argument("not a prefill pipeline".into())),
        };
        let row_blocks = rows.div_ceil(bq);
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
            scale_log2,
            flags: neox as u32 | (KV::F16 as u32) << 1,
            window,
            softcap: softcap_log2,
            _p0: 0,
            _p1: 0,
        };
        let grid = ctx.grid(dims::prod("row blocks * kv_heads", &[row_blocks, s.kv_heads])? as u64)?;
        if let AttnPipeline::PrefillMatrix { .. } = key {
            return prefill_matrix::encode(b, a, key, params, grid);
        }
        b.dispatch(&key, &params, &[a.q.raw(), a.k.raw(), a.v.raw(), a.table.buffer().raw(), a.out.raw()], grid)
    })
}

/// Every pipeline the family can pick for a sample of head dims (for the shader checks): the
/// merge passes, the cache appends, the Matrix and Native pipelines, and the keys of
/// [`plan_samples`].
#[cfg(feature = "testkit")]
pub(crate) fn sample_pipelines() -> Vec<AttnPipeline> {
    let mut v = vec![AttnPipeline::Merge { unroll: 8 }, AttnPipeline::Merge { unroll: 1 }];
    v.extend(prefill_matrix::sample_matrix_pipelines());
    v.extend(prefill_native::sample_native_pipelines());
    v.extend(decode_matrix::sample_matrix_pipelines());
    for kv_f16 in [false, true] {
        for neox in [false, true] {
            v.push(AttnPipeline::Append { kv_f16, neox });
        }
    }
    for s in plan_samples() {
        if !v.contains(&s.key) {
            v.push(s.key);
        }
    }
    // Native: the Metal plan for every entry point (GQA groups 1 and 8); its Subgroup twin is
    // one of the samples.
    for (d, kv_f16, heads, kv_heads) in native_decode_samples() {
        let metal = Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() };
        let plan = native_decode_plan(&metal, &AttnShape::new(heads, kv_heads, d), kv_f16, 4096).ok().flatten().expect("Native plan for an entry point");
        v.push(plan.key(d, kv_f16, true));
    }
    v
}

/// (head_dim, kv_f16, heads, kv_heads) of the Native decode's sample plans: every entry point,
/// GQA groups 1 and 8.
#[cfg(feature = "testkit")]
fn native_decode_samples() -> Vec<(usize, bool, usize, usize)> {
    let mut v = Vec::new();
    for kv_f16 in [false, true] {
        for (d, _, _) in NATIVE_ENTRIES {
            for (heads, kv_heads) in [(8, 8), (32, 4)] {
                v.push((d, kv_f16, heads, kv_heads));
            }
        }
    }
    v
}

/// One sampled decode or prefill plan: the key the family's plan function picks for a small case
/// as `variant`, under `tuning`, on an adapter with `adapter`'s subgroup size and workgroup memory.
/// The list of pipelines names these keys and the test kit's plan cases run these cases, so the
/// list names no plan a case cannot reach.
#[cfg(feature = "testkit")]
pub(crate) struct PlanSample {
    pub(crate) key: AttnPipeline,
    pub(crate) variant: Variant,
    pub(crate) tuning: crate::tuning::Tuning,
    pub(crate) adapter: crate::suite::PlanAdapter,
    pub(crate) case: PlanSampleCase,
}

/// The case of a [`PlanSample`].
#[cfg(feature = "testkit")]
pub(crate) enum PlanSampleCase {
    Decode(check::DecodeCase),
    Prefill(PrefillCase),
}

/// Apple's threadgroup memory (32 KiB) and WebGPU's default (16 KiB): the prefill tiles sampled.
#[cfg(feature = "testkit")]
const SAMPLE_MEMORY: [u32; 2] = [crate::shaders::APPLE_THREADGROUP_MEMORY, 16 << 10];

/// The sampled plans, for head dims 6, 64, 80, 128 and 256 and f32 / f16 caches:
/// * decode, teams kernel (Subgroup): GQA blocks of 1 and 8 heads, 4 (the smallest subgroup
///   wgpu's Metal backend reports), 8 and 32 lanes per key, with and without prefetch (soft-capped
///   without), 4 keys per step, and the Subgroup twin of every Native entry point's plan;
/// * decode, Portable kernel: groups of 1 and 8 heads (Apple's 32 KiB);
/// * prefill, Portable and Subgroup: the largest tiles for 32 KiB (Apple) and 16 KiB (WebGPU's
///   default) of workgroup memory;
/// * the plan every case of the test grid picks on a Mac (default tuning, Apple's smallest
///   subgroup and its threadgroup memory), as Portable and Subgroup, reached by a small case of
///   that grid case's shape: so the grid's cases, run on an adapter that plans as a Mac, dispatch
///   no plan the list lacks.
#[cfg(feature = "testkit")]
pub(crate) fn plan_samples() -> Vec<PlanSample> {
    use crate::suite::PlanAdapter;
    use crate::tuning::Tuning;
    fn push(v: &mut Vec<PlanSample>, s: PlanSample) {
        if !v.iter().any(|o| o.key == s.key) {
            v.push(s);
        }
    }
    let mut v: Vec<PlanSample> = Vec::new();
    let caps_for = |tuning: &Tuning, adapter: PlanAdapter| {
        let mut caps = Caps { tuning: tuning.clone(), ..Caps::nominal() };
        adapter.apply(&mut caps);
        caps
    };
    // A GQA group of 8 over tokens enough for `bq` rows (tokens x group).
    let prefill_case = |d: usize, bq: usize, kv_f16: bool, neox: bool| {
        let tokens = bq.div_ceil(8);
        let layout = if neox { PairLayout::HalfSplit } else { PairLayout::Interleaved };
        let shape = AttnShape::new(8, 1, d);
        PrefillCase { tokens, offset: 3, kv_len: tokens + 3, shape, layout, kv_f16, causal: true, k_rotated: false, mode: 0, window: None, softcap: None }
    };
    let decode_case = |shape: AttnShape, kv_f16: bool, prefetch: bool, softcap: bool| check::DecodeCase {
        pos: 39,
        shape,
        layout: if prefetch { PairLayout::HalfSplit } else { PairLayout::Interleaved },
        kv_f16,
        mode: 0,
        attend_only: false,
        q8: false,
        window: None,
        softcap: softcap.then_some(2.0),
    };
    let teams = |v: &mut Vec<PlanSample>, shape: AttnShape, kv_f16: bool, tuning: Tuning, lanes: usize, softcap: bool| {
        let adapter = PlanAdapter { subgroup_min_size: Some(lanes as u32), workgroup_memory: Some(SAMPLE_MEMORY[0]) };
        let Ok(plan) = decode_plan(&caps_for(&tuning, adapter), Variant::Subgroup, &shape, kv_f16, 40) else { return };
        if plan.teams {
            let prefetch = plan.prefetch;
            let key = plan.key(shape.head_dim, kv_f16, softcap);
            push(v, PlanSample { key, variant: Variant::Subgroup, tuning, adapter, case: PlanSampleCase::Decode(decode_case(shape, kv_f16, prefetch, softcap)) });
        }
    };
    for kv_f16 in [false, true] {
        for d in [6usize, 64, 80, 128, 256] {
            for gb in [1usize, 8] {
                for lanes in [4usize, 8, 32] {
                    for prefetch in [false, true] {
                        let tuning = Tuning {
                            decode_wg: Some(128),
                            decode_lanes: Some(lanes),
                            decode_keys: Some(4),
                            decode_prefetch: Some(prefetch),
                            decode_gb: Some(gb),
                            ..Tuning::default()
                        };
                        teams(&mut v, AttnShape::new(8, 1, d), kv_f16, tuning, lanes, !prefetch);
                    }
                }
            }
            for heads in [1usize, 8] {
                let adapter = PlanAdapter { subgroup_min_size: None, workgroup_memory: Some(SAMPLE_MEMORY[0]) };
                let shape = AttnShape::new(heads, 1, d);
                let Ok(plan) = decode_plan(&caps_for(&Tuning::default(), adapter), Variant::Portable, &shape, kv_f16, 40) else { continue };
                let case = PlanSampleCase::Decode(decode_case(shape, kv_f16, heads == 1, false));
                push(&mut v, PlanSample { key: plan.key(d, kv_f16, false), variant: Variant::Portable, tuning: Tuning::default(), adapter, case });
            }
            for mem in SAMPLE_MEMORY {
                let Ok((bq, bk)) = prefill_tiles(d, 1 << 20, mem as usize) else { continue };
                let neox = d % 4 == 0;
                let case = prefill_case(d, bq, kv_f16, neox);
                for variant in [Variant::Portable, Variant::Subgroup] {
                    let key = AttnPipeline::Prefill { variant, d: d as u32, bq: bq as u32, bk: bk as u32, kv_f16, neox };
                    let adapter = PlanAdapter { subgroup_min_size: None, workgroup_memory: Some(mem) };
                    push(&mut v, PlanSample { key, variant, tuning: Tuning::default(), adapter, case: PlanSampleCase::Prefill(case) });
                }
            }
        }
    }
    // The Native prefill's Subgroup twins: its tiles, where they fit Apple's 32 KiB (the others
    // only stand for the Native kernel on adapters with more).
    for key in prefill_native::sample_native_pipelines() {
        let AttnPipeline::Prefill { variant, d, bq, bk, kv_f16, neox } = key else { continue };
        if prefill_tile_bytes(d as usize, bq as usize, bk as usize).is_none_or(|b| b > SAMPLE_MEMORY[0] as usize) {
            continue;
        }
        let case = prefill_case(d as usize, bq as usize, kv_f16, neox);
        let tuning = Tuning { prefill_tiles: Some([bq, bk]), ..Tuning::default() };
        push(&mut v, PlanSample { key, variant, tuning, adapter: PlanAdapter::default(), case: PlanSampleCase::Prefill(case) });
    }
    // The grid's plans on a Mac, each reached by a small case that picks the same plan: the
    // decode's plan does not depend on the cache length, the prefill's only on its rows (tokens x
    // group) up to the tile's; a grid case whose shrunk form would pick another plan is its own
    // plan case.
    let (min_subgroup, _) = crate::shaders::APPLE_SUBGROUP_SIZES;
    let apple = PlanAdapter { subgroup_min_size: Some(min_subgroup), workgroup_memory: Some(crate::shaders::APPLE_THREADGROUP_MEMORY) };
    let caps = caps_for(&Tuning::default(), apple);
    let mem = crate::shaders::APPLE_THREADGROUP_MEMORY as usize;
    for variant in [Variant::Portable, Variant::Subgroup] {
        for c in cases::decode_grid() {
            let key = |c: &check::DecodeCase| decode_plan(&caps, variant, &c.shape, c.kv_f16, c.pos + 1).map(|p| p.key(c.shape.head_dim, c.kv_f16, c.softcap.is_some()));
            let Ok(grid_key) = key(&c) else { continue };
            let small = check::DecodeCase { pos: c.pos.min(39), ..c };
            let case = if key(&small).is_ok_and(|k| k == grid_key) { small } else { c };
            push(&mut v, PlanSample { key: grid_key, variant, tuning: Tuning::default(), adapter: apple, case: PlanSampleCase::Decode(case) });
        }
        for c in cases::prefill_grid() {
            let d = c.shape.head_dim;
            let neox = c.layout == PairLayout::HalfSplit;
            let key = |c: &PrefillCase| {
                prefill_tiles(d, c.tokens * c.shape.group(), mem).map(|(bq, bk)| AttnPipeline::Prefill {
                    variant,
                    d: d as u32,
                    bq: bq as u32,
                    bk: bk as u32,
                    kv_f16: c.kv_f16,
                    neox,
                })
            };
            let Ok(grid_key) = key(&c) else { continue };
            let AttnPipeline::Prefill { bq, .. } = grid_key else { continue };
            let tokens = c.tokens.min((bq as usize).div_ceil(c.shape.group()));
            let offset = c.offset.min(3);
            let after = c.kv_len.saturating_sub(c.offset + c.tokens).min(3);
            let small = PrefillCase { tokens, offset, kv_len: offset + tokens + after, ..c };
            let case = if key(&small).is_ok_and(|k| k == grid_key) { small } else { c };
            push(&mut v, PlanSample { key: grid_key, variant, tuning: Tuning::default(), adapter: apple, case: PlanSampleCase::Prefill(case) });
        }
    }
    // The Native decode's Subgroup twins: the Native plan's lanes, keys and heads per workgroup.
    let metal = Caps { backend: wgpu::Backend::Metal, ..Caps::nominal() };
    for (d, kv_f16, heads, kv_heads) in native_decode_samples() {
        let shape = AttnShape::new(heads, kv_heads, d);
        let Ok(Some(p)) = native_decode_plan(&metal, &shape, kv_f16, 4096) else { continue };
        let tuning =
            Tuning { decode_wg: Some(p.wg), decode_lanes: Some(p.lanes), decode_keys: Some(p.keys), decode_prefetch: Some(false), decode_gb: Some(p.gb), ..Tuning::default() };
        teams(&mut v, shape, kv_f16, tuning, p.lanes, true);
    }
    v
}

/// The family's params structs and the WGSL pipelines that bind each (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let all: Vec<_> = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let of = |variants: &[&str]| crate::kernels::pipelines_of(&all, variants);
    vec![
        crate::kernels::params_twin!(PrefillParams, of(&["Prefill", "PrefillMatrix", "PrefillNative"])),
        prefill_matrix::stage_params_twin(of(&["PrefillStage"])),
        crate::kernels::params_twin!(DecodeParams, of(&["Decode", "DecodeTeams", "DecodeMatrix"])),
        crate::kernels::params_twin!(MergeParams, of(&["Merge"])),
        crate::kernels::params_twin!(AppendParams, of(&["Append"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Template lines and blocks, a template inside another's block, indentation kept, and
    /// text outside templates untouched.
    #[test]
    fn templates_expand() {
        let text = "a\n  //@ND x{k};\n//@NB begin\nb{n}\n    //@ND c{n}{k}\n//@NB end\nd{k}\n";
        let got = expand_templates(text, &[("ND", "{k}", 2), ("NB", "{n}", 3)]);
        assert_eq!(got, "a\n  x0;\n  x1;\nb0\n    c00\n    c01\nb1\n    c10\n    c11\nb2\n    c20\n    c21\nd{k}\n");
        assert_eq!(expand_templates(text, &[("ND", "{k}", 0), ("NB", "{n}", 1)]), "a\nb0\nd{k}\n");
    }

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
