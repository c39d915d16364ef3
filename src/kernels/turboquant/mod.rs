//! TurboQuant KV-cache compression (MSE variant, 4 bits; arXiv 2504.19874): quantise K/V
//! vectors into a compressed cache, dequantise it back, and decode attention straight over the
//! compressed caches.
//!
//! For each (kv head, position) vector x of power-of-two dimension d (64..=512):
//! optional seeded signs D, y = H D x / sqrt(d) (normalised Walsh-Hadamard), norm = |y| = |x|,
//! u = y / norm * sqrt(d), code = nearest of the 16 Lloyd-Max centroids for N(0, 1)
//! ([`codebook`]). Cache layout: codes `[kv_heads, capacity, d / 2]` bytes (two codes per byte,
//! even coordinate low; uploaded as u32 words) and norms `[kv_heads, capacity]` f32.
//! A [`CacheKind::Window`] cache is a ring buffer (slot = pos % capacity); a
//! [`CacheKind::Global`] cache rejects positions >= capacity.
//!
//! Sources: wgsl/tq_transform.wgsl (quantise one cache or K and V at once, dequantise, merge), wgsl/tq_attention.wgsl
//! (split-K pass), each after wgsl/tq_portable.wgsl or wgsl/tq_subgroup.wgsl; the Native tier
//! (Metal passthrough) is msl/tq_transform.metal and msl/tq_attention.metal, whose WGSL twins are
//! the Subgroup pipelines.
//!
//! ```
//! use wgkernels::kernels::turboquant::{self as tq, CacheKind, DecodeAttention, TqAttnWorkspace, TqCache, TqConfig};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::default())?;
//! let (heads, kv_len) = (8, 256);
//! let cfg = TqConfig { kv_heads: 2, head_dim: 128, capacity: kv_len, kind: CacheKind::Global, sign_seed: Some(1) };
//! let (kc, vc) = (TqCache::new(&ctx, cfg)?, TqCache::new(&ctx, TqConfig { sign_seed: Some(2), ..cfg })?);
//! let (k, v) = (ctx.upload(&vec![0.1f32; kv_len * 2 * 128])?, ctx.upload(&vec![0.2f32; kv_len * 2 * 128])?);
//! let (q, out) = (ctx.upload(&vec![0.1f32; heads * 128])?, ctx.alloc::<f32>(heads * 128)?);
//! let ws = TqAttnWorkspace::new(&ctx, heads, &cfg)?;
//! let mut b = ctx.batch();
//! tq::quantize_kv(&mut b, &k, &v, kv_len, 0, &kc, &vc)?;
//! tq::decode_attention(&mut b, &ws, &q, &kc, &vc, &out, &DecodeAttention { heads, kv_len, window: None, scale: 1.0 / 128f32.sqrt() })?;
//! b.run()?;
//! // Every value vector is 0.2 everywhere, so is their weighted mean, up to the 4-bit codes'
//! // error (about 0.05 at worst for this vector).
//! assert!(ctx.read(&out)?.iter().all(|o| (o - 0.2).abs() < 0.08));
//! # Ok(()) }
//! ```

#[cfg(feature = "testkit")]
pub mod cases;
mod check;
pub mod codebook;

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};

#[cfg(feature = "testkit")]
pub use cases::kernels;
pub(crate) use check::{attention_checks, dequantize_checks, quantize_checks};

/// Variants are listed least preferred first.
pub const QUANTIZE: KernelInfo = KernelInfo::new("tq_quantize", &[Variant::Portable, Variant::Subgroup, Variant::Native], None).checked(|_| quantize_checks());
pub const DEQUANTIZE: KernelInfo = KernelInfo::new("tq_dequantize", &[Variant::Portable, Variant::Subgroup, Variant::Native], None).checked(|_| dequantize_checks());
/// Two pipelines per call (attend, merge), both of the selected variant.
pub const ATTENTION: KernelInfo = KernelInfo::new("tq_decode_attention", &[Variant::Portable, Variant::Subgroup, Variant::Native], None).checked(|_| attention_checks());

const PORTABLE_WGSL: &str = include_str!("../../../wgsl/tq_portable.wgsl");
const SUBGROUP_WGSL: &str = include_str!("../../../wgsl/tq_subgroup.wgsl");
const TRANSFORM_WGSL: &str = include_str!("../../../wgsl/tq_transform.wgsl");
const ATTENTION_WGSL: &str = include_str!("../../../wgsl/tq_attention.wgsl");
const TRANSFORM_MSL: &str = include_str!("../../../msl/tq_transform.metal");
const ATTENTION_MSL: &str = include_str!("../../../msl/tq_attention.metal");

/// Smallest and largest head dimension.
pub const MIN_DIM: usize = 64;
pub const MAX_DIM: usize = 512;
/// Positions per split-K workgroup at most (the `SPLIT_MAX` of tq_attention.wgsl).
const SPLIT_MAX: usize = 512;
/// Workgroups the split-K plan aims for (measured on an H200, h = 32 / kv 8, d = 128: fewer,
/// longer splits won from 4k to 32k positions, as each workgroup's fixed work is a large part of
/// its time).
const TARGET_WORKGROUPS: usize = 256;

/// How positions map to cache slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// Slot = position; positions >= capacity are rejected.
    Global,
    /// Ring buffer for sliding-window attention: slot = position % capacity.
    Window,
}

/// Shape and options of one layer's K (or V) cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TqConfig {
    pub kv_heads: usize,
    pub head_dim: usize,
    pub capacity: usize,
    pub kind: CacheKind,
    /// Seed of the random ±1 signs applied before the Hadamard transform (per layer); `None`
    /// for a plain Hadamard rotation, which adversarial inputs (e.g. constant vectors) break.
    pub sign_seed: Option<u64>,
}

impl TqConfig {
    pub fn validate(&self) -> Result<()> {
        check_dim(self.head_dim)?;
        ensure(self.kv_heads > 0 && self.capacity > 0, || Error::Shape(format!("kv_heads = {}, capacity = {}: both must be > 0", self.kv_heads, self.capacity)))?;
        let words = crate::error::dims::prod("kv_heads * capacity * head_dim / 8", &[self.kv_heads, self.capacity, self.head_dim / 8])?;
        ensure(words < 1 << 31, || Error::Shape(format!("cache of {words} code words exceeds 2^31")))
    }

    /// Bytes the compressed cache holds (codes + norms).
    pub fn bytes(&self) -> u64 {
        (self.kv_heads as u64).saturating_mul(self.capacity as u64).saturating_mul((self.head_dim / 2 + 4) as u64)
    }

    /// The slot of a position, or [`Error::PositionOutOfRange`] past a global cache.
    pub fn slot(&self, pos: usize) -> Result<usize> {
        match self.kind {
            CacheKind::Global => {
                ensure(pos < self.capacity, || Error::PositionOutOfRange { pos: pos as u64, capacity: self.capacity as u64 })?;
                Ok(pos)
            }
            CacheKind::Window => Ok(pos % self.capacity),
        }
    }
}

/// Head dimension check: a power of two in 64..=512.
pub fn check_dim(d: usize) -> Result<()> {
    ensure(d.is_power_of_two(), || Error::Shape(format!("head_dim = {d} is not a power of two")))?;
    ensure((MIN_DIM..=MAX_DIM).contains(&d), || Error::Shape(format!("head_dim = {d} outside {MIN_DIM}..={MAX_DIM}")))
}

/// A compressed cache in the plain host layout.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTqCache {
    pub config: TqConfig,
    /// `[kv_heads, capacity, d / 2]`, two codes per byte, even coordinate in the low nibble.
    pub codes: Vec<u8>,
    /// `[kv_heads, capacity]`.
    pub norms: Vec<f32>,
}

impl HostTqCache {
    /// Index of the vector at (head, slot).
    pub fn vector(&self, head: usize, slot: usize) -> usize {
        head * self.config.capacity + slot
    }
    /// Code of coordinate `i` of the vector at (head, slot).
    pub fn code(&self, head: usize, slot: usize, i: usize) -> u8 {
        let d = self.config.head_dim;
        (self.codes[self.vector(head, slot) * d / 2 + i / 2] >> (4 * (i % 2))) & 15
    }
    pub fn norm(&self, head: usize, slot: usize) -> f32 {
        self.norms[self.vector(head, slot)]
    }
}

/// A compressed K or V cache on the GPU.
pub struct TqCache {
    config: TqConfig,
    codes: GpuBuffer<u32>,
    norms: GpuBuffer<f32>,
    signs: GpuBuffer<u32>,
    sign_words: Vec<u32>,
}

impl TqCache {
    /// A new (zeroed) cache.
    pub fn new(ctx: &Context, config: TqConfig) -> Result<TqCache> {
        config.validate()?;
        let n = config.kv_heads * config.capacity;
        Self::with_buffers(ctx, config, ctx.alloc(n * config.head_dim / 8)?, ctx.alloc(n)?)
    }

    /// Upload a host cache (e.g. one written by the CPU reference).
    pub fn upload(ctx: &Context, host: &HostTqCache) -> Result<TqCache> {
        let c = host.config;
        c.validate()?;
        let n = c.kv_heads * c.capacity;
        ensure(host.codes.len() == n * c.head_dim / 2, || Error::Argument(format!("codes: {} bytes, expected {}", host.codes.len(), n * c.head_dim / 2)))?;
        ensure(host.norms.len() == n, || Error::Argument(format!("norms: {} values, expected {n}", host.norms.len())))?;
        let words: Vec<u32> = host.codes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Self::with_buffers(ctx, c, ctx.upload(&words)?, ctx.upload(&host.norms)?)
    }

    /// Adopt code and norm buffers (e.g. poisoned ones in tests); lengths are checked.
    pub fn with_buffers(ctx: &Context, config: TqConfig, codes: GpuBuffer<u32>, norms: GpuBuffer<f32>) -> Result<TqCache> {
        config.validate()?;
        let n = config.kv_heads * config.capacity;
        codes.require("codes", n * config.head_dim / 8)?;
        norms.require("norms", n)?;
        let sign_words = codebook::sign_words(config.sign_seed, config.head_dim);
        Ok(TqCache { config, codes, norms, signs: ctx.upload(&sign_words)?, sign_words })
    }

    pub fn config(&self) -> &TqConfig {
        &self.config
    }
    /// The sign mask (bit i set = coordinate i negated), [`codebook::sign_words`].
    pub fn sign_words(&self) -> &[u32] {
        &self.sign_words
    }
    pub fn codes(&self) -> &GpuBuffer<u32> {
        &self.codes
    }
    pub fn norms(&self) -> &GpuBuffer<f32> {
        &self.norms
    }

    /// Read back into the host layout.
    pub fn download(&self, ctx: &Context) -> Result<HostTqCache> {
        let n = self.config.kv_heads * self.config.capacity;
        let words = ctx.read(&self.codes)?;
        let codes = bytemuck::cast_slice::<u32, u8>(&words[..n * self.config.head_dim / 8]).to_vec();
        let mut norms = ctx.read(&self.norms)?;
        norms.truncate(n);
        Ok(HostTqCache { config: self.config, codes, norms })
    }
}

params_struct! {
    #[derive(Default)]
    struct TransformParams {
        d: u32,
        lanes: u32,
        vectors: u32,
        kv_heads: u32,
        capacity: u32,
        pos0: u32,
        src_off: u32,
        splits: u32,
        row: u32,
        _scale: f32,
        k_wgs: u32,
        _p1: u32,
    }
}

params_struct! {
    struct AttendParams {
        kv_heads: u32,
        heads: u32,
        d: u32,
        capacity: u32,
        lo: u32,
        count: u32,
        split_len: u32,
        splits: u32,
        group: u32,
        quads: u32,
        kscale: f32,
        vscale: f32,
        row: u32,
        _p0: u32,
        _p1: u32,
        _p2: u32,
    }
}

const TRANSFORM_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("src", "vec4<f32>"),
    StorageBinding::write("codes", "u32"),
    StorageBinding::write("norms", "f32"),
    StorageBinding::read("signs", "u32"),
    StorageBinding::write("dst", "vec4<f32>"),
];
/// quantize_kv: the K side as [`TRANSFORM_BINDINGS`], then the V side.
const TRANSFORM_KV_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("src", "vec4<f32>"),
    StorageBinding::write("codes", "u32"),
    StorageBinding::write("norms", "f32"),
    StorageBinding::read("signs", "u32"),
    StorageBinding::write("dst", "vec4<f32>"),
    StorageBinding::read("src_v", "vec4<f32>"),
    StorageBinding::write("codes_v", "u32"),
    StorageBinding::write("norms_v", "f32"),
    StorageBinding::read("signs_v", "u32"),
];
const ATTEND_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("q", "f32"),
    StorageBinding::read("kcodes", "vec4<u32>"),
    StorageBinding::read("knorms", "f32"),
    StorageBinding::read("vcodes", "u32"),
    StorageBinding::read("vnorms", "f32"),
    StorageBinding::write("partial", "f32"),
    StorageBinding::read("ksigns", "u32"),
    StorageBinding::read("vsigns", "u32"),
];

/// Entry points of tq_transform.wgsl.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransformOp {
    Quantize,
    /// Quantize of a K and a V source into their two caches in one dispatch ([`quantize_kv`]).
    QuantizeKv,
    Dequantize,
    Merge,
}

impl TransformOp {
    pub const ALL: [TransformOp; 4] = [TransformOp::Quantize, TransformOp::QuantizeKv, TransformOp::Dequantize, TransformOp::Merge];
    fn entry(self) -> &'static str {
        match self {
            TransformOp::Quantize => "quantize",
            TransformOp::QuantizeKv => "quantize_kv",
            TransformOp::Dequantize => "dequantize",
            TransformOp::Merge => "merge",
        }
    }
    /// Invocations per workgroup (`@workgroup_size` of the entry point).
    fn workgroup_size(self) -> u32 {
        match self {
            TransformOp::Merge => 256,
            _ => 64,
        }
    }
    /// The kernel of msl/tq_transform.metal (none for `QuantizeKv`: the Native tier records two
    /// `Quantize` dispatches instead).
    pub(crate) fn msl_entry(self) -> Option<&'static str> {
        match self {
            TransformOp::Quantize => Some("tq_quantize"),
            TransformOp::QuantizeKv => None,
            TransformOp::Dequantize => Some("tq_dequantize"),
            TransformOp::Merge => Some("tq_merge"),
        }
    }
    fn bindings(self) -> &'static [StorageBinding] {
        match self {
            TransformOp::QuantizeKv => TRANSFORM_KV_BINDINGS,
            _ => TRANSFORM_BINDINGS,
        }
    }
}

/// Pipelines of this family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TqPipeline {
    Transform {
        variant: Variant,
        op: TransformOp,
    },
    /// The split pass; the Native tier's MSL has the full footprint (a compact Native key is its
    /// WGSL twin).
    Attend {
        variant: Variant,
        footprint: attention::Footprint,
    },
}

fn prologue(v: Variant) -> &'static str {
    match v {
        Variant::Subgroup => SUBGROUP_WGSL,
        _ => PORTABLE_WGSL,
    }
}

impl PipelineKey for TqPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        match *self {
            TqPipeline::Transform { variant: Variant::Native, op } => {
                let twin = TqPipeline::Transform { variant: Variant::Subgroup, op }.describe(_caps);
                match op.msl_entry() {
                    Some(entry) => PipelineDesc::native(TRANSFORM_MSL, entry, twin),
                    None => twin,
                }
            }
            TqPipeline::Attend { variant: Variant::Native, footprint } => {
                let twin = TqPipeline::Attend { variant: Variant::Subgroup, footprint }.describe(_caps);
                match footprint == attention::Footprint::FULL {
                    true => PipelineDesc::native(ATTENTION_MSL, "tq_attend", twin),
                    false => twin,
                }
            }
            TqPipeline::Transform { variant, op } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![prologue(variant), codebook::wgsl_snippet(), TRANSFORM_WGSL]),
                entry: op.entry(),
                constants: vec![],
                workgroup_size: [op.workgroup_size(), 1, 1],
                params_size: std::mem::size_of::<TransformParams>() as u64,
                bindings: op.bindings(),
            },
            TqPipeline::Attend { variant, footprint } => PipelineDesc {
                source: ShaderSource::Wgsl(vec![prologue(variant), codebook::wgsl_snippet(), footprint.wgsl(), ATTENTION_WGSL]),
                entry: "attend",
                constants: vec![],
                workgroup_size: [128, 1, 1],
                params_size: std::mem::size_of::<AttendParams>() as u64,
                bindings: ATTEND_BINDINGS,
            },
        }
    }
}

/// Elements of `count` rows of `[kv_heads, head_dim]`: indices are u32 in the shaders.
fn check_elements(count: usize, c: &TqConfig) -> Result<usize> {
    let n = crate::error::dims::prod("tokens * kv_heads * head_dim", &[count, c.kv_heads, c.head_dim])?;
    ensure(n as u64 <= u32::MAX as u64, || Error::Shape(format!("{n} elements in one call exceed 2^32; split the call")))?;
    Ok(n)
}

/// Workgroups of a transform over `vectors` vectors of `d` (64 invocations, d / 8 per vector).
fn transform_workgroups(vectors: usize, d: usize) -> u64 {
    vectors.div_ceil(64 / (d / 8)) as u64
}

/// The bindings of a quantisation of `src` into `cache` (quantize, and each side of quantize_kv).
fn quantize_bufs<'a>(ctx: &'a Context, src: &'a GpuBuffer<f32>, cache: &'a TqCache) -> [crate::buffer::BufRef<'a>; 5] {
    [src.raw(), cache.codes.raw(), cache.norms.raw(), cache.signs.raw(), ctx.dummy()]
}

/// Quantise `tokens` tokens of `src` (`[tokens, kv_heads, d]` f32) into `cache` at positions
/// `pos0..pos0 + tokens` (prefill; `tokens = 1` for a decode step). On a window cache only the
/// last `capacity` tokens are written (the earlier ones would be overwritten anyway); on a
/// global cache `pos0 + tokens > capacity` is [`Error::PositionOutOfRange`].
pub fn quantize(b: &mut Batch, src: &GpuBuffer<f32>, tokens: usize, pos0: usize, cache: &TqCache) -> Result<()> {
    let ctx = b.context();
    let (params, wgs) = quantize_plan(src, tokens, pos0, cache)?;
    let (bufs, grid) = (quantize_bufs(ctx, src, cache), ctx.grid(wgs)?);
    ctx.with_native_fallback(&QUANTIZE, |variant| b.dispatch(&TqPipeline::Transform { variant, op: TransformOp::Quantize }, &params, &bufs, grid))
}

/// [`quantize`] of a layer's new keys `k` into `kc` and values `v` into `vc` (caches of the same
/// kv heads, head dim, capacity and kind; their sign seeds may differ), in one dispatch (two on
/// the Native tier and on devices with fewer than 9 storage buffers per stage). Same results as
/// the two [`quantize`] calls.
pub fn quantize_kv(b: &mut Batch, k: &GpuBuffer<f32>, v: &GpuBuffer<f32>, tokens: usize, pos0: usize, kc: &TqCache, vc: &TqCache) -> Result<()> {
    let ctx = b.context();
    let (a, c) = (&kc.config, &vc.config);
    ensure(a.kv_heads == c.kv_heads && a.head_dim == c.head_dim && a.capacity == c.capacity && a.kind == c.kind, || {
        Error::Shape(format!("K cache {a:?} and V cache {c:?} differ in shape or kind"))
    })?;
    let (params, k_wgs) = quantize_plan(k, tokens, pos0, kc)?;
    v.require("v", check_elements(tokens, c)?)?;
    let (kb, vb) = (quantize_bufs(ctx, k, kc), quantize_bufs(ctx, v, vc));
    // The K vectors' workgroups, then as many for V (workgroups past either half's vectors store nothing).
    let params = TransformParams { k_wgs: k_wgs as u32, ..params };
    // One dispatch for both binds 9 storage buffers: a device with fewer (WebGPU's default is 8),
    // and the Native tier (its MSL has no two-cache kernel), record one Quantize per cache.
    let one_dispatch = ctx.caps().limits.max_storage_buffers_per_shader_stage as usize >= TRANSFORM_KV_BINDINGS.len();
    ctx.with_native_fallback(&QUANTIZE, |variant| {
        if variant == Variant::Native || !one_dispatch {
            let (op, grid) = (TqPipeline::Transform { variant, op: TransformOp::Quantize }, ctx.grid(k_wgs)?);
            ctx.pipeline(&op)?;
            b.dispatch(&op, &params, &kb, grid)?;
            return b.dispatch(&op, &params, &vb, grid);
        }
        let bufs = [kb[0], kb[1], kb[2], kb[3], kb[4], vb[0], vb[1], vb[2], vb[3]];
        b.dispatch(&TqPipeline::Transform { variant, op: TransformOp::QuantizeKv }, &params, &bufs, ctx.grid(2 * k_wgs)?)
    })
}

/// The checked params and workgroup count of a quantisation of `tokens` tokens of `src` at `pos0`.
fn quantize_plan(src: &GpuBuffer<f32>, tokens: usize, pos0: usize, cache: &TqCache) -> Result<(TransformParams, u64)> {
    let c = &cache.config;
    ensure(tokens > 0, || Error::Shape("tokens = 0".into()))?;
    let n = check_elements(tokens, c)?;
    src.require("src", n)?;
    let last = pos0.checked_add(tokens - 1).filter(|&p| p < u32::MAX as usize).ok_or_else(|| Error::Argument(format!("positions {pos0} + {tokens} overflow u32")))?;
    c.slot(last)?;
    let skip = match c.kind {
        CacheKind::Window => tokens.saturating_sub(c.capacity),
        CacheKind::Global => 0,
    };
    let vectors = (tokens - skip) * c.kv_heads;
    let params = TransformParams {
        d: c.head_dim as u32,
        lanes: (c.head_dim / 8) as u32,
        vectors: vectors as u32,
        kv_heads: c.kv_heads as u32,
        capacity: c.capacity as u32,
        pos0: (pos0 + skip) as u32,
        src_off: (skip * c.kv_heads * c.head_dim / 4) as u32,
        ..Default::default()
    };
    Ok((params, transform_workgroups(vectors, c.head_dim)))
}

/// Dequantise positions `pos0..pos0 + count` of `cache` into `out` (`[count, kv_heads, d]` f32).
/// On a window cache the caller must ask only for positions still held (the last `capacity`).
pub fn dequantize(b: &mut Batch, cache: &TqCache, pos0: usize, count: usize, out: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    let c = &cache.config;
    ensure(count > 0, || Error::Shape("count = 0".into()))?;
    let n = check_elements(count, c)?;
    out.require("out", n)?;
    ensure(c.kind == CacheKind::Global || count <= c.capacity, || Error::Argument(format!("{count} positions from a window cache of {}", c.capacity)))?;
    let last = pos0.checked_add(count - 1).filter(|&p| p < u32::MAX as usize).ok_or_else(|| Error::Argument(format!("positions {pos0} + {count} overflow u32")))?;
    c.slot(last)?;
    let vectors = count * c.kv_heads;
    let params = TransformParams {
        d: c.head_dim as u32,
        lanes: (c.head_dim / 8) as u32,
        vectors: vectors as u32,
        kv_heads: c.kv_heads as u32,
        capacity: c.capacity as u32,
        pos0: pos0 as u32,
        ..Default::default()
    };
    let grid = ctx.grid(transform_workgroups(vectors, c.head_dim))?;
    let bufs = [ctx.dummy(), cache.codes.raw(), cache.norms.raw(), cache.signs.raw(), out.raw()];
    ctx.with_native_fallback(&DEQUANTIZE, |variant| b.dispatch(&TqPipeline::Transform { variant, op: TransformOp::Dequantize }, &params, &bufs, grid))
}

pub(crate) mod attention;
pub use attention::{decode_attention, DecodeAttention, Footprint, TqAttnWorkspace};

/// The family's params structs and the WGSL pipelines that bind each (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let all: Vec<_> = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let of = |variants: &[&str]| crate::kernels::pipelines_of(&all, variants);
    vec![crate::kernels::params_twin!(TransformParams, of(&["Transform"])), crate::kernels::params_twin!(AttendParams, of(&["Attend"]))]
}
