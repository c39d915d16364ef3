//! The TurboQuant cases (quantise, dequantise, attention over the compressed cache) with their
//! f64 references. The Native self-check runs a few of them ([`crate::native`]), so they are built
//! in every build; the test and bench grids (`cases`, `testkit` feature) use them all. References
//! are computed lazily in `check`, so bench setups stay cheap.

use super::codebook::{boundary_distance, code_of};
use super::*;
use crate::reference::turboquant as reference;
use crate::suite::{compare, guard_damage, guarded_f32, guarded_u32, Case, Check, Prepared, Rng, POISON_F32, POISON_U32};

/// The self-check case of `tq_quantize` (one Native entry point).
pub(crate) fn quantize_checks() -> Vec<Box<dyn Case>> {
    vec![Box::new(QuantCase { cfg: cfg(2, 64, 40, CacheKind::Global, Some(11)), tokens: 37, pos0: 3 })]
}

/// The self-check case of `tq_dequantize` (one Native entry point).
pub(crate) fn dequantize_checks() -> Vec<Box<dyn Case>> {
    vec![Box::new(DequantCase { cfg: cfg(2, 64, 33, CacheKind::Global, Some(5)), pos0: 0, count: 33 })]
}

/// The self-check case of `tq_decode_attention` (rotate, attend and merge all run Native).
pub(crate) fn attention_checks() -> Vec<Box<dyn Case>> {
    vec![Box::new(AttnCase { heads: 4, cfg: cfg(2, 64, 100, CacheKind::Global, Some(1)), kv_len: 77, window: None, sharpness: 1.0 })]
}

/// Tolerance of attention over the compressed cache against f64 attention over the same
/// (dequantised) cache, in units of `sum_j p_j rms(v_j) * (1 + S)` per output element, where S
/// is the largest score magnitude `|scale| sum_i |q_i k_ji|` (see
/// [`crate::reference::turboquant::decode_attention`]).
pub const ATTENTION_TOL: f64 = 1e-6;
/// Codes may differ from the CPU reference only where `u` is this close to a decision boundary.
pub const BOUNDARY_BAND: f64 = 1e-6;

/// `tokens * kv_heads` vectors of `d`: Gaussian, with adversarial ones mixed in when `adversarial`
/// (one-hot, constant, alternating, a single huge outlier, the zero vector).
pub fn test_vectors(rng: &mut Rng, tokens: usize, kv_heads: usize, d: usize, adversarial: bool) -> Vec<f32> {
    let mut v = rng.normal_vec(tokens * kv_heads * d);
    if adversarial {
        for (n, x) in v.chunks_mut(d).enumerate() {
            match n % 7 {
                1 => x.iter_mut().enumerate().for_each(|(i, e)| *e = if i == n % d { 3.0 } else { 0.0 }),
                3 => x.fill(-0.7),
                4 => x.iter_mut().enumerate().for_each(|(i, e)| *e = if i % 2 == 0 { 1.0 } else { -1.0 }),
                5 => x[n % d] = 1000.0,
                6 if n % 3 == 0 => x.fill(0.0),
                _ => {}
            }
        }
    }
    v
}

/// A random host cache whose codes follow the distribution real data gives (the code of a
/// normal sample, drawn through a 256-quantile table so that LLM-sized bench caches are quick
/// to make) and whose norms are around sqrt(d).
pub fn random_cache(rng: &mut Rng, config: TqConfig) -> HostTqCache {
    let n = config.kv_heads * config.capacity;
    let d = config.head_dim;
    let mut samples = rng.normal_vec(4096);
    samples.sort_by(f32::total_cmp);
    let table: Vec<u8> = (0..256).map(|b| code_of(samples[b * 16 + 8] as f64)).collect();
    let codes = rng.bytes(n * d).chunks_exact(2).map(|b| table[b[0] as usize] | table[b[1] as usize] << 4).collect();
    let s = (d as f32).sqrt();
    HostTqCache { config, codes, norms: rng.uniform_vec(n, 0.5 * s, 1.5 * s) }
}

#[derive(Clone, Copy)]
pub(super) struct QuantCase {
    pub(super) cfg: TqConfig,
    pub(super) tokens: usize,
    pub(super) pos0: usize,
}

pub(super) fn cfg(kv_heads: usize, head_dim: usize, capacity: usize, kind: CacheKind, sign_seed: Option<u64>) -> TqConfig {
    TqConfig { kv_heads, head_dim, capacity, kind, sign_seed }
}

struct QuantPrepared {
    case: QuantCase,
    /// One source per copy (copy 0 is checked), so benches read sources from memory.
    srcs: Vec<GpuBuffer<f32>>,
    host_src: Vec<f32>,
    caches: Vec<TqCache>,
}

impl Case for QuantCase {
    fn name(&self) -> String {
        let c = &self.cfg;
        format!("kvh={} d={} cap={} {:?} t={} pos={}{}", c.kv_heads, c.head_dim, c.capacity, c.kind, self.tokens, self.pos0, if c.sign_seed.is_some() { " signs" } else { "" })
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        let c = &self.cfg;
        let n = (self.tokens * c.kv_heads) as u64;
        n * (c.head_dim as u64 * 4 + c.head_dim as u64 / 2 + 4)
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let c = self.cfg;
        let host_src = test_vectors(rng, self.tokens, c.kv_heads, c.head_dim, true);
        let n = c.kv_heads * c.capacity;
        let (mut caches, mut srcs) = (Vec::new(), vec![ctx.upload(&host_src)?]);
        for i in 0..copies.max(1) {
            caches.push(TqCache::with_buffers(ctx, c, guarded_u32(ctx, n * c.head_dim / 8)?, guarded_f32(ctx, n)?)?);
            if i > 0 {
                srcs.push(ctx.upload(&rng.uniform_vec(host_src.len(), -2.0, 2.0))?);
            }
        }
        Ok(Box::new(QuantPrepared { case: *self, srcs, host_src, caches }))
    }
}

/// Compare a GPU-written cache with the reference writes: codes equal except within
/// [`BOUNDARY_BAND`] of a decision boundary (counted), norms to 1e-6 relative, untouched
/// vectors still poisoned. Returns the check and the near-boundary code differences as
/// (total, of which the reference value is exactly 0: exact cancellations in the transform of
/// structured inputs, which f32 leaves as tiny values of either sign).
pub fn check_quantized(ctx: &Context, cache: &TqCache, src: &[f32], tokens: usize, pos0: usize) -> Result<(Check, (usize, usize))> {
    let c = *cache.config();
    let d = c.head_dim;
    let words = ctx.read(cache.codes())?;
    let norms = ctx.read(cache.norms())?;
    let mut expect = reference::empty_cache(c);
    let written = reference::quantize_into(&mut expect, src, tokens, pos0);
    let (mut err, mut near, mut zeros, mut far, mut nonfinite) = (0f64, 0usize, 0usize, 0usize, 0usize);
    let mut touched = vec![false; c.kv_heads * c.capacity];
    for (v, q) in &written {
        touched[*v] = true;
        for (i, &u) in q.u.iter().enumerate() {
            let got = (words[v * d / 8 + i / 8] >> (4 * (i % 8))) & 15;
            if got != q.codes[i] as u32 {
                if boundary_distance(u) < BOUNDARY_BAND {
                    near += 1;
                    zeros += (u == 0.0) as usize;
                } else {
                    far += 1;
                }
            }
        }
        let g = norms[*v] as f64;
        if !g.is_finite() {
            nonfinite += 1;
        }
        err = err.max((g - q.norm).abs() / q.norm.max(f64::MIN_POSITIVE));
    }
    let n = c.kv_heads * c.capacity;
    let wpv = d / 8;
    let mut damage = guard_damage(&words, n * wpv, POISON_U32) + guard_damage(&norms, n, POISON_F32);
    for v in (0..n).filter(|&v| !touched[v]) {
        damage += words[v * wpv..(v + 1) * wpv].iter().filter(|&&w| w != POISON_U32).count();
        damage += (norms[v].to_bits() != POISON_F32) as usize;
    }
    let note = if far > 0 { format!("{far} codes differ from the CPU reference away from a decision boundary") } else { String::new() };
    Ok((Check { err, tol: 1e-6, nonfinite, guard_damage: damage, note }, (near, zeros)))
}

impl Prepared for QuantPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let i = copy % self.caches.len();
        quantize(b, &self.srcs[i], self.case.tokens, self.case.pos0, &self.caches[i])
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(check_quantized(ctx, &self.caches[0], &self.host_src, self.case.tokens, self.case.pos0)?.0)
    }
}

#[derive(Clone, Copy)]
pub(super) struct DequantCase {
    pub(super) cfg: TqConfig,
    pub(super) pos0: usize,
    pub(super) count: usize,
}

struct DequantPrepared {
    case: DequantCase,
    host: HostTqCache,
    cache: TqCache,
    out: GpuBuffer<f32>,
}

impl Case for DequantCase {
    fn name(&self) -> String {
        let c = &self.cfg;
        format!("kvh={} d={} cap={} {:?} pos={}+{}", c.kv_heads, c.head_dim, c.capacity, c.kind, self.pos0, self.count)
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        let c = &self.cfg;
        (self.count * c.kv_heads * (c.head_dim * 4 + c.head_dim / 2 + 4)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let host = random_cache(rng, self.cfg);
        let cache = TqCache::upload(ctx, &host)?;
        let out = guarded_f32(ctx, self.count * self.cfg.kv_heads * self.cfg.head_dim)?;
        Ok(Box::new(DequantPrepared { case: *self, host, cache, out }))
    }
}

impl Prepared for DequantPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        dequantize(b, &self.cache, self.case.pos0, self.case.count, &self.out)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let c = &self.case.cfg;
        let d = c.head_dim;
        let (mut r, mut mag) = (Vec::new(), Vec::new());
        for t in 0..self.case.count {
            let slot = c.slot(self.case.pos0 + t)? % c.capacity;
            for h in 0..c.kv_heads {
                r.extend(reference::dequantize_slot(&self.host, h, slot));
                // f32 transform error scale: norm / d * sum_i |c_i|.
                let s: f64 = (0..d).map(|i| codebook::centroid(self.host.code(h, slot, i)).abs() as f64).sum();
                mag.extend(std::iter::repeat_n(self.host.norm(h, slot) as f64 * s / d as f64, d));
            }
        }
        Ok(compare(&ctx.read(&self.out)?, &r, &mag, 1e-6))
    }
}

#[derive(Clone, Copy)]
pub(super) struct AttnCase {
    pub heads: usize,
    pub cfg: TqConfig,
    pub kv_len: usize,
    pub window: Option<usize>,
    /// Softmax scale in units of 1 / sqrt(d).
    pub sharpness: f32,
}

impl Case for AttnCase {
    fn name(&self) -> String {
        let c = &self.cfg;
        let w = self.window.map_or(String::new(), |w| format!(" win={w}"));
        format!("h={} kvh={} d={} cap={} {:?} len={}{w}", self.heads, c.kv_heads, c.head_dim, c.capacity, c.kind, self.kv_len)
    }
    #[cfg(feature = "testkit")]
    /// Compressed K and V of the visible positions, q, out, and the split-K partials written and read.
    fn bytes(&self) -> u64 {
        let c = &self.cfg;
        let d = c.head_dim;
        let a = self.problem();
        let (_, count) = a.visible(c).unwrap_or((0, 0));
        let quads = (self.heads / c.kv_heads).div_ceil(4);
        let splits = if count == 0 { 0 } else { attention::plan(None, count, c.kv_heads * quads, SPLIT_MAX).1 };
        (2 * count * c.kv_heads * (d / 2 + 4) + 2 * self.heads * d * 4 + 2 * self.heads * splits * (d + 4) * 4) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let kcfg = self.cfg;
        let vcfg = TqConfig { sign_seed: self.cfg.sign_seed.map(|s| s ^ 0x5555), ..self.cfg };
        let (hk, hv) = (random_cache(rng, kcfg), random_cache(rng, vcfg));
        let mut caches = vec![(TqCache::upload(ctx, &hk)?, TqCache::upload(ctx, &hv)?)];
        for _ in 1..copies {
            caches.push((TqCache::upload(ctx, &random_cache(rng, kcfg))?, TqCache::upload(ctx, &random_cache(rng, vcfg))?));
        }
        let hq = rng.normal_vec(self.heads * kcfg.head_dim);
        Ok(Box::new(AttnPrepared {
            case: *self,
            ws: TqAttnWorkspace::new(ctx, self.heads, &kcfg)?,
            q: ctx.upload(&hq)?,
            out: guarded_f32(ctx, self.heads * kcfg.head_dim)?,
            hq,
            hk,
            hv,
            caches,
        }))
    }
}

impl AttnCase {
    pub fn problem(&self) -> DecodeAttention {
        DecodeAttention { heads: self.heads, kv_len: self.kv_len, window: self.window, scale: self.sharpness / (self.cfg.head_dim as f32).sqrt() }
    }
}

struct AttnPrepared {
    case: AttnCase,
    ws: TqAttnWorkspace,
    q: GpuBuffer<f32>,
    out: GpuBuffer<f32>,
    hq: Vec<f32>,
    hk: HostTqCache,
    hv: HostTqCache,
    caches: Vec<(TqCache, TqCache)>,
}

/// f64 attention over the dequantised host caches: output and the error scale
/// `sum_j p_j rms(v_j) * (1 + S)` ([`ATTENTION_TOL`]'s unit).
pub fn attention_reference(q: &[f32], k: &HostTqCache, v: &HostTqCache, a: &DecodeAttention) -> Result<(Vec<f64>, Vec<f64>)> {
    let c = k.config;
    let (lo, count) = a.visible(&c)?;
    let (out, mag, smag) = reference::decode_attention(q, a.heads, c.kv_heads, c.head_dim, a.scale as f64, count, |j, h| {
        let slot = (lo + j) % c.capacity;
        (reference::dequantize_slot(k, h, slot), reference::dequantize_slot(v, h, slot))
    });
    Ok((out, mag.iter().map(|m| m * (1.0 + smag)).collect()))
}

impl Prepared for AttnPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let (k, v) = &self.caches[copy % self.caches.len()];
        decode_attention(b, &self.ws, &self.q, k, v, &self.out, &self.case.problem())
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let (r, mag) = attention_reference(&self.hq, &self.hk, &self.hv, &self.case.problem())?;
        Ok(compare(&ctx.read(&self.out)?, &r, &mag, ATTENTION_TOL))
    }
}
