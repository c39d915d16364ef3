//! The INT4 cases the Native self-check runs ([`crate::native`]): the quantiser, against its
//! CPU reference. Built in every build; the test grid (`cases`, `testkit`
//! feature) reuses them.

use super::*;
use crate::reference;
use crate::suite::{guard_damage, guarded_u32, Case, Check, Prepared, Rng, POISON_U32};

/// The self-check cases: one per source type (`int4_quant_*_f32`, `int4_quant_*_f16`).
pub(crate) fn quantize_checks() -> Vec<Box<dyn Case>> {
    vec![Box::new(QuantCase { n: 17, k: 33, g: 33, mode: Int4Mode::Asymmetric, f16: false }), Box::new(QuantCase { n: 3, k: 31, g: 7, mode: Int4Mode::Signed, f16: true })]
}

/// Random valid weights: random codes, positive scales, optional zeros.
#[cfg(feature = "testkit")]
pub fn random_host(rng: &mut Rng, n: usize, k: usize, group_size: usize, mode: Int4Mode, zeros: bool) -> HostInt4 {
    let ng = k.div_ceil(group_size);
    let mut codes = rng.bytes(n * k.div_ceil(2));
    if k % 2 == 1 {
        for r in 0..n {
            codes[r * k.div_ceil(2) + k / 2] &= 0x0f;
        }
    }
    let zero_range = if mode == Int4Mode::Asymmetric { (0.0, 15.0) } else { (-1.5, 1.5) };
    HostInt4 { n, k, group_size, mode, codes, scales: rng.uniform_vec(n * ng, 0.002, 0.05), zeros: zeros.then(|| rng.uniform_vec(n * ng, zero_range.0, zero_range.1)) }
}

pub(super) struct QuantCase {
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) g: usize,
    pub(super) mode: Int4Mode,
    pub(super) f16: bool,
}

struct QuantPrepared<T: QuantSource> {
    src: GpuBuffer<T>,
    out: Int4Matrix,
    expect: HostInt4,
}

impl<T: QuantSource> Prepared for QuantPrepared<T> {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        quantize(b, &self.src, &self.out)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = self.out.download(ctx)?;
        let e = &self.expect;
        let code_diff = (0..e.n).flat_map(|r| (0..e.k).map(move |c| (r, c))).filter(|&(r, c)| got.code(r, c) != e.code(r, c)).count();
        let scale_diff = got.scales.iter().zip(&e.scales).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        let zero_diff = match (&got.zeros, &e.zeros) {
            (Some(a), Some(b)) => a.iter().zip(b).filter(|(a, b)| a.to_bits() != b.to_bits()).count(),
            _ => 0,
        };
        let mut note = String::new();
        if code_diff + scale_diff + zero_diff > 0 {
            note = format!("{code_diff} codes, {scale_diff} scales, {zero_diff} zeros differ from the CPU quantiser");
        }
        // Guard: padding nibbles of each row must be 0, and the buffers' tails untouched.
        let raw = ctx.read(self.out.codes())?;
        let rw = self.out.row_words();
        let words = crate::kernels::interleave::deinterleave(&raw[..e.n * rw], rw);
        let pad_bad = (0..e.n).flat_map(|r| (e.k..rw * 8).map(move |c| (r, c))).filter(|&(r, c)| (words[r * rw + c / 8] >> (4 * (c % 8))) & 15 != 0).count();
        let guard = guard_damage(&raw, e.n * rw, POISON_U32) + pad_bad;
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: guard, note })
    }
}

impl Case for QuantCase {
    fn name(&self) -> String {
        format!(
            "n={} k={} g={} {} from {}",
            self.n,
            self.k,
            self.g,
            match self.mode {
                Int4Mode::Signed => "signed",
                Int4Mode::Asymmetric => "asym",
            },
            if self.f16 { "f16" } else { "f32" }
        )
    }
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64 {
        let ng = self.k.div_ceil(self.g);
        (self.n * self.k * if self.f16 { 2 } else { 4 } * 2 + self.n * self.k / 2 + self.n * ng * 8) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, k) = (self.n, self.k);
        // Gaussian values, plus exact ties (x = (j + 1/2) * s) sprinkled in to exercise rounding.
        let mut vals = rng.normal_vec(n * k);
        for i in (0..n * k).step_by(5) {
            vals[i] = (rng.u32(15) as f32 - 7.0) * 0.5;
        }
        let mut out = Int4Matrix::alloc(ctx, n, k, self.g, self.mode)?;
        out.codes = guarded_u32(ctx, n * out.row_words())?;
        if self.f16 {
            let h: Vec<half::f16> = vals.iter().map(|&v| half::f16::from_f32(v)).collect();
            let as_f32: Vec<f32> = h.iter().map(|v| v.to_f32()).collect();
            let expect = reference::quant::quantize(&as_f32, n, k, self.g, self.mode);
            Ok(Box::new(QuantPrepared { src: ctx.upload(&h)?, out, expect }))
        } else {
            let expect = reference::quant::quantize(&vals, n, k, self.g, self.mode);
            Ok(Box::new(QuantPrepared { src: ctx.upload(&vals)?, out, expect }))
        }
    }
}
