//! The attention decode case (the whole step: RoPE of q and k, the cache append, split-K
//! attention and merge; or the attention passes alone) with its f64 reference. The Native
//! self-check runs two of them ([`crate::native`]), so it is built in every build; the test and
//! bench grids (`cases`, `testkit` feature) use it at every shape.

use super::*;
use crate::kernels::rope::samples::sample_configs;
use crate::kernels::rope::RopeConfig;
use crate::reference::{self, attention::Dims};
use crate::suite::{check_elems, compare, guarded_f32, upload_guarded, Case, Check, Prepared, Rng};

/// The self-check cases of `attn_decode`, whole decode steps: the Native partial pass has one
/// entry point per cache type and head dim (`attn_decode_{f32,f16}_d{64,80,96,128,256}`), and
/// each is run once, at a small grouped-query shape.
pub(crate) fn decode_checks() -> Vec<Box<dyn Case>> {
    let mut v: Vec<Box<dyn Case>> = Vec::new();
    for (i, (pos, h, kvh, d)) in [(40, 8, 2, 64), (33, 8, 2, 80), (25, 6, 2, 96), (20, 4, 1, 128), (16, 2, 2, 256)].into_iter().enumerate() {
        for kv_f16 in [false, true] {
            let layout = if (i + kv_f16 as usize) % 2 == 0 { PairLayout::HalfSplit } else { PairLayout::Interleaved };
            v.push(Box::new(DecodeCase { pos, shape: AttnShape::new(h, kvh, d), layout, kv_f16, mode: 0, window: None, softcap: None, attend_only: false, q8: false }));
        }
    }
    v
}

/// Tolerance of the f32 attention kernels (normalised as [`reference::attention::attention`] says).
pub(super) const TOL: f64 = 1e-4;

/// A context on the same device for the setup's helper kernels (the RoPE table has only a
/// Portable variant; the harness may be requiring another one for attention).
pub(super) fn aux(ctx: &Context) -> Context {
    ctx.with_options(ctx.options().clone().with_policy(crate::caps::VariantPolicy::Auto))
}

/// One decode step problem: the new token at `pos`, cache holds `pos` rotated keys.
#[derive(Clone, Copy, Debug)]
pub struct DecodeCase {
    pub pos: usize,
    pub shape: AttnShape,
    pub layout: PairLayout,
    pub kv_f16: bool,
    pub mode: usize,
    /// Time and check the attention passes only ([`decode_attention`] over keys `0..=pos` for an
    /// already rotated query): what torch's SDPA decode does. Otherwise the whole step ([`decode`]:
    /// RoPE of q and k, the cache append, then attention).
    pub attend_only: bool,
    /// Sliding window and score soft-cap ([`Decode::window`], [`Decode::softcap`]).
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    /// The whole step through [`decode_q8`]: the output's int8 activations too, checked bit
    /// for bit against the CPU quantiser's of the output written (`heads * head_dim % 32 == 0`).
    pub q8: bool,
}

struct DecodeSet<KV: Elem> {
    q: GpuBuffer<f32>,
    k_new: GpuBuffer<f32>,
    v_new: GpuBuffer<f32>,
    k_cache: GpuBuffer<KV>,
    v_cache: GpuBuffer<KV>,
}

struct DecodePrepared<KV: Elem> {
    case: DecodeCase,
    sets: Vec<DecodeSet<KV>>,
    /// The rotated query as f32 (the input of an attend-only case; its values are the reference's).
    q_rot_gpu: GpuBuffer<f32>,
    table: RopeTable,
    scratch: DecodeScratch,
    out: GpuBuffer<f32>,
    /// The output's int8 activations (`q8` cases).
    xq: Option<crate::kernels::q8::Q8Activations>,
    /// Inputs of the CPU reference: rotated q, the caches as they were before the step.
    q_rot: Vec<f64>,
    k_all: Vec<f32>,
    v_all: Vec<f32>,
    dims: Dims,
    /// Expected cache row `pos` (k rotated, v) and magnitudes.
    row: (Vec<f64>, Vec<f64>, Vec<f64>),
}

impl<KV: Elem> Prepared for DecodePrepared<KV> {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let st = &self.sets[copy % self.sets.len()];
        let c = &self.case;
        if c.attend_only {
            return decode_attention(
                b,
                &DecodeAttention {
                    shape: c.shape,
                    q_rot: &self.q_rot_gpu,
                    k_cache: &st.k_cache,
                    v_cache: &st.v_cache,
                    kv_len: c.pos + 1,
                    scale: None,
                    window: c.window,
                    softcap: c.softcap,
                    scratch: &self.scratch,
                    out: &self.out,
                },
            );
        }
        let step = Decode {
            shape: c.shape,
            pos: c.pos,
            layout: c.layout,
            scale: None,
            window: c.window,
            softcap: c.softcap,
            q: &st.q,
            k_new: &st.k_new,
            v_new: &st.v_new,
            k_cache: &st.k_cache,
            v_cache: &st.v_cache,
            capacity: c.pos + 1,
            table: &self.table,
            scratch: &self.scratch,
            out: &self.out,
        };
        match &self.xq {
            Some(xq) => decode_q8(b, &step, xq),
            None => decode(b, &step),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let s = self.case.shape;
        if self.case.attend_only {
            let k_all: Vec<f64> = self.k_all.iter().map(|&x| x as f64).collect();
            let v_all: Vec<f64> = self.v_all.iter().map(|&x| x as f64).collect();
            let (want, mag) = reference::attention::attention(&self.dims, &self.q_rot, &k_all, &v_all);
            return Ok(compare(&ctx.read(&self.out)?, &want, &mag, TOL));
        }
        let n = s.kv_heads * s.head_dim;
        let at = self.case.pos * n;
        let tol = if KV::F16 { 1e-3 } else { 3e-6 };
        let k = ctx.read(&self.sets[0].k_cache)?;
        let v = ctx.read(&self.sets[0].v_cache)?;
        let mut kc = check_elems(&k[at..], &self.row.0, &self.row.2, tol)?;
        // Per-element relative check, floored at f16's smallest normal (2^-14): below it f16 is
        // subnormal with a fixed absolute step of 2^-24, so one rounding there is within
        // 2^-24 / 2^-14 = 2^-10 < tol of the floor (an unfloored |v| made tiny values fail).
        let floor = if KV::F16 { 6.103_515_625e-5 } else { 1e-30 };
        let vmag: Vec<f64> = self.row.1.iter().map(|x| x.abs().max(floor)).collect();
        let vc = check_elems(&v[at..], &self.row.1, &vmag, tol)?;
        kc.tol = tol;
        // The attention reference uses the row the GPU stored (checked above to within one f16
        // rounding, whose direction WGSL's pack2x16float leaves to the implementation).
        let mut k_all: Vec<f64> = self.k_all.iter().map(|&x| x as f64).collect();
        let mut v_all: Vec<f64> = self.v_all.iter().map(|&x| x as f64).collect();
        for i in 0..n {
            k_all[at + i] = k[at + i].to_f32() as f64;
            v_all[at + i] = v[at + i].to_f32() as f64;
        }
        let (want, mag) = reference::attention::attention(&self.dims, &self.q_rot, &k_all, &v_all);
        let got = ctx.read(&self.out)?;
        let mut out = compare(&got, &want, &mag, TOL);
        if let Some(xq) = &self.xq {
            let (note, guard) = crate::kernels::q8::q8_diff(ctx, &got, xq)?;
            out.guard_damage += guard;
            out.note = note;
        }
        Ok(out.and(kc).and(vc))
    }
}

impl DecodeCase {
    fn cfg(&self) -> RopeConfig {
        let c = sample_configs(self.shape.head_dim);
        c[self.mode % c.len()].clone()
    }

    fn prepare<KV: Elem>(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let s = self.shape;
        let d = s.head_dim;
        let cfg = self.cfg();
        let kv_len = self.pos + 1;
        let table = RopeTable::build(&aux(ctx), cfg.clone(), kv_len)?;
        let n_row = s.kv_heads * d;
        let mut sets = Vec::new();
        let mut refs = (Vec::new(), Vec::new(), Vec::new());
        let mut row = (Vec::new(), Vec::new(), Vec::new());
        let dims = Dims {
            tokens: 1,
            heads: s.heads,
            kv_heads: s.kv_heads,
            d,
            kv_len,
            offset: self.pos,
            causal: true,
            scale: 1.0 / (d as f64).sqrt(),
            window: self.window,
            softcap: self.softcap.map(f64::from),
        };
        for copy in 0..copies.max(1) {
            let q = rng.normal_vec(s.heads * d);
            let k_new = rng.normal_vec(n_row);
            let v_new = rng.normal_vec(n_row);
            // Row `pos` of the caches starts as noise the decode must overwrite.
            let (k_cache, k_stored) = upload_guarded::<KV>(ctx, &rng.normal_vec(kv_len * n_row))?;
            let (v_cache, v_stored) = upload_guarded::<KV>(ctx, &rng.normal_vec(kv_len * n_row))?;
            if copy == 0 {
                let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
                let (q_rot, _) = reference::rope::rotate(&to64(&q), s.heads, d, self.layout, &cfg, |_| self.pos);
                // The attend-only input: q_rot rounded to f32, which the reference then uses.
                let q_rot: Vec<f64> = q_rot.iter().map(|&x| x as f32 as f64).collect();
                let (k_rot, k_mag) = reference::rope::rotate(&to64(&k_new), s.kv_heads, d, self.layout, &cfg, |_| self.pos);
                let f32s = |x: &[f64]| x.iter().map(|&a| a as f32).collect::<Vec<f32>>();
                refs = (q_rot, f32s(&k_stored[..kv_len * n_row]), f32s(&v_stored[..kv_len * n_row]));
                row = (k_rot, to64(&v_new), k_mag);
            }
            sets.push(DecodeSet { q: ctx.upload(&q)?, k_new: ctx.upload(&k_new)?, v_new: ctx.upload(&v_new)?, k_cache, v_cache });
        }
        let q_rot_gpu = ctx.upload(&refs.0.iter().map(|&x| x as f32).collect::<Vec<f32>>())?;
        Ok(Box::new(DecodePrepared::<KV> {
            case: *self,
            sets,
            q_rot_gpu,
            table,
            scratch: DecodeScratch::new(ctx, s)?,
            out: guarded_f32(ctx, s.heads * d)?,
            xq: if self.q8 && !self.attend_only { Some(crate::kernels::q8::guarded_q8(ctx, s.heads * d)?) } else { None },
            q_rot: refs.0,
            k_all: refs.1,
            v_all: refs.2,
            dims,
            row,
        }))
    }
}

impl Case for DecodeCase {
    fn name(&self) -> String {
        let s = self.shape;
        format!(
            "kv={} h={}/{} d={} {} {} {}{}{}{}",
            self.pos + 1,
            s.heads,
            s.kv_heads,
            s.head_dim,
            self.layout.name(),
            self.cfg().scaling.name(),
            if self.kv_f16 { "f16" } else { "f32" },
            if self.attend_only { " attend-only" } else { "" },
            self.window.map_or(String::new(), |w| format!(" window={w}")),
            self.softcap.map_or(String::new(), |c| format!(" softcap={c}"))
        ) + if self.q8 { " q8" } else { "" }
    }
    #[cfg(feature = "testkit")]
    /// K and V of the whole cache read once, q read, out written (and, for the whole step, the
    /// new row written).
    fn bytes(&self) -> u64 {
        let s = self.shape;
        let kv_elem = if self.kv_f16 { 2 } else { 4 };
        (2 * (self.pos + 1) * s.kv_heads * s.head_dim * kv_elem + 2 * s.heads * s.head_dim * 4) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        if self.kv_f16 {
            self.prepare::<half::f16>(ctx, rng, copies)
        } else {
            self.prepare::<f32>(ctx, rng, copies)
        }
    }
}
