//! The attention prefill case (RoPE of Q and K fused into flash attention) with its f64
//! reference. The Native self-check runs some of them ([`crate::native`]), so it is built in every
//! build; the test and bench grids (`cases`, `testkit` feature) use it at every shape.

use super::check::{aux, TOL};
use super::*;
use crate::kernels::rope::samples::sample_configs;
use crate::kernels::rope::RopeConfig;
use crate::reference::{self, attention::Dims};
use crate::suite::{compare, guarded_f32, upload_guarded, Case, Check, Prepared, Rng};

/// The self-check cases of `attn_prefill`: one small grouped-query case per Native entry point
/// (head_dim 64, 128, 256; [`prefill_native::native_entries`]), odd token count, offset and KV
/// length, two row blocks and at least two key tiles, the K/V types and pair layouts spread over
/// them (f32 interleaved, f16 half-split, f16 interleaved with K coming rotated).
pub(crate) fn prefill_checks() -> Vec<Box<dyn Case>> {
    prefill_native::native_entries()
        .enumerate()
        .map(|(i, (d, _))| {
            let layout = if i == 1 { PairLayout::HalfSplit } else { PairLayout::Interleaved };
            let (tokens, offset) = (11 + 2 * i, 22 + 5 * i);
            Box::new(PrefillCase {
                tokens,
                offset,
                kv_len: offset + tokens + i % 2,
                shape: AttnShape::new(6, 2, d),
                layout,
                kv_f16: i > 0,
                causal: true,
                k_rotated: i == 2,
                mode: i,
                window: None,
                softcap: None,
            }) as Box<dyn Case>
        })
        .collect()
}

/// Tolerance of the Matrix prefill, in the units of the reference's magnitude
/// `mag = sum_j w_j |v_j| (1 + a_j + a_max)` (w_j the softmax weights, a_j = scale sum_i |q_i k_ji|).
/// With u = 2^-11 (f16 unit roundoff) and every sum in f32:
/// * Q' = Q * scale * log2 e and K rounded to f16 move the log2-domain score j by at most
///   2u * log2 e * a_j, so p_j by a relative 2u a_j (to first order); the weights w_j = p_j / l
///   (l is the f32 sum of the same p_j) then move by at most 2u (a_j + a_max) relative, and the
///   output by at most 2u * mag;
/// * P = exp2(s - m) rounded to f16 for the P V product (l sums them before rounding). m is the
///   row's reference max: a tile max, so m <= M (the row's true max) <= m + TAU, and the largest
///   P is in [1, 2^TAU]: no overflow, and l >= 1 as with m = M. Relative u, output error <= u * sum_j w_j |v_j| <= u * mag
///   (P under 2^-14 is subnormal in f16: absolute error 2^-25 per key, at most
///   2^-25 * kv_len * max|v| / l, below 1e-5 * mag for the test shapes, kv_len <= 4096);
/// * V rounded to f16 (f32 inputs; f16 inputs are exact): <= u * mag;
/// * f32 accumulation and exp2: the f32 kernels' budget, TOL.
///
/// So 4u + TOL ~ 2.05e-3. Any indexing, masking or RoPE mistake moves outputs by O(mag).
pub const MATRIX_TOL: f64 = 4.0 / 2048.0 + TOL;

/// One prefill problem.
#[derive(Clone, Copy, Debug)]
pub struct PrefillCase {
    pub tokens: usize,
    pub offset: usize,
    pub kv_len: usize,
    pub shape: AttnShape,
    pub layout: PairLayout,
    pub kv_f16: bool,
    pub causal: bool,
    pub k_rotated: bool,
    /// Index into `sample_configs` (the RoPE configurations the cases draw from).
    pub mode: usize,
    /// Sliding window and score soft-cap ([`Prefill::window`], [`Prefill::softcap`]).
    pub window: Option<usize>,
    pub softcap: Option<f32>,
}

impl PrefillCase {
    fn cfg(&self) -> RopeConfig {
        let c = sample_configs(self.shape.head_dim);
        c[self.mode % c.len()].clone()
    }
    /// Causal multiply-adds x 2 (QK^T and PV) x 2 flops.
    pub fn flops(&self) -> f64 {
        let s = self.shape;
        let pairs: f64 = if self.causal { (0..self.tokens).map(|t| (self.offset + t + 1) as f64).sum() } else { (self.tokens * self.kv_len) as f64 };
        4.0 * pairs * s.heads as f64 * s.head_dim as f64
    }
}

struct PrefillPrepared<KV: Elem> {
    case: PrefillCase,
    sets: Vec<(GpuBuffer<f32>, GpuBuffer<KV>, GpuBuffer<KV>)>,
    table: RopeTable,
    out: GpuBuffer<f32>,
    reference: (Vec<f64>, Vec<f64>),
}

impl<KV: Elem> Prepared for PrefillPrepared<KV> {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let (q, k, v) = &self.sets[copy % self.sets.len()];
        let c = &self.case;
        prefill(
            b,
            &Prefill {
                shape: c.shape,
                tokens: c.tokens,
                offset: c.offset,
                kv_len: c.kv_len,
                causal: c.causal,
                k_rotated: c.k_rotated,
                layout: c.layout,
                scale: None,
                window: c.window,
                softcap: c.softcap,
                q,
                k,
                v,
                table: &self.table,
                out: &self.out,
            },
        )
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let c = &self.case;
        let rows = c.tokens * c.shape.group();
        let (variant, _) = prefill_pipeline(ctx, c.shape.head_dim, KV::F16, c.layout == PairLayout::HalfSplit, rows)?;
        // The Native kernel rounds its operands to f16 exactly as the Matrix kernel does.
        let tol = if matches!(variant, Variant::Matrix | Variant::Native) { MATRIX_TOL } else { TOL };
        Ok(compare(&ctx.read(&self.out)?, &self.reference.0, &self.reference.1, tol))
    }
}

impl PrefillCase {
    fn prepare<KV: Elem>(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let s = self.shape;
        let d = s.head_dim;
        let cfg = self.cfg();
        let table = RopeTable::build(&aux(ctx), cfg.clone(), self.kv_len.max(self.offset + self.tokens))?;
        let mut sets = Vec::new();
        let mut reference = (Vec::new(), Vec::new());
        for copy in 0..copies.max(1) {
            let qv = rng.normal_vec(self.tokens * s.heads * d);
            let kv = rng.normal_vec(self.kv_len * s.kv_heads * d);
            let vv = rng.normal_vec(self.kv_len * s.kv_heads * d);
            let (k, k_stored) = upload_guarded::<KV>(ctx, &kv)?;
            let (v, v_stored) = upload_guarded::<KV>(ctx, &vv)?;
            if copy == 0 {
                let q64: Vec<f64> = qv.iter().map(|&x| x as f64).collect();
                let (q_rot, _) = reference::rope::rotate(&q64, s.heads, d, self.layout, &cfg, |t| self.offset + t);
                let k_rot = if self.k_rotated { k_stored } else { reference::rope::rotate(&k_stored, s.kv_heads, d, self.layout, &cfg, |j| j).0 };
                let dims = Dims {
                    tokens: self.tokens,
                    heads: s.heads,
                    kv_heads: s.kv_heads,
                    d,
                    kv_len: self.kv_len,
                    offset: self.offset,
                    causal: self.causal,
                    scale: 1.0 / (d as f64).sqrt(),
                    window: self.window,
                    softcap: self.softcap.map(f64::from),
                };
                reference = reference::attention::attention(&dims, &q_rot, &k_rot, &v_stored);
            }
            sets.push((ctx.upload(&qv)?, k, v));
        }
        let out = guarded_f32(ctx, self.tokens * s.heads * d)?;
        Ok(Box::new(PrefillPrepared::<KV> { case: *self, sets, table, out, reference }))
    }
}

impl Case for PrefillCase {
    fn name(&self) -> String {
        let s = self.shape;
        format!(
            "t={} off={} kv={} h={}/{} d={} {} {} {}{}{}{}{} flops={:.3e}",
            self.tokens,
            self.offset,
            self.kv_len,
            s.heads,
            s.kv_heads,
            s.head_dim,
            self.layout.name(),
            self.cfg().scaling.name(),
            if self.kv_f16 { "f16" } else { "f32" },
            if self.causal { "" } else { " full" },
            if self.k_rotated { " k-rotated" } else { "" },
            self.window.map_or(String::new(), |w| format!(" window={w}")),
            self.softcap.map_or(String::new(), |c| format!(" softcap={c}")),
            self.flops()
        )
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        let s = self.shape;
        let kv_elem = if self.kv_f16 { 2 } else { 4 };
        (2 * self.tokens * s.heads * s.head_dim * 4 + 2 * self.kv_len * s.kv_heads * s.head_dim * kv_elem) as u64
    }
    #[cfg(feature = "testkit")]
    fn flop_count(&self) -> Option<f64> {
        Some(self.flops())
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        if self.kv_f16 {
            self.prepare::<half::f16>(ctx, rng, copies)
        } else {
            self.prepare::<f32>(ctx, rng, copies)
        }
    }
}
