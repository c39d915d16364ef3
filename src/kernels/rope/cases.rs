//! Test and bench cases of the RoPE family (see [`crate::suite`]).

use super::*;
use crate::reference;
use crate::suite::{check_elems, compare, describe_all, upload_guarded, Case, Check, Kernel, PlanCase, Prepared, Rng, GUARD, POISON_F32};
use crate::tuning::Tuning;

pub use super::samples::{longrope_sample, sample_configs};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&TableKernel, &ApplyKernel]
}

struct TableKernel;
struct TableCase {
    cfg: RopeConfig,
    rows: usize,
}

impl Kernel for TableKernel {
    fn info(&self) -> &'static KernelInfo {
        &TABLE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for (k, &d) in [128usize, 80, 6].iter().enumerate() {
            for (i, cfg) in sample_configs(d).into_iter().enumerate() {
                let rows = [1usize, 257, 4099][(i + k) % 3];
                v.push(Box::new(TableCase { cfg, rows }));
            }
        }
        // Large positions: the exact reduction must hold far from 0.
        v.push(Box::new(TableCase { cfg: RopeConfig::new(8, 10000.0, RopeScaling::Default), rows: 300_000 }));
        v.push(Box::new(TableCase { cfg: RopeConfig::new(2, 10000.0, RopeScaling::Default), rows: 1 }));
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(TableCase { cfg: RopeConfig::new(128, 500000.0, RopeScaling::yarn(4.0, 32768)), rows: 131072 })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([RopePipeline::Table])
    }
}

struct TablePrepared {
    table: RopeTable,
    reference: Vec<f64>,
    mag: Vec<f64>,
}

impl Prepared for TablePrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        build_table(b, &self.table)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got: Vec<f32> = ctx.read(self.table.buffer())?.into_iter().flatten().collect();
        Ok(compare(&got, &self.reference, &self.mag, 2e-6))
    }
}

impl Case for TableCase {
    fn name(&self) -> String {
        format!("{} d={} rows={}", self.cfg.scaling.name(), self.cfg.head_dim, self.rows)
    }
    fn bytes(&self) -> u64 {
        (self.rows * self.cfg.half() * 8) as u64
    }
    fn setup(&self, ctx: &Context, _rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let mut table = RopeTable::new(ctx, self.cfg.clone(), self.rows)?;
        let n = self.rows * self.cfg.half();
        let poison = f32::from_bits(POISON_F32);
        table.set_buffer(ctx.upload(&vec![[poison; 2]; n + GUARD.div_ceil(2)])?)?;
        let reference: Vec<f64> = reference::rope::table(&self.cfg, self.rows).into_iter().flat_map(|(c, s)| [c, s]).collect();
        let af = self.cfg.attention_factor();
        Ok(Box::new(TablePrepared { table, mag: vec![af; reference.len()], reference }))
    }
}

struct ApplyKernel;
struct ApplyCase {
    cfg: RopeConfig,
    tokens: usize,
    heads: usize,
    layout: PairLayout,
    f16: bool,
    /// None: contiguous from this start; Some: random positions from a buffer.
    start: Option<u32>,
}

impl Kernel for ApplyKernel {
    fn info(&self) -> &'static KernelInfo {
        &APPLY
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        let shapes = [(128usize, 7usize, 8usize), (64, 1, 3), (80, 33, 4), (6, 5, 3), (2, 3, 1), (256, 4, 2), (10, 9, 2)];
        let mut n = 0;
        for &(d, tokens, heads) in &shapes {
            for layout in [PairLayout::Interleaved, PairLayout::HalfSplit] {
                for f16 in [false, true] {
                    // NTK-style modes need d > 2 (d / (d - 2) in the base).
                    let cfgs: Vec<RopeConfig> = sample_configs(d).into_iter().filter(|c| c.validate().is_ok()).collect();
                    let cfg = cfgs[n % cfgs.len()].clone();
                    let start = if n % 3 == 2 { None } else { Some([0u32, 1000, 17][n % 3]) };
                    v.push(Box::new(ApplyCase { cfg, tokens, heads, layout, f16, start }));
                    n += 1;
                }
            }
        }
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        let cfg = RopeConfig::new(128, 500000.0, RopeScaling::yarn(4.0, 32768));
        vec![
            Box::new(ApplyCase { cfg: cfg.clone(), tokens: 2048, heads: 32, layout: PairLayout::HalfSplit, f16: false, start: Some(0) }),
            Box::new(ApplyCase { cfg: cfg.clone(), tokens: 2048, heads: 32, layout: PairLayout::HalfSplit, f16: true, start: Some(0) }),
        ]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(APPLY_PLANS.iter().map(|&(f16, layout, d, vec)| RopePipeline::Apply { f16, layout, mode: ApplyMode::choose(f16, layout, d, vec) }))
    }
    /// Each plan of [`APPLY_PLANS`] on 3 tokens of 2 heads, under its vector-mode switch.
    fn plan_cases(&self) -> Vec<PlanCase> {
        APPLY_PLANS
            .iter()
            .map(|&(f16, layout, d, vec)| {
                let case = ApplyCase { cfg: RopeConfig::new(d, 10000.0, RopeScaling::Default), tokens: 3, heads: 2, layout, f16, start: Some(5) };
                PlanCase::new(None, Tuning { rope_vec: vec, ..Tuning::default() }, Box::new(case))
            })
            .collect()
    }
}

/// The apply kernel's plans, one per pipeline: (f16, layout, head_dim, vector mode allowed
/// ([`crate::Tuning::rope_vec`])), each picking its [`ApplyMode`]: per layout and element type
/// the vector and the scalar mode (f16 half-split: two pairs per invocation; it never runs one
/// pair), and one head per invocation (f16 half-split, odd d/2).
const APPLY_PLANS: [(bool, PairLayout, usize, bool); 9] = [
    (false, PairLayout::Interleaved, 64, true),
    (false, PairLayout::Interleaved, 64, false),
    (true, PairLayout::Interleaved, 64, true),
    (true, PairLayout::Interleaved, 64, false),
    (false, PairLayout::HalfSplit, 64, true),
    (false, PairLayout::HalfSplit, 64, false),
    (true, PairLayout::HalfSplit, 64, true),
    (true, PairLayout::HalfSplit, 64, false),
    (true, PairLayout::HalfSplit, 6, false),
];

struct ApplyPrepared<T: Elem> {
    x: GpuBuffer<T>,
    /// More copies of the input for timing (rotated like a bench's weights, so a tensor that
    /// fits the last-level cache is not timed from it); never checked.
    extra: Vec<GpuBuffer<T>>,
    table: RopeTable,
    positions: Option<(GpuBuffer<u32>, u32)>,
    start: u32,
    tokens: usize,
    heads: usize,
    layout: PairLayout,
    cfg: RopeConfig,
    /// The input as stored, and the token positions, for the reference.
    input: Vec<f64>,
    pos_host: Vec<usize>,
    /// The rotation is in place: encodes so far (a bench encodes many times before checking).
    encodes: std::cell::Cell<usize>,
}

impl<T: Elem> Prepared for ApplyPrepared<T> {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let i = copy % (1 + self.extra.len());
        let x = if i == 0 {
            self.encodes.set(self.encodes.get() + 1);
            &self.x
        } else {
            &self.extra[i - 1]
        };
        let pos = match &self.positions {
            Some((buf, max)) => Positions::Buffer { buf, max: *max },
            None => Positions::Start(self.start),
        };
        apply(b, x, self.tokens, self.heads, self.layout, &self.table, pos)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        // n in-place applications = one rotation by n angles; f16 rounds after each.
        let n = self.encodes.get().max(1);
        let d = self.cfg.head_dim;
        let mut x = self.input.clone();
        let mut mag = vec![0.0; x.len()];
        for k in 0..n {
            let (r, m) = reference::rope::rotate(&x, self.heads, d, self.layout, &self.cfg, |t| self.pos_host[t]);
            x = if T::F16 && k + 1 < n { r.iter().map(|&v| T::from_f32(v as f32).to_f32() as f64).collect() } else { r };
            // Each pass's rounding is relative to that pass's operands; the magnitudes only grow
            // with the attention factor, so scale the first pass's by af^(n-1) per pass.
            let af = self.cfg.attention_factor().max(1.0).powi(k as i32);
            for (a, b) in mag.iter_mut().zip(m) {
                *a += b * af;
            }
        }
        check_elems(&ctx.read(&self.x)?, &x, &mag, if T::F16 { 1e-3 } else { 3e-6 })
    }
}

impl ApplyCase {
    fn prepare<T: Elem>(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let d = self.cfg.head_dim;
        let n = self.tokens * self.heads * d;
        let vals = rng.normal_vec(n);
        let (x, stored) = upload_guarded::<T>(ctx, &vals)?;
        let extra = (1..copies.max(1)).map(|_| upload_guarded::<T>(ctx, &vals).map(|(b, _)| b)).collect::<Result<Vec<_>>>()?;
        let rows = 2048;
        let table = RopeTable::build(ctx, self.cfg.clone(), rows)?;
        let (positions, pos_host): (Option<(GpuBuffer<u32>, u32)>, Vec<usize>) = match self.start {
            Some(s) => (None, (0..self.tokens).map(|t| s as usize + t).collect()),
            None => {
                let p: Vec<u32> = (0..self.tokens).map(|_| rng.u32(rows as u32)).collect();
                let max = *p.iter().max().unwrap_or(&0);
                (Some((ctx.upload(&p)?, max)), p.iter().map(|&v| v as usize).collect())
            }
        };
        Ok(Box::new(ApplyPrepared::<T> {
            x,
            extra,
            table,
            positions,
            start: self.start.unwrap_or(0),
            tokens: self.tokens,
            heads: self.heads,
            layout: self.layout,
            cfg: self.cfg.clone(),
            input: stored,
            pos_host,
            encodes: std::cell::Cell::new(0),
        }))
    }
}

impl Case for ApplyCase {
    fn name(&self) -> String {
        let pos = match self.start {
            Some(s) => format!("pos={s}.."),
            None => "pos=buffer".into(),
        };
        format!("{} {} {} d={} t={} h={} {pos}", self.cfg.scaling.name(), self.layout.name(), if self.f16 { "f16" } else { "f32" }, self.cfg.head_dim, self.tokens, self.heads)
    }
    fn bytes(&self) -> u64 {
        let elem = if self.f16 { 2 } else { 4 };
        (2 * self.tokens * self.heads * self.cfg.head_dim * elem + self.tokens * self.cfg.half() * 8) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        if self.f16 {
            self.prepare::<half::f16>(ctx, rng, copies)
        } else {
            self.prepare::<f32>(ctx, rng, copies)
        }
    }
}
