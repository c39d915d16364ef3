//! Test and bench cases of the elementwise kernels (see [`crate::suite`]), each against its f64
//! CPU reference with poisoned guard regions after every output.

use super::*;
use crate::context::Context;
use crate::suite::{compare, describe_all, guarded_f32, Case, Check, Kernel, PlanCase, Prepared, Rng};

/// Lengths that run each mode: scalar (odd) and whole vec4s.
const MODE_LENS: [usize; 2] = [255, 256];

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![
        &NormKernel(false),
        &NormKernel(true),
        &QkNormKernel,
        &BinKernel(BinaryOp::SiluGate),
        &BinKernel(BinaryOp::GeluTanhGate),
        &BinKernel(BinaryOp::Add),
        &UnaryKernel(UnaryOp::Softcap),
        &UnaryKernel(UnaryOp::Scale),
    ]
}

/// RMSNorm; `.0`: added to the output ([`rmsnorm_add`]).
struct NormKernel(bool);

impl Kernel for NormKernel {
    fn info(&self) -> &'static KernelInfo {
        if self.0 {
            &RMSNORM_ADD
        } else {
            &RMSNORM
        }
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(1, 1), (1, 7), (3, 33), (5, 255), (2, 256), (1, 257), (7, 1000), (1, 4096), (2, 5120), (3, 11008), (1, 12347)];
        shapes.into_iter().map(|(rows, n)| Box::new(NormCase { rows, n, add: self.0 }) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [(1, 4096), (32, 4096), (512, 4096)].into_iter().map(|(rows, n)| Box::new(NormCase { rows, n, add: self.0 }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Variant::Portable, Variant::Subgroup].map(|variant| ElementwisePipeline::RmsNorm { variant, add: self.0 }))
    }
}

struct NormCase {
    rows: usize,
    n: usize,
    add: bool,
}

struct NormPrepared {
    x: Vec<GpuBuffer<f32>>,
    w: GpuBuffer<f32>,
    y: Vec<GpuBuffer<f32>>,
    rows: usize,
    n: usize,
    eps: f32,
    add: bool,
    reference: (Vec<f64>, Vec<f64>),
}

impl Case for NormCase {
    fn name(&self) -> String {
        format!("rows={} n={}", self.rows, self.n)
    }
    fn bytes(&self) -> u64 {
        (4 * (2 * self.rows * self.n + self.n)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let total = self.rows * self.n;
        // Rows of very different scales: the normalisation must undo them.
        let mut x = rng.normal_vec(total);
        for r in 0..self.rows {
            let s = 10f32.powf(rng.uniform(-2.0, 2.0));
            x[r * self.n..(r + 1) * self.n].iter_mut().for_each(|v| *v *= s);
        }
        let w = rng.uniform_vec(self.n, -2.0, 2.0);
        let eps = rng.uniform(1e-6, 1e-5);
        let mut reference = reference_rmsnorm(&x, &w, self.rows, eps);
        let y0 = if self.add {
            // The residual the rows are added to (guards after it, poisoned).
            let mut y0 = rng.uniform_vec(total, -4.0, 4.0);
            for (i, &v) in y0.iter().enumerate() {
                reference.0[i] += v as f64;
                reference.1[i] += (v as f64).abs();
            }
            y0.extend(std::iter::repeat_n(f32::from_bits(crate::suite::POISON_F32), crate::suite::GUARD));
            ctx.upload(&y0)?
        } else {
            guarded_f32(ctx, total)?
        };
        let mut xs = vec![ctx.upload(&x)?];
        let mut ys = vec![y0];
        for _ in 1..copies {
            xs.push(ctx.upload(&rng.normal_vec(total))?);
            ys.push(ctx.alloc(total)?);
        }
        Ok(Box::new(NormPrepared { x: xs, w: ctx.upload(&w)?, y: ys, rows: self.rows, n: self.n, eps, add: self.add, reference }))
    }
}

impl Prepared for NormPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let c = copy % self.x.len();
        norm_any(b, self.add, &self.x[c], &self.w, &self.y[c], self.rows, self.n, self.eps)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.y[0])?, &self.reference.0, &self.reference.1, 1e-5))
    }
}

/// [`rmsnorm_qk`].
struct QkNormKernel;

impl Kernel for QkNormKernel {
    fn info(&self) -> &'static KernelInfo {
        &RMSNORM_QK
    }
    /// (q rows, k rows, n): odd lengths, fewer and more k rows than q rows, a decode step's
    /// heads (Qwen3-8B: 32 / 8 of 128; Gemma-3-4B: 8 / 4 of 256), prefill rows (3 tokens).
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(1, 1, 1), (1, 2, 7), (4, 2, 33), (2, 3, 255), (32, 8, 128), (8, 4, 256), (3 * 4, 3 * 2, 64), (5, 1, 257), (3 * 6, 3 * 2, 96)];
        shapes.into_iter().map(|(q_rows, k_rows, n)| Box::new(QkNormCase { q_rows, k_rows, n }) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [(32, 8, 128), (8, 4, 256), (512 * 32, 512 * 8, 128)].into_iter().map(|(q_rows, k_rows, n)| Box::new(QkNormCase { q_rows, k_rows, n }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all([Variant::Portable, Variant::Subgroup].map(|variant| ElementwisePipeline::RmsNormQk { variant }))
    }
}

struct QkNormCase {
    q_rows: usize,
    k_rows: usize,
    n: usize,
}

/// One copy of a [`QkNormCase`]'s buffers: q input and output, k input and output.
struct QkBuffers([GpuBuffer<f32>; 4]);

struct QkNormPrepared {
    bufs: Vec<QkBuffers>,
    w: [GpuBuffer<f32>; 2],
    rows: [usize; 2],
    n: usize,
    eps: f32,
    /// References of the q and the k rows.
    reference: [(Vec<f64>, Vec<f64>); 2],
}

/// `rows` rows of `n` normal values, each row scaled by its own 10^[-2, 2).
fn scaled_rows(rng: &mut Rng, rows: usize, n: usize) -> Vec<f32> {
    let mut x = rng.normal_vec(rows * n);
    for row in x.chunks_mut(n) {
        let s = 10f32.powf(rng.uniform(-2.0, 2.0));
        row.iter_mut().for_each(|v| *v *= s);
    }
    x
}

impl Case for QkNormCase {
    fn name(&self) -> String {
        format!("q rows={} k rows={} n={}", self.q_rows, self.k_rows, self.n)
    }
    fn bytes(&self) -> u64 {
        (4 * (2 * (self.q_rows + self.k_rows) * self.n + 2 * self.n)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (n, rows) = (self.n, [self.q_rows, self.k_rows]);
        let x = rows.map(|r| scaled_rows(rng, r, n));
        let w = [rng.uniform_vec(n, -2.0, 2.0), rng.uniform_vec(n, -2.0, 2.0)];
        let eps = rng.uniform(1e-6, 1e-5);
        let reference = [reference_rmsnorm(&x[0], &w[0], rows[0], eps), reference_rmsnorm(&x[1], &w[1], rows[1], eps)];
        let mut bufs = vec![QkBuffers([ctx.upload(&x[0])?, guarded_f32(ctx, rows[0] * n)?, ctx.upload(&x[1])?, guarded_f32(ctx, rows[1] * n)?])];
        for _ in 1..copies {
            let fresh = rows.map(|r| scaled_rows(rng, r, n));
            bufs.push(QkBuffers([ctx.upload(&fresh[0])?, ctx.alloc(rows[0] * n)?, ctx.upload(&fresh[1])?, ctx.alloc(rows[1] * n)?]));
        }
        Ok(Box::new(QkNormPrepared { bufs, w: [ctx.upload(&w[0])?, ctx.upload(&w[1])?], rows, n, eps, reference }))
    }
}

impl Prepared for QkNormPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let [xq, yq, xk, yk] = &self.bufs[copy % self.bufs.len()].0;
        let q = NormRows { x: xq, w: &self.w[0], y: yq, rows: self.rows[0] };
        let k = NormRows { x: xk, w: &self.w[1], y: yk, rows: self.rows[1] };
        rmsnorm_qk(b, q, k, self.n, self.eps)
    }
    /// Both outputs within the RMSNorm's tolerance, their guards intact.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let [_, yq, _, yk] = &self.bufs[0].0;
        let q = compare(&ctx.read(yq)?, &self.reference[0].0, &self.reference[0].1, 1e-5);
        let k = compare(&ctx.read(yk)?, &self.reference[1].0, &self.reference[1].1, 1e-5);
        Ok(q.and(k))
    }
}

struct BinKernel(BinaryOp);

impl Kernel for BinKernel {
    fn info(&self) -> &'static KernelInfo {
        match self.0 {
            BinaryOp::Add => &ADD,
            BinaryOp::SiluGate => &SILU_GATE,
            BinaryOp::GeluTanhGate => &GELU_GATE,
        }
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let lens = [1usize, 3, 255, 256, 257, 1000, 4096, 11008, 65537, 70001];
        lens.iter()
            .enumerate()
            .map(|(i, &len)| Box::new(BinCase { op: self.0, len, inplace: i % 2 == 1 }) as Box<dyn Case>)
            .chain([Box::new(BinCase { op: self.0, len: 4095, inplace: false }) as Box<dyn Case>])
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        let decode = match self.0 {
            BinaryOp::Add => 4096,
            BinaryOp::SiluGate | BinaryOp::GeluTanhGate => 14336,
        };
        [(decode, true), (1 << 24, false), (1 << 24, true)].into_iter().map(|(len, inplace)| Box::new(BinCase { op: self.0, len, inplace }) as Box<dyn Case>).collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(self.mode_cases().map(|c| ElementwisePipeline::Binary { op: self.0, inplace: c.inplace, vec: c.len % 4 == 0 }))
    }
    fn plan_cases(&self) -> Vec<PlanCase> {
        self.mode_cases().map(|c| PlanCase::new(None, crate::Tuning::default(), Box::new(c))).collect()
    }
}

impl BinKernel {
    /// One case per pipeline (separate output or in place, scalar or vec4).
    fn mode_cases(&self) -> impl Iterator<Item = BinCase> + '_ {
        [false, true].into_iter().flat_map(move |inplace| MODE_LENS.map(|len| BinCase { op: self.0, len, inplace }))
    }
}

struct BinCase {
    op: BinaryOp,
    len: usize,
    inplace: bool,
}

struct BinPrepared {
    case: (BinaryOp, usize, bool),
    a: Vec<GpuBuffer<f32>>,
    b: Vec<GpuBuffer<f32>>,
    y: Vec<GpuBuffer<f32>>,
    reference: (Vec<f64>, Vec<f64>),
}

impl Case for BinCase {
    fn name(&self) -> String {
        format!("n={}{}", self.len, if self.inplace { " in-place" } else { "" })
    }
    fn bytes(&self) -> u64 {
        12 * self.len as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let input = |rng: &mut Rng| rng.normal_vec(self.len).into_iter().map(|v| 3.0 * v).collect::<Vec<f32>>();
        let (a, b) = (input(rng), input(rng));
        let reference = match self.op {
            BinaryOp::Add => reference_add(&a, &b),
            BinaryOp::SiluGate => reference_gate(Activation::Silu, &a, &b),
            BinaryOp::GeluTanhGate => reference_gate(Activation::GeluTanh, &a, &b),
        };
        // In place, `a` is the output: it gets the guard region.
        let mut a_host = a.clone();
        if self.inplace {
            a_host.resize(self.len + crate::suite::GUARD, f32::from_bits(crate::suite::POISON_F32));
        }
        let (mut av, mut bv, mut yv) = (vec![ctx.upload(&a_host)?], vec![ctx.upload(&b)?], Vec::new());
        if !self.inplace {
            yv.push(guarded_f32(ctx, self.len)?);
        }
        for _ in 1..copies {
            av.push(ctx.upload(&input(rng))?);
            bv.push(ctx.upload(&input(rng))?);
            if !self.inplace {
                yv.push(ctx.alloc(self.len)?);
            }
        }
        Ok(Box::new(BinPrepared { case: (self.op, self.len, self.inplace), a: av, b: bv, y: yv, reference }))
    }
}

impl Prepared for BinPrepared {
    fn encode(&self, bt: &mut Batch, copy: usize) -> Result<()> {
        let (op, len, inplace) = self.case;
        let c = copy % self.a.len();
        let (a, b) = (&self.a[c], &self.b[c]);
        let act = match op {
            BinaryOp::Add => None,
            BinaryOp::SiluGate => Some(Activation::Silu),
            BinaryOp::GeluTanhGate => Some(Activation::GeluTanh),
        };
        match (act, inplace) {
            (None, false) => add(bt, a, b, &self.y[c], len),
            (None, true) => add_inplace(bt, a, b, len),
            (Some(act), false) => gate(bt, act, a, b, &self.y[c], len),
            (Some(act), true) => gate_inplace(bt, act, a, b, len),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let (op, _, inplace) = self.case;
        let out = ctx.read(if inplace { &self.a[0] } else { &self.y[0] })?;
        // Add rounds once; the gates' exp is within a few ulp on every backend we know.
        let tol = if op == BinaryOp::Add { 1e-6 } else { 2e-5 };
        Ok(compare(&out, &self.reference.0, &self.reference.1, tol))
    }
}

struct UnaryKernel(UnaryOp);

impl Kernel for UnaryKernel {
    fn info(&self) -> &'static KernelInfo {
        match self.0 {
            UnaryOp::Softcap => &SOFTCAP,
            UnaryOp::Scale => &SCALE,
        }
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        // Gemma 2's caps (30 on the final logits, 50 on attention scores) and a small one;
        // scales like Gemma's sqrt(hidden).
        [(1usize, 30.0f32), (3, 50.0), (257, 30.0), (1000, 0.5), (4095, 30.0), (65537, 30.0)]
            .into_iter()
            .map(|(len, cap)| Box::new(UnaryCase { op: self.0, len, cap }) as Box<dyn Case>)
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(UnaryCase { op: self.0, len: 256_000, cap: 30.0 })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(MODE_LENS.map(|len| ElementwisePipeline::Unary { op: self.0, vec: len % 4 == 0 }))
    }
    /// One case per pipeline (scalar, vec4).
    fn plan_cases(&self) -> Vec<PlanCase> {
        MODE_LENS.iter().map(|&len| PlanCase::new(None, crate::Tuning::default(), Box::new(UnaryCase { op: self.0, len, cap: 30.0 }))).collect()
    }
}

struct UnaryCase {
    op: UnaryOp,
    len: usize,
    cap: f32,
}

struct UnaryPrepared {
    op: UnaryOp,
    x: Vec<GpuBuffer<f32>>,
    len: usize,
    cap: f32,
    reference: (Vec<f64>, Vec<f64>),
}

impl Case for UnaryCase {
    fn name(&self) -> String {
        format!("n={} {}={}", self.len, if self.op == UnaryOp::Scale { "s" } else { "cap" }, self.cap)
    }
    fn bytes(&self) -> u64 {
        8 * self.len as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        // Logits from well inside the cap to far past it (tanh saturated).
        let input = |rng: &mut Rng| rng.normal_vec(self.len).into_iter().map(|v| 2.0 * self.cap * v).collect::<Vec<f32>>();
        let x = input(rng);
        let reference = match self.op {
            UnaryOp::Softcap => reference_softcap(&x, self.cap),
            UnaryOp::Scale => x.iter().map(|&v| (v as f64 * self.cap as f64, (v as f64 * self.cap as f64).abs())).unzip(),
        };
        let mut host = x;
        host.resize(self.len + crate::suite::GUARD, f32::from_bits(crate::suite::POISON_F32));
        let mut xs = vec![ctx.upload(&host)?];
        for _ in 1..copies {
            xs.push(ctx.upload(&input(rng))?);
        }
        Ok(Box::new(UnaryPrepared { op: self.op, x: xs, len: self.len, cap: self.cap, reference }))
    }
}

impl Prepared for UnaryPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let x = &self.x[copy % self.x.len()];
        match self.op {
            UnaryOp::Softcap => softcap_inplace(b, x, self.len, self.cap),
            UnaryOp::Scale => scale_inplace(b, x, self.len, self.cap),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.x[0])?, &self.reference.0, &self.reference.1, 2e-5))
    }
}
