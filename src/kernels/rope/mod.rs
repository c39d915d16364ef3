//! Rotary position embeddings: a cos/sin table built on the GPU for every scaling mode Hugging
//! Face transformers defines ([`RopeScaling`]; formulas in [`config`]), and in-place rotation of
//! Q or K `[tokens, heads, head_dim]` (f32 or f16 storage) with explicit positions.
//!
//! Pair layouts ([`PairLayout`]): `Interleaved` rotates elements `(2i, 2i+1)` (GGUF / llama.cpp
//! "normal" mode), `HalfSplit` rotates `(i, i + d/2)` (HF `rotate_half`, NeoX). Both use frequency
//! `i`: `(a, b) -> (a cos - b sin, b cos + a sin)` with cos/sin already multiplied by the
//! attention factor.
//!
//! Table layout: `table[pos * (d/2) + i] = (cos, sin)` as `vec2<f32>`. The frequencies are computed
//! on the host in f64 and handed to the GPU as turns per position split into a 12-bit head and a
//! tail; the GPU reduces `pos * turns` modulo 1 exactly for the head part and evaluates sin/cos with
//! its own polynomial on `[-pi/4, pi/4]`, so table entries are within ~1e-6 of the f64 values at any
//! position below 2^24 and on any driver (WGSL's own sin/cos are only specified to 2^-11).
//! f16 tensors are read and written as pairs in u32 words with unpack2x16float / pack2x16float
//! (no SHADER_F16 needed, so WebGPU-baseline adapters run them too); every invocation owns whole
//! words, so the read-modify-writes never race.
//! Only a Portable variant: these are element-wise kernels with nothing to reduce.
//! Sources: wgsl/rope_table.wgsl, wgsl/rope_apply.wgsl.
//!
//! ```
//! use wgkernels::kernels::rope::{self, PairLayout, Positions, RopeConfig, RopeScaling, RopeTable};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (tokens, heads, d) = (16, 4, 64);
//! let table = RopeTable::build(&ctx, RopeConfig::new(d, 10000.0, RopeScaling::yarn(4.0, 4096)), 1024)?;
//! let x = ctx.upload(&vec![1.0f32; tokens * heads * d])?;
//! let mut b = ctx.batch();
//! rope::apply(&mut b, &x, tokens, heads, PairLayout::HalfSplit, &table, Positions::Start(100))?;
//! b.run()?;
//! // A rotation keeps each pair's length; YaRN's attention factor (0.1 ln 4 + 1 here) scales
//! // them all: (1, 1) becomes a pair of length sqrt(2) (0.1 ln 4 + 1).
//! let y = ctx.read(&x)?;
//! let want = 2f32.sqrt() * (0.1 * 4f32.ln() + 1.0);
//! assert!((0..d / 2).all(|i| (y[i].hypot(y[i + d / 2]) - want).abs() < 1e-4));
//! # Ok(()) }
//! ```

#[cfg(feature = "testkit")]
pub mod cases;
pub mod config;
pub(crate) mod samples;

#[cfg(feature = "testkit")]
pub use cases::kernels;
pub use config::{RopeConfig, RopeScaling};

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

pub const TABLE: KernelInfo = KernelInfo::new("rope_table", &[Variant::Portable], None);
pub const APPLY: KernelInfo = KernelInfo::new("rope_apply", &[Variant::Portable], None);

const TABLE_WGSL: &str = include_str!("../../../wgsl/rope_table.wgsl");
const APPLY_WGSL: &str = include_str!("../../../wgsl/rope_apply.wgsl");
const APPLY_VEC_WGSL: &str = include_str!("../../../wgsl/rope_apply_vec.wgsl");
const APPLY_COMMON_WGSL: &str = include_str!("../../../wgsl/rope_apply_common.wgsl");

/// Largest table length (positions are split exactly into two 12-bit halves on the GPU).
pub const MAX_POSITIONS: usize = 1 << 24;
/// Largest head dimension any kernel of this crate takes.
pub const MAX_HEAD_DIM: usize = 256;

/// Which elements form a rotation pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PairLayout {
    /// `(2i, 2i + 1)`: GGUF / llama.cpp normal mode.
    Interleaved,
    /// `(i, i + d/2)`: Hugging Face `rotate_half`, GPT-NeoX.
    HalfSplit,
}

impl PairLayout {
    /// Element indices of pair `i` in a head of `d` elements.
    pub fn pair(self, i: usize, d: usize) -> (usize, usize) {
        match self {
            PairLayout::Interleaved => (2 * i, 2 * i + 1),
            PairLayout::HalfSplit => (i, i + d / 2),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PairLayout::Interleaved => "interleaved",
            PairLayout::HalfSplit => "neox",
        }
    }
}

/// Element types RoPE and attention store tensors in (f32, f16).
pub use crate::buffer::Elem;

/// A cos/sin table on the GPU for positions `0..rows`.
pub struct RopeTable {
    cfg: RopeConfig,
    rows: usize,
    attention_factor: f32,
    freq: GpuBuffer<[f32; 4]>,
    table: GpuBuffer<[f32; 2]>,
}

/// Turns per position of each pair, split into two parts of 12 significant bits and a tail
/// (the GPU multiplies the 12-bit parts by 12-bit halves of the position exactly).
pub fn split_turns(inv_freq: &[f64]) -> Vec<[f32; 4]> {
    let trunc12 = |x: f64| f32::from_bits((x as f32).to_bits() & !0xfff);
    inv_freq
        .iter()
        .map(|&f| {
            let t = f / (2.0 * std::f64::consts::PI);
            let a = trunc12(t);
            let b = trunc12(t - a as f64);
            [a, b, (t - a as f64 - b as f64) as f32, 0.0]
        })
        .collect()
}

impl RopeTable {
    /// Allocate a table for positions `0..rows` (build it with [`build_table`], or use [`RopeTable::build`]).
    pub fn new(ctx: &Context, cfg: RopeConfig, rows: usize) -> Result<RopeTable> {
        cfg.validate()?;
        ensure(cfg.head_dim <= MAX_HEAD_DIM, || Error::Shape(format!("head_dim = {} over the supported {MAX_HEAD_DIM}", cfg.head_dim)))?;
        ensure(rows > 0 && rows <= MAX_POSITIONS, || Error::Shape(format!("table rows = {rows}: must be 1..={MAX_POSITIONS}")))?;
        Ok(RopeTable { attention_factor: cfg.attention_factor() as f32, freq: ctx.upload(&split_turns(&cfg.inv_freq()))?, table: ctx.alloc(rows * cfg.half())?, cfg, rows })
    }

    /// Allocate and build (one submit).
    pub fn build(ctx: &Context, cfg: RopeConfig, rows: usize) -> Result<RopeTable> {
        let t = RopeTable::new(ctx, cfg, rows)?;
        let mut b = ctx.batch();
        build_table(&mut b, &t)?;
        b.run()?;
        Ok(t)
    }

    pub fn config(&self) -> &RopeConfig {
        &self.cfg
    }
    pub fn head_dim(&self) -> usize {
        self.cfg.head_dim
    }
    /// Number of positions (rows).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// `(cos, sin)` pairs, `rows * head_dim / 2` of them.
    pub fn buffer(&self) -> &GpuBuffer<[f32; 2]> {
        &self.table
    }
    /// Replace the output buffer (tests use a guarded one).
    pub fn set_buffer(&mut self, buf: GpuBuffer<[f32; 2]>) -> Result<()> {
        buf.require("table", self.rows * self.cfg.half())?;
        self.table = buf;
        Ok(())
    }

    /// Error unless positions `first..=last` are inside the table.
    pub fn check_positions(&self, last: u64) -> Result<()> {
        ensure(last < self.rows as u64, || Error::Argument(format!("position {last} beyond the RoPE table ({} positions)", self.rows)))
    }
}

params_struct! {
    struct TableParams {
        half: u32,
        rows: u32,
        attention_factor: f32,
        _p: u32,
    }
}

params_struct! {
    struct ApplyParams {
        tokens: u32,
        heads: u32,
        d: u32,
        half: u32,
        units: u32,
        pos_start: u32,
        use_buf: u32,
        rows: u32,
    }
}

const TABLE_BINDINGS: &[StorageBinding] = &[StorageBinding::read("freq", "vec4<f32>"), StorageBinding::write("table", "vec2<f32>")];
const APPLY_BINDINGS: &[StorageBinding] = &[StorageBinding::write("x", "u32"), StorageBinding::read("positions", "u32"), StorageBinding::read("table", "vec2<f32>")];
const APPLY_VEC_BINDINGS: &[StorageBinding] = &[StorageBinding::write("x", "vec4<u32>"), StorageBinding::read("positions", "u32"), StorageBinding::read("table", "vec2<f32>")];

/// How the apply kernel splits a head among invocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApplyMode {
    /// One pair per invocation (f32, or f16 interleaved where a pair is one word).
    Pair = 0,
    /// f16 half-split with d/2 even: two pairs (two whole words) per invocation.
    TwoPairs = 1,
    /// f16 half-split with d/2 odd: one head per invocation (pairs straddle words).
    Row = 2,
    /// 16-byte vectors (wgsl/rope_apply_vec.wgsl), where rows (and, half-split, half-rows) are
    /// whole vectors: 4 (f32) or 8 (f16) elements per load instead of one or two. H100, yarn
    /// half-split, 2048 tokens x 32 heads x d 128: see docs/PERFORMANCE.md.
    Vector = 3,
}

impl ApplyMode {
    /// The mode for `f16` (else f32) elements, `layout`, head_dim `d`.
    /// `vec = false` ([`crate::Tuning::rope_vec`]) turns the vector mode off (to compare).
    fn choose(f16: bool, layout: PairLayout, d: usize, vec: bool) -> ApplyMode {
        let (half, epv) = (d / 2, if f16 { 8 } else { 4 });
        match (f16, layout) {
            (_, PairLayout::HalfSplit) if vec && half % epv == 0 => ApplyMode::Vector,
            (_, PairLayout::Interleaved) if vec && d % epv == 0 => ApplyMode::Vector,
            (true, PairLayout::HalfSplit) if half % 2 == 0 => ApplyMode::TwoPairs,
            (true, PairLayout::HalfSplit) => ApplyMode::Row,
            _ => ApplyMode::Pair,
        }
    }

    /// Invocations per head.
    fn units(self, f16: bool, layout: PairLayout, d: usize) -> usize {
        let half = d / 2;
        match self {
            ApplyMode::Pair => half,
            ApplyMode::TwoPairs => half / 2,
            ApplyMode::Row => 1,
            ApplyMode::Vector => {
                let epv = if f16 { 8 } else { 4 };
                if layout == PairLayout::HalfSplit {
                    half / epv
                } else {
                    d / epv
                }
            }
        }
    }
}

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RopePipeline {
    Table,
    Apply { f16: bool, layout: PairLayout, mode: ApplyMode },
}

impl PipelineKey for RopePipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            RopePipeline::Table => PipelineDesc {
                source: ShaderSource::Wgsl(vec![TABLE_WGSL]),
                entry: "main",
                constants: vec![],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<TableParams>() as u64,
                bindings: TABLE_BINDINGS,
            },
            RopePipeline::Apply { f16, layout, mode: ApplyMode::Vector } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![APPLY_COMMON_WGSL, APPLY_VEC_WGSL]),
                entry: "main",
                constants: vec![("F16", f16 as u32 as f64), ("NEOX", (layout == PairLayout::HalfSplit) as u32 as f64)],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<ApplyParams>() as u64,
                bindings: APPLY_VEC_BINDINGS,
            },
            RopePipeline::Apply { f16, layout, mode } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![APPLY_COMMON_WGSL, APPLY_WGSL]),
                entry: "main",
                constants: vec![("F16", f16 as u32 as f64), ("NEOX", (layout == PairLayout::HalfSplit) as u32 as f64), ("MODE", mode as u32 as f64)],
                workgroup_size: [64, 1, 1],
                params_size: std::mem::size_of::<ApplyParams>() as u64,
                bindings: APPLY_BINDINGS,
            },
        }
    }
}

/// Record the table build.
pub fn build_table(b: &mut Batch, t: &RopeTable) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&TABLE)?;
    let half = t.cfg.half();
    let params = TableParams { half: half as u32, rows: t.rows as u32, attention_factor: t.attention_factor, _p: 0 };
    let grid = ctx.grid(((t.rows * half) as u64).div_ceil(64))?;
    b.dispatch(&RopePipeline::Table, &params, &[t.freq.raw(), t.table.raw()], grid)
}

/// Positions of the rows to rotate.
#[derive(Clone, Copy, Debug)]
pub enum Positions<'a> {
    /// Token `t` is at position `start + t`.
    Start(u32),
    /// Token `t` is at position `buf[t]`; `max` is the largest value in `buf` (checked against the
    /// table here; a larger value found on the GPU turns that token's output into NaN).
    Buffer { buf: &'a GpuBuffer<u32>, max: u32 },
}

impl Positions<'_> {
    pub(crate) fn validate(&self, table: &RopeTable, tokens: usize) -> Result<()> {
        match *self {
            Positions::Start(s) => {
                let last = (s as u64).checked_add(tokens as u64 - 1).ok_or_else(|| Error::Shape(format!("start {s} + {tokens} tokens overflows")))?;
                table.check_positions(last)
            }
            Positions::Buffer { buf, max } => {
                buf.require("positions", tokens)?;
                table.check_positions(max as u64)
            }
        }
    }
}

/// Common checks of a `[tokens, heads, head_dim]` tensor against a table: its element count.
pub(crate) fn check_heads(table: &RopeTable, tokens: usize, heads: usize) -> Result<usize> {
    ensure(tokens > 0 && heads > 0, || Error::Shape(format!("tokens = {tokens}, heads = {heads}: both must be > 0")))?;
    let n = crate::error::dims::prod("tokens * heads * head_dim", &[tokens, heads, table.head_dim()])?;
    ensure(n < u32::MAX as usize, || Error::Shape("tensor over 2^32 elements".into()))?;
    Ok(n)
}

/// Rotate `x` `[tokens, heads, head_dim]` in place (head_dim from the table).
pub fn apply<T: Elem>(b: &mut Batch, x: &GpuBuffer<T>, tokens: usize, heads: usize, layout: PairLayout, table: &RopeTable, positions: Positions) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&APPLY)?;
    let n = check_heads(table, tokens, heads)?;
    let (d, half) = (table.head_dim(), table.cfg.half());
    x.require("x", n)?;
    positions.validate(table, tokens)?;
    let mode = ApplyMode::choose(T::F16, layout, d, ctx.caps().tuning.rope_vec);
    let units = mode.units(T::F16, layout, d);
    let (pos_start, use_buf, pbuf) = match positions {
        Positions::Start(s) => (s, 0, ctx.dummy()),
        Positions::Buffer { buf, .. } => (0, 1, buf.raw()),
    };
    let params = ApplyParams { tokens: tokens as u32, heads: heads as u32, d: d as u32, half: half as u32, units: units as u32, pos_start, use_buf, rows: table.rows as u32 };
    let grid = ctx.grid(((tokens * heads * units) as u64).div_ceil(64))?;
    b.dispatch(&RopePipeline::Apply { f16: T::F16, layout, mode }, &params, &[x.raw(), pbuf, table.table.raw()], grid)
}

/// The family's params structs and the WGSL pipelines that bind each (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let all: Vec<_> = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let of = |variants: &[&str]| crate::kernels::pipelines_of(&all, variants);
    vec![crate::kernels::params_twin!(TableParams, of(&["Table"])), crate::kernels::params_twin!(ApplyParams, of(&["Apply"]))]
}
