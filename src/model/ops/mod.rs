//! Glue kernels of the forward pass that no kernel family provides (Portable WGSL only, one
//! invocation per output unit): a broadcast bias add over rows, the prefill's KV store (rotate a
//! chunk of new keys at their positions and write them with the values into an f16 cache), a
//! row copy, the SwiGLU / GeGLU of interleaved pairs and the split of a fused q/k/v projection's rows
//! (plus bias) into q, k and v, the greedy token of a logits row, the exact top-k of a logits
//! row (sampling's candidates) and a seeded draw from those candidates. Sources:
//! wgsl/model_bias_add.wgsl, model_kv_store.wgsl, model_copy_row.wgsl, model_glu_pairs.wgsl
//! (+ glu.wgsl), model_split_qkv.wgsl, model_argmax.wgsl, model_top_k.wgsl, model_draw.wgsl.
//!
//! With the `testkit` feature each glue kernel is also a test kit kernel (`kernels()`, in the
//! `cases` module, listed by `kernels::registry`): a correctness grid with fresh random
//! inputs and poisoned guard regions after every output, LLM-sized bench cases and every pipeline
//! it can build. CPU references: `reference_kv_store` (f64, the f16 cache's rounding bound),
//! `reference_split_qkv` (exact); bias add, row copy and argmax are checked bit for bit, the GLU
//! against the elementwise family's f64 activation, top-k against a full sort
//! (`reference_top_k`) and the choice of [`crate::model::sample::Sampler`], the draw against the
//! sampler's f64 draw from the same candidates and uniform (the same token, or a neighbour where
//! the uniform falls within f32 rounding of a boundary between two).

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::error::{ensure, Error, Result};
use crate::kernels::elementwise::Activation;
use crate::kernels::params_struct;
use crate::kernels::rope::{PairLayout, RopeTable};
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use half::f16;

pub const BIAS_ADD: KernelInfo = KernelInfo::new("model_bias_add", &[Variant::Portable], None);
pub const KV_STORE: KernelInfo = KernelInfo::new("model_kv_store", &[Variant::Portable], None);
pub const COPY_ROW: KernelInfo = KernelInfo::new("model_copy_row", &[Variant::Portable], None);
pub const GLU_PAIRS: KernelInfo = KernelInfo::new("model_glu_pairs", &[Variant::Portable], None);
pub const SPLIT_QKV: KernelInfo = KernelInfo::new("model_split_qkv", &[Variant::Portable], None);
pub const ARGMAX: KernelInfo = KernelInfo::new("model_argmax", &[Variant::Portable], None);
pub const TOP_K: KernelInfo = KernelInfo::new("model_top_k", &[Variant::Portable], None);
pub const DRAW: KernelInfo = KernelInfo::new("model_draw", &[Variant::Portable], None);

const BIAS_WGSL: &str = include_str!("../../../wgsl/model_bias_add.wgsl");
const KV_WGSL: &str = include_str!("../../../wgsl/model_kv_store.wgsl");
const COPY_WGSL: &str = include_str!("../../../wgsl/model_copy_row.wgsl");
const GLU_WGSL: &str = include_str!("../../../wgsl/model_glu_pairs.wgsl");
const SPLIT_WGSL: &str = include_str!("../../../wgsl/model_split_qkv.wgsl");
const ARGMAX_WGSL: &str = include_str!("../../../wgsl/model_argmax.wgsl");
const TOP_K_WGSL: &str = include_str!("../../../wgsl/model_top_k.wgsl");
const DRAW_WGSL: &str = include_str!("../../../wgsl/model_draw.wgsl");

const BIAS_BINDINGS: &[StorageBinding] = &[StorageBinding::write("y", "f32"), StorageBinding::read("bias", "f32")];
const KV_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("k_new", "f32"),
    StorageBinding::read("v_new", "f32"),
    StorageBinding::read("table", "vec2<f32>"),
    StorageBinding::write("kc", "u32"),
    StorageBinding::write("vc", "u32"),
];
const COPY_BINDINGS: &[StorageBinding] = &[StorageBinding::read("src", "f32"), StorageBinding::write("dst", "f32")];
const GLU_BINDINGS: &[StorageBinding] = &[StorageBinding::read("gu", "vec2<f32>"), StorageBinding::write("out", "f32")];
const ARGMAX_BINDINGS: &[StorageBinding] = &[StorageBinding::read("src", "f32"), StorageBinding::write("tok", "u32")];
const TOP_K_BINDINGS: &[StorageBinding] = &[StorageBinding::read("src", "u32"), StorageBinding::write("dst", "u32")];
const DRAW_BINDINGS: &[StorageBinding] = &[StorageBinding::read("cand", "u32"), StorageBinding::write("tok", "u32")];
const SPLIT_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read("src", "f32"),
    StorageBinding::read("bias", "f32"),
    StorageBinding::write("q", "f32"),
    StorageBinding::write("k", "f32"),
    StorageBinding::write("v", "f32"),
];

params_struct! {
    struct SplitParams {
        total: u32,
        w: u32,
        r0: u32,
        qd: u32,
        kvd: u32,
        has_bias: u32,
        _p0: u32,
        _p1: u32,
    }
}

params_struct! {
    struct Params4 {
        a: u32,
        b: u32,
        _p0: u32,
        _p1: u32,
    }
}

params_struct! {
    struct TopKParams {
        n: u32,
        k: u32,
        off: u32,
        mode: u32,
    }
}

params_struct! {
    struct DrawParams {
        k: u32,
        temperature: f32,
        top_p: f32,
        r: f32,
    }
}

params_struct! {
    struct KvParams {
        tokens: u32,
        kv_heads: u32,
        d: u32,
        half: u32,
        pos0: u32,
        table_half: u32,
        _p0: u32,
        _p1: u32,
    }
}

/// Pipelines of the runner's glue kernels.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModelPipeline {
    BiasAdd,
    KvStore { neox: bool },
    CopyRow,
    GluPairs { gelu: bool },
    SplitQkv,
    Argmax,
    TopK,
    Draw,
}

impl PipelineKey for ModelPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        let (text, constants, params_size, bindings) = match *self {
            ModelPipeline::BiasAdd => (BIAS_WGSL, vec![], std::mem::size_of::<Params4>(), BIAS_BINDINGS),
            ModelPipeline::KvStore { neox } => (KV_WGSL, vec![("NEOX", neox as u32 as f64)], std::mem::size_of::<KvParams>(), KV_BINDINGS),
            ModelPipeline::CopyRow => (COPY_WGSL, vec![], std::mem::size_of::<Params4>(), COPY_BINDINGS),
            ModelPipeline::GluPairs { gelu } => (GLU_WGSL, vec![("GELU", gelu as u32 as f64)], std::mem::size_of::<Params4>(), GLU_BINDINGS),
            ModelPipeline::SplitQkv => (SPLIT_WGSL, vec![], std::mem::size_of::<SplitParams>(), SPLIT_BINDINGS),
            ModelPipeline::Argmax => (ARGMAX_WGSL, vec![], std::mem::size_of::<Params4>(), ARGMAX_BINDINGS),
            ModelPipeline::TopK => (TOP_K_WGSL, vec![], std::mem::size_of::<TopKParams>(), TOP_K_BINDINGS),
            ModelPipeline::Draw => (DRAW_WGSL, vec![], std::mem::size_of::<DrawParams>(), DRAW_BINDINGS),
        };
        let wg = if matches!(self, ModelPipeline::Argmax | ModelPipeline::TopK | ModelPipeline::Draw) { 256 } else { 64 };
        // The GLU pairs compose the gate of glu.wgsl (over f32).
        let source = match self {
            ModelPipeline::GluPairs { .. } => vec![text, crate::kernels::elementwise::ELEM_F32, crate::kernels::elementwise::GLU_WGSL],
            _ => vec![text],
        };
        PipelineDesc { source: ShaderSource::Wgsl(source), entry: "main", constants, workgroup_size: [wg, 1, 1], params_size: params_size as u64, bindings }
    }
}

#[cfg(feature = "testkit")]
mod cases;
#[cfg(feature = "testkit")]
pub use cases::kernels;

/// The glue kernels' params structs and the pipelines that bind each (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<crate::kernels::ParamsTwin> {
    let all: Vec<_> = kernels().iter().flat_map(|k| k.pipelines()).collect();
    let of = |variants: &[&str]| crate::kernels::pipelines_of(&all, variants);
    vec![
        crate::kernels::params_twin!(Params4, of(&["BiasAdd", "CopyRow", "GluPairs", "Argmax"])),
        crate::kernels::params_twin!(KvParams, of(&["KvStore"])),
        crate::kernels::params_twin!(SplitParams, of(&["SplitQkv"])),
        crate::kernels::params_twin!(TopKParams, of(&["TopK"])),
        crate::kernels::params_twin!(DrawParams, of(&["Draw"])),
    ]
}

fn u32_of(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Shape(format!("{what} = {v} exceeds u32")))
}

/// `y[r * n + c] += bias[c]` for `r < rows`, `c < n`.
pub fn bias_add(b: &mut Batch, y: &GpuBuffer<f32>, bias: &GpuBuffer<f32>, rows: usize, n: usize) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&BIAS_ADD)?;
    ensure(rows > 0 && n > 0, || Error::Shape(format!("rows = {rows}, n = {n}: both must be > 0")))?;
    let total = rows.checked_mul(n).ok_or_else(|| Error::Shape("rows * n overflows".into()))?;
    y.require("y", total)?;
    bias.require("bias", n)?;
    let params = Params4 { a: u32_of(total, "rows * n")?, b: n as u32, _p0: 0, _p1: 0 };
    b.dispatch(&ModelPipeline::BiasAdd, &params, &[y.raw(), bias.raw()], ctx.grid((total as u64).div_ceil(64))?)
}

/// `dst[i] = src[row * n + i]` for `i < n`.
pub fn copy_row(b: &mut Batch, src: &GpuBuffer<f32>, row: usize, n: usize, dst: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&COPY_ROW)?;
    ensure(n > 0, || Error::Shape("n = 0".into()))?;
    let end = row.checked_add(1).and_then(|r| r.checked_mul(n)).ok_or_else(|| Error::Shape("row * n overflows".into()))?;
    src.require("src", end)?;
    dst.require("dst", n)?;
    u32_of(end, "(row + 1) * n")?;
    let params = Params4 { a: row as u32, b: n as u32, _p0: 0, _p1: 0 };
    b.dispatch(&ModelPipeline::CopyRow, &params, &[src.raw(), dst.raw()], ctx.grid((n as u64).div_ceil(64))?)
}

/// `tok[0]` = the greedy token of the logits row `src[offset .. offset + n]`: the lowest index
/// of its largest value, NaN skipped, as [`crate::model::sample::argmax`]; `u32::MAX` when there
/// is none (all NaN). One workgroup.
pub fn argmax(b: &mut Batch, src: &GpuBuffer<f32>, offset: usize, n: usize, tok: &GpuBuffer<u32>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&ARGMAX)?;
    ensure(n > 0, || Error::Shape("n = 0".into()))?;
    let end = offset.checked_add(n).ok_or_else(|| Error::Shape("offset + n overflows".into()))?;
    src.require("src", end)?;
    tok.require("tok", 1)?;
    u32_of(end, "offset + n")?;
    let params = Params4 { a: offset as u32, b: n as u32, _p0: 0, _p1: 0 };
    b.dispatch(&ModelPipeline::Argmax, &params, &[src.raw(), tok.raw()], [1, 1, 1])
}

/// The most candidates [`top_k`] keeps.
pub const TOP_K_MAX: usize = 256;
/// Entries one workgroup of [`top_k`] sorts (`BLOCK` in model_top_k.wgsl).
const TOP_K_BLOCK: usize = 1024;
/// The id of an empty [`top_k`] output slot.
pub const TOP_K_NONE: u32 = u32::MAX;

/// Words each of [`top_k`]'s two scratch buffers needs for a row of `n` logits and `k`
/// candidates: the first level's output, `2 k ceil(n / 1024)` (0 when one level does it all,
/// `n <= 1024`).
pub fn top_k_scratch_len(n: usize, k: usize) -> Result<usize> {
    let blocks = n.div_ceil(TOP_K_BLOCK);
    if blocks <= 1 {
        return Ok(0);
    }
    let len = blocks.checked_mul(k).and_then(|x| x.checked_mul(2)).ok_or_else(|| Error::Shape(format!("top-k scratch for n = {n}, k = {k} overflows")))?;
    u32_of(len, "top-k scratch words")?;
    Ok(len)
}

/// The exact top-k of the logits row `src[offset .. offset + n]`: the `k` largest finite logits
/// (NaN and +-inf are never candidates), the lowest id first among equal ones (-0 equals +0),
/// the set [`crate::model::sample::Sampler`] keeps on the CPU. Writes `out[2 r]` = the bits of
/// the r-th logit and `out[2 r + 1]` = its id (its index in the row), `r < k`, in rank order
/// (larger logit first, then lower id); slots past the row's finite logits hold id
/// [`TOP_K_NONE`]. `1 <= k <=` [`TOP_K_MAX`] (a `k` above `n` gives every finite logit).
///
/// Levels of one dispatch each: every workgroup sorts 1024 entries (a bitonic network in
/// workgroup memory) and keeps its best `k`, first of the row and then of the previous level's
/// output, until one workgroup is left; the levels' outputs alternate between `scratch[0]` and
/// `scratch[1]` (each of [`top_k_scratch_len`] words; any buffer where `n <= 1024`).
#[allow(clippy::too_many_arguments)]
pub fn top_k(b: &mut Batch, src: &GpuBuffer<f32>, offset: usize, n: usize, k: usize, scratch: [&GpuBuffer<u32>; 2], out: &GpuBuffer<u32>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&TOP_K)?;
    ensure(n > 0, || Error::Shape("n = 0".into()))?;
    ensure((1..=TOP_K_MAX).contains(&k), || Error::Argument(format!("top-k of k = {k} (1..={TOP_K_MAX})")))?;
    let end = offset.checked_add(n).ok_or_else(|| Error::Shape("offset + n overflows".into()))?;
    src.require("src", end)?;
    u32_of(end, "offset + n")?;
    out.require("out", 2 * k)?;
    let scratch_len = top_k_scratch_len(n, k)?;
    if scratch_len > 0 {
        scratch[0].require("scratch[0]", scratch_len)?;
        scratch[1].require("scratch[1]", scratch_len)?;
    }
    // Every level's count and workgroups, checked before anything is recorded.
    let mut levels = Vec::new();
    let mut count = n;
    loop {
        let blocks = count.div_ceil(TOP_K_BLOCK);
        levels.push((count, ctx.grid(blocks as u64)?));
        if blocks == 1 {
            break;
        }
        // blocks * k <= 2 k ceil(n / 1024) / 2 <= scratch_len / 2 (checked above); below count.
        count = blocks * k;
    }
    let last = levels.len() - 1;
    for (i, &(count, grid)) in levels.iter().enumerate() {
        let input = if i == 0 { src.raw() } else { scratch[(i - 1) % 2].raw() };
        let dst = if i == last { out } else { scratch[i % 2] };
        let params = TopKParams { n: count as u32, k: k as u32, off: if i == 0 { offset as u32 } else { 0 }, mode: (i > 0) as u32 };
        b.dispatch(&ModelPipeline::TopK, &params, &[input, dst.raw()], grid)?;
    }
    Ok(())
}

/// The candidates of a [`top_k`] output (`2 k` words) as `(logit, id)`, empty slots dropped,
/// appended to `out` in the output's (rank) order.
pub fn top_k_candidates(words: &[u32], out: &mut Vec<(f32, u32)>) {
    out.extend(words.chunks_exact(2).filter(|w| w[1] != TOP_K_NONE).map(|w| (f32::from_bits(w[0]), w[1])));
}

/// `tok[0]` = a token drawn from the `k` candidates of a [`top_k`] output (`cand`, `2 k` words
/// in rank order) as [`crate::model::sample::Sampler`] draws from them, with `r` in `[0, 1)` as
/// its uniform: a softmax at `temperature` over the filled slots, the top-p cut (`top_p` in
/// `(0, 1]`, 1 = off), then the first candidate whose running probability exceeds `r`.
/// [`TOP_K_NONE`] when no slot is filled. Computed in f32 (the sampler's f64 gives the same
/// token but where `r` lies within f32 rounding of a boundary between two). One workgroup.
pub fn draw(b: &mut Batch, cand: &GpuBuffer<u32>, k: usize, temperature: f32, top_p: f32, r: f32, tok: &GpuBuffer<u32>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&DRAW)?;
    ensure((1..=TOP_K_MAX).contains(&k), || Error::Argument(format!("draw from k = {k} candidates (1..={TOP_K_MAX})")))?;
    ensure(temperature.is_finite() && temperature > 0.0, || Error::Argument(format!("temperature {temperature}: must be finite and > 0")))?;
    ensure(top_p > 0.0 && top_p <= 1.0, || Error::Argument(format!("top_p {top_p}: must be in (0, 1]")))?;
    ensure((0.0..1.0).contains(&r), || Error::Argument(format!("uniform {r}: must be in [0, 1)")))?;
    cand.require("cand", 2 * k)?;
    tok.require("tok", 1)?;
    // A subnormal temperature may be flushed to 0 on the GPU (0 / 0 for the best candidate):
    // the smallest normal one weighs the candidates the same way (every logit below the best
    // gets weight 0 but where the gap is itself near the subnormal range).
    let params = DrawParams { k: k as u32, temperature: temperature.max(f32::MIN_POSITIVE), top_p, r };
    b.dispatch(&ModelPipeline::Draw, &params, &[cand.raw(), tok.raw()], [1, 1, 1])
}

/// `out[i] = act(gu[2i]) * gu[2i + 1]` for `i < n`: the SwiGLU ([`Activation::Silu`]) or GeGLU
/// ([`Activation::GeluTanh`]) of interleaved (gate, up) pairs.
pub fn glu_pairs(b: &mut Batch, act: Activation, gu: &GpuBuffer<f32>, n: usize, out: &GpuBuffer<f32>) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&GLU_PAIRS)?;
    ensure(n > 0, || Error::Shape("n = 0".into()))?;
    let n2 = n.checked_mul(2).ok_or_else(|| Error::Shape("2 n overflows".into()))?;
    gu.require("gu", n2)?;
    out.require("out", n)?;
    u32_of(n2, "2 n")?;
    let params = Params4 { a: n as u32, b: 0, _p0: 0, _p1: 0 };
    b.dispatch(&ModelPipeline::GluPairs { gelu: act == Activation::GeluTanh }, &params, &[gu.raw(), out.raw()], ctx.grid((n as u64).div_ceil(64))?)
}

/// The destinations of [`split_qkv`]: `q [m, qd]`, `k [m, kvd]`, `v [m, kvd]`.
pub struct QkvOut<'a> {
    pub q: &'a GpuBuffer<f32>,
    pub k: &'a GpuBuffer<f32>,
    pub v: &'a GpuBuffer<f32>,
    pub qd: usize,
    pub kvd: usize,
}

/// Columns `r0..r0 + w` of the `[q | k | v]` rows of a fused projection (`src [m, w]`, row-major)
/// into `q`, `k`, `v`, plus `bias[r0 + c]` when given (`bias [qd + 2 kvd]`, the three biases
/// concatenated). Columns outside `r0..r0 + w` are not written.
pub fn split_qkv(b: &mut Batch, src: &GpuBuffer<f32>, m: usize, r0: usize, w: usize, bias: Option<&GpuBuffer<f32>>, out: &QkvOut) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&SPLIT_QKV)?;
    let (qd, kvd) = (out.qd, out.kvd);
    ensure(m > 0 && w > 0 && qd > 0 && kvd > 0, || Error::Shape(format!("m = {m}, w = {w}, qd = {qd}, kvd = {kvd}: all must be > 0")))?;
    let n3 = kvd.checked_mul(2).and_then(|x| x.checked_add(qd)).ok_or_else(|| Error::Shape("qd + 2 kvd overflows".into()))?;
    let end = r0.checked_add(w).ok_or_else(|| Error::Shape("r0 + w overflows".into()))?;
    ensure(end <= n3, || Error::Shape(format!("columns {r0}..{end} outside the {n3} of [q | k | v]")))?;
    let total = m.checked_mul(w).ok_or_else(|| Error::Shape("m * w overflows".into()))?;
    src.require("src", total)?;
    out.q.require("q", m.checked_mul(qd).ok_or_else(|| Error::Shape("m * qd overflows".into()))?)?;
    let kv_len = m.checked_mul(kvd).ok_or_else(|| Error::Shape("m * kvd overflows".into()))?;
    out.k.require("k", kv_len)?;
    out.v.require("v", kv_len)?;
    u32_of(m.checked_mul(n3).ok_or_else(|| Error::Shape("m * (qd + 2 kvd) overflows".into()))?, "m * (qd + 2 kvd)")?;
    if let Some(bias) = bias {
        bias.require("bias", n3)?;
    }
    let params = SplitParams { total: total as u32, w: w as u32, r0: r0 as u32, qd: qd as u32, kvd: kvd as u32, has_bias: bias.is_some() as u32, _p0: 0, _p1: 0 };
    let bias = bias.map_or_else(|| ctx.dummy(), |x| x.raw());
    b.dispatch(&ModelPipeline::SplitQkv, &params, &[src.raw(), bias, out.q.raw(), out.k.raw(), out.v.raw()], ctx.grid((total as u64).div_ceil(64))?)
}

/// Reference of [`top_k`]: a full sort of the row's finite logits, larger first and the lower id
/// first among equal ones (-0 equals +0), its first `k` as `(logit, id)`.
#[cfg(feature = "testkit")]
pub fn reference_top_k(row: &[f32], k: usize) -> Vec<(f32, u32)> {
    let mut all: Vec<(f32, u32)> = row.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)).collect();
    all.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then(a.1.cmp(&b.1)));
    all.truncate(k);
    all
}

/// Reference of [`split_qkv`] (exact: a copy plus one f32 add): updates `q`, `k`, `v`.
#[cfg(feature = "testkit")]
#[allow(clippy::too_many_arguments)]
pub fn reference_split_qkv(src: &[f32], m: usize, r0: usize, w: usize, bias: Option<&[f32]>, qd: usize, kvd: usize, q: &mut [f32], k: &mut [f32], v: &mut [f32]) {
    for t in 0..m {
        for c in 0..w {
            let g = r0 + c;
            let val = src[t * w + c] + bias.map_or(0.0, |b| b[g]);
            if g < qd {
                q[t * qd + g] = val;
            } else if g < qd + kvd {
                k[t * kvd + g - qd] = val;
            } else {
                v[t * kvd + g - qd - kvd] = val;
            }
        }
    }
}

/// One chunk of new keys and values for [`kv_store`].
pub struct KvStore<'a> {
    /// New keys and values `[tokens, kv_heads, head_dim]` f32, keys unrotated.
    pub k_new: &'a GpuBuffer<f32>,
    pub v_new: &'a GpuBuffer<f32>,
    pub tokens: usize,
    pub kv_heads: usize,
    /// Position of token 0 (token t goes to cache row `pos0 + t`, rotated at that position).
    pub pos0: usize,
    pub layout: PairLayout,
    pub table: &'a RopeTable,
    /// Caches `[capacity, kv_heads, head_dim]` f16.
    pub k_cache: &'a GpuBuffer<f16>,
    pub v_cache: &'a GpuBuffer<f16>,
    pub capacity: usize,
}

/// Rotate the chunk's keys at their positions and store keys and values into the caches.
/// Rows past `capacity` are [`Error::PositionOutOfRange`].
pub fn kv_store(b: &mut Batch, a: &KvStore) -> Result<()> {
    let ctx = b.context();
    ctx.variant_for(&KV_STORE)?;
    let d = a.table.head_dim();
    ensure(a.tokens > 0 && a.kv_heads > 0, || Error::Shape(format!("tokens = {}, kv_heads = {}: both must be > 0", a.tokens, a.kv_heads)))?;
    let end = a.pos0.checked_add(a.tokens).ok_or_else(|| Error::Shape("pos0 + tokens overflows".into()))?;
    ensure(end <= a.capacity, || Error::PositionOutOfRange { pos: (end - 1) as u64, capacity: a.capacity as u64 })?;
    a.table.check_positions(end as u64 - 1)?;
    let row = a.kv_heads.checked_mul(d).ok_or_else(|| Error::Shape("kv_heads * d overflows".into()))?;
    let new_len = a.tokens.checked_mul(row).ok_or_else(|| Error::Shape("tokens * row overflows".into()))?;
    let cache_len = a.capacity.checked_mul(row).ok_or_else(|| Error::Shape("capacity * row overflows".into()))?;
    u32_of(cache_len, "cache elements")?;
    a.k_new.require("k_new", new_len)?;
    a.v_new.require("v_new", new_len)?;
    a.k_cache.require("k_cache", cache_len)?;
    a.v_cache.require("v_cache", cache_len)?;
    let params =
        KvParams { tokens: a.tokens as u32, kv_heads: a.kv_heads as u32, d: d as u32, half: (d / 2) as u32, pos0: a.pos0 as u32, table_half: (d / 2) as u32, _p0: 0, _p1: 0 };
    let units = (new_len / 2) as u64;
    let key = ModelPipeline::KvStore { neox: a.layout == PairLayout::HalfSplit };
    b.dispatch(&key, &params, &[a.k_new.raw(), a.v_new.raw(), a.table.buffer().raw(), a.k_cache.raw(), a.v_cache.raw()], ctx.grid(units.div_ceil(64))?)
}

/// f64 reference of [`kv_store`]'s key rotation: `k` `[tokens, kv_heads, d]` rotated with
/// `inv_freq` (and attention factor 1) at positions `pos0 + t`.
#[cfg(feature = "testkit")]
pub fn reference_kv_store(k: &[f32], tokens: usize, kv_heads: usize, d: usize, pos0: usize, layout: PairLayout, inv_freq: &[f64]) -> Vec<f64> {
    let mut out: Vec<f64> = k.iter().map(|&v| v as f64).collect();
    for t in 0..tokens {
        for h in 0..kv_heads {
            let base = (t * kv_heads + h) * d;
            for (i, f) in inv_freq.iter().enumerate().take(d / 2) {
                let (ea, eb) = layout.pair(i, d);
                let ang = (pos0 + t) as f64 * f;
                let (a, bb) = (k[base + ea] as f64, k[base + eb] as f64);
                out[base + ea] = a * ang.cos() - bb * ang.sin();
                out[base + eb] = bb * ang.cos() + a * ang.sin();
            }
        }
    }
    out
}
