//! Decode attention over compressed K and V caches: one split-K pass over the 4-bit codes in the
//! rotated domain (`attend`: each workgroup rotates its own queries and rotates its partial
//! output back), and one log-sum-exp merge (`merge`, one workgroup per head, its teams splitting
//! the partial rows). Two dispatches per call.

use super::*;

/// One decode step's attention problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeAttention {
    /// Query heads (a multiple of the caches' kv heads; GQA group = heads / kv_heads).
    pub heads: usize,
    /// Positions written so far (the query sits at position `kv_len - 1` and sees keys up to it).
    pub kv_len: usize,
    /// Sliding window: the query sees the last `window` positions. `None` = all of them on a
    /// global cache, the last `capacity` on a window cache.
    pub window: Option<usize>,
    /// Softmax scale, usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

impl DecodeAttention {
    /// The visible logical positions `lo..kv_len`, validated against the cache.
    pub fn visible(&self, c: &TqConfig) -> Result<(usize, usize)> {
        ensure(self.kv_len > 0, || Error::Shape("kv_len = 0: nothing to attend to".into()))?;
        ensure(self.kv_len <= u32::MAX as usize, || Error::Argument(format!("kv_len = {} overflows u32", self.kv_len)))?;
        c.slot(self.kv_len - 1)?;
        let w = match (c.kind, self.window) {
            (_, Some(0)) => return Err(Error::Argument("window = 0".into())),
            (CacheKind::Window, Some(w)) => {
                ensure(w <= c.capacity, || Error::Argument(format!("window {w} exceeds the ring buffer's capacity {}", c.capacity)))?;
                w
            }
            (CacheKind::Window, None) => c.capacity,
            (CacheKind::Global, w) => w.unwrap_or(usize::MAX),
        };
        let count = self.kv_len.min(w);
        Ok((self.kv_len - count, count))
    }
}

/// Smallest positions-per-split the plan uses.
const SPLIT_MIN: usize = 64;

/// The split pass's workgroup memory plan (the `SPLIT_MAX`, `SH` and `STRIPE_ROUNDS` constants
/// of tq_attention.wgsl), chosen per device by [`Footprint::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Footprint {
    /// Positions per split at most.
    pub(crate) split_max: usize,
    /// vec4s of the shared array.
    sh: usize,
    /// Rounds of the V stripes' sums.
    rounds: usize,
}

impl Footprint {
    /// 20.1 KiB; the MSL twin's plan.
    pub const FULL: Footprint = Footprint { split_max: SPLIT_MAX, sh: 1024, rounds: 1 };
    /// 12.6 KiB: inside WebGPU's default 16 KiB.
    pub const COMPACT: Footprint = Footprint { split_max: 128, sh: 640, rounds: 2 };

    /// Workgroup memory bytes: the shared array, the V norms, the 16 centroids, the reductions'
    /// 128 vec4s.
    pub const fn bytes(self) -> usize {
        16 * self.sh + 4 * self.split_max + 4 * 16 + 16 * 128
    }

    /// The full plan where the device has the memory for it, else the compact one.
    pub fn of(caps: &crate::caps::Caps) -> Result<Footprint> {
        let mem = caps.limits.max_compute_workgroup_storage_size as usize;
        [Footprint::FULL, Footprint::COMPACT]
            .into_iter()
            .find(|f| f.bytes() <= mem)
            .ok_or_else(|| Error::Limit(format!("{}: needs {} bytes of workgroup memory, the device has {mem}", ATTENTION.name, Footprint::COMPACT.bytes())))
    }

    /// The constants as WGSL, placed before tq_attention.wgsl (plain constants: each plan's
    /// pipeline is compiled with its sizes fixed).
    pub(crate) fn wgsl(self) -> &'static str {
        match self == Footprint::FULL {
            true => "const SPLIT_MAX: u32 = 512u;\nconst SH: u32 = 1024u;\nconst STRIPE_ROUNDS: u32 = 1u;\n",
            false => "const SPLIT_MAX: u32 = 128u;\nconst SH: u32 = 640u;\nconst STRIPE_ROUNDS: u32 = 2u;\n",
        }
    }
}

/// [`crate::Tuning::tq_split`] (64 to the plan's most, 512 or 128): force the positions per
/// split (for tuning on a new GPU).
pub(crate) fn forced_split(caps: &crate::caps::Caps, fp: Footprint) -> Option<usize> {
    crate::tuning::accepted(caps.tuning.tq_split, |s| (SPLIT_MIN..=fp.split_max).contains(&s))
}

/// Split-K plan: (positions per split, splits) for `count` visible positions and `units`
/// (kv head, query quad) pairs: about [`TARGET_WORKGROUPS`] workgroups, positions per split a
/// multiple of 64 within 64..=`split_max` (so more workgroups only where the longest splits need
/// them). `forced` ([`forced_split`]) replaces the choice.
pub(crate) fn plan(forced: Option<usize>, count: usize, units: usize, split_max: usize) -> (usize, usize) {
    let split_len = forced.unwrap_or_else(|| count.saturating_mul(units).div_ceil(TARGET_WORKGROUPS).next_multiple_of(SPLIT_MIN).clamp(SPLIT_MIN, split_max));
    (split_len, count.div_ceil(split_len))
}

/// Scratch of [`decode_attention`]: the split-K partial rows.
pub struct TqAttnWorkspace {
    heads: usize,
    head_dim: usize,
    max_splits: usize,
    partial: GpuBuffer<f32>,
}

impl TqAttnWorkspace {
    /// Scratch for `heads` query heads over caches shaped like `cache` (any kv_len up to its capacity).
    pub fn new(ctx: &Context, heads: usize, cache: &TqConfig) -> Result<TqAttnWorkspace> {
        cache.validate()?;
        check_heads(heads, cache.kv_heads)?;
        let units = cache.kv_heads * (heads / cache.kv_heads).div_ceil(4);
        let cap = cache.capacity.min(u32::MAX as usize);
        let fp = Footprint::of(ctx.caps())?;
        // The most splits `plan` gives for any count <= capacity: below split_max positions per
        // split, split_len >= count * units / TARGET_WORKGROUPS, so splits <= TARGET_WORKGROUPS / units + 1.
        let max_splits = match forced_split(ctx.caps(), fp) {
            Some(s) => cap.div_ceil(s),
            None => (TARGET_WORKGROUPS / units + 1).max(cap.div_ceil(fp.split_max)),
        };
        let d = cache.head_dim;
        crate::error::dims::elems_u32("heads * head_dim", &[heads, d])?;
        let partial = crate::error::dims::elems_u32("heads * splits * (head_dim + 4)", &[heads, max_splits, d + 4])?;
        Ok(TqAttnWorkspace { heads, head_dim: d, max_splits, partial: ctx.alloc(partial)? })
    }

    /// Bytes of scratch.
    pub fn bytes(&self) -> u64 {
        self.partial.len() as u64 * 4
    }
}

fn check_heads(heads: usize, kv_heads: usize) -> Result<()> {
    ensure(heads > 0 && heads % kv_heads == 0, || Error::Shape(format!("{heads} query heads is not a multiple of {kv_heads} kv heads")))
}

/// `out[h] = softmax(q[h] . K^T * scale) V` for one query token (`q`, `out`: `[heads, d]` f32)
/// over the visible positions of the compressed caches `k` and `v`, which must share kv heads,
/// head dim, capacity and kind (their sign seeds may differ).
pub fn decode_attention(b: &mut Batch, ws: &TqAttnWorkspace, q: &GpuBuffer<f32>, k: &TqCache, v: &TqCache, out: &GpuBuffer<f32>, a: &DecodeAttention) -> Result<()> {
    let ctx = b.context();
    let (kc, vc) = (&k.config, &v.config);
    ensure(kc.kv_heads == vc.kv_heads && kc.head_dim == vc.head_dim && kc.capacity == vc.capacity && kc.kind == vc.kind, || {
        Error::Shape(format!("K cache {kc:?} and V cache {vc:?} differ in shape or kind"))
    })?;
    check_heads(a.heads, kc.kv_heads)?;
    let d = kc.head_dim;
    ensure(ws.heads == a.heads && ws.head_dim == d, || Error::Shape(format!("workspace for {} heads x {} does not fit {} heads x {d}", ws.heads, ws.head_dim, a.heads)))?;
    q.require("q", a.heads * d)?;
    out.require("out", a.heads * d)?;
    ensure(a.scale.is_finite(), || Error::Argument(format!("scale = {}", a.scale)))?;
    let (lo, count) = a.visible(kc)?;
    let group = a.heads / kc.kv_heads;
    let quads = group.div_ceil(4);
    let fp = Footprint::of(ctx.caps())?;
    let (split_len, splits) = plan(forced_split(ctx.caps(), fp), count, kc.kv_heads * quads, fp.split_max);
    ensure(splits <= ws.max_splits, || Error::Limit(format!("{splits} splits > workspace's {}", ws.max_splits)))?;
    let row = d + 4;
    let inv_d = 1.0 / d as f32;

    let tp = TransformParams { d: d as u32, lanes: (d / 8) as u32, vectors: a.heads as u32, splits: splits as u32, row: row as u32, ..Default::default() };

    let ap = AttendParams {
        kv_heads: kc.kv_heads as u32,
        heads: a.heads as u32,
        d: d as u32,
        capacity: kc.capacity as u32,
        lo: lo as u32,
        count: count as u32,
        split_len: split_len as u32,
        splits: splits as u32,
        group: group as u32,
        quads: quads as u32,
        kscale: a.scale * inv_d,
        vscale: inv_d,
        row: row as u32,
        _p0: 0,
        _p1: 0,
        _p2: 0,
    };
    let bufs = [q.raw(), k.codes.raw(), k.norms.raw(), v.codes.raw(), v.norms.raw(), ws.partial.raw(), k.signs.raw(), v.signs.raw()];
    // kv_heads * quads * splits <= heads * splits, bounded by the workspace size (checked at its creation).
    let attend_grid = ctx.grid((kc.kv_heads * quads * splits) as u64)?;
    // The merge runs one workgroup per head.
    let merge_grid = ctx.grid(a.heads as u64)?;

    ctx.with_native_fallback(&ATTENTION, |variant| {
        let attend = TqPipeline::Attend { variant, footprint: fp };
        let merge = TqPipeline::Transform { variant, op: TransformOp::Merge };
        // Build both first: a pipeline that fails to build then records nothing, so a Native
        // failure falls back without a stray dispatch.
        ctx.pipeline(&attend)?;
        ctx.pipeline(&merge)?;
        b.dispatch(&attend, &ap, &bufs, attend_grid)?;
        b.dispatch(&merge, &tp, &[ws.partial.raw(), v.codes.raw(), v.norms.raw(), v.signs.raw(), out.raw()], merge_grid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each footprint's WGSL names its own sizes, and the sizes keep the shader's invariants: the
    /// scores fit after the queries (`SH >= SC + SPLIT_MAX`, SC = 512) and the rounds cover the
    /// V stripes' 1024 vec4s.
    #[test]
    fn footprint_constants_are_its_fields() {
        for f in [Footprint::FULL, Footprint::COMPACT] {
            let want = format!("const SPLIT_MAX: u32 = {}u;\nconst SH: u32 = {}u;\nconst STRIPE_ROUNDS: u32 = {}u;\n", f.split_max, f.sh, f.rounds);
            assert_eq!(f.wgsl(), want);
            assert!(f.sh >= 512 + f.split_max && f.sh * f.rounds >= 1024 && f.split_max % SPLIT_MIN == 0, "{f:?}");
        }
    }
}
