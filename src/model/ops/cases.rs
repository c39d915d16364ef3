//! Test and bench cases of the glue kernels (see [`crate::suite`]): fresh random inputs, poisoned
//! guard regions after every output (and, in the KV caches, around the rows written), and each
//! output against its CPU reference (bit for bit where the kernel is exact).

use super::*;
use crate::context::Context;
use crate::kernels::elementwise::reference_gate;
use crate::kernels::rope::{RopeConfig, RopeScaling};
use crate::model::sample::{self, Sampler, SamplerConfig};
use crate::suite::{
    bits_check, boxed, compare, describe_all, guard_damage, guarded_f32, guarded_u32, Case, Check, Kernel, KernelParts, Prepared, Rng, GUARD, POISON_F16, POISON_F32, POISON_U32,
};

/// `copies` buffers holding `data` (the bench rotates them; copy 0 is the one checked).
fn uploads<T: bytemuck::Pod>(ctx: &Context, data: &[T], copies: usize) -> Result<Vec<GpuBuffer<T>>> {
    (0..copies.max(1)).map(|_| ctx.upload(data)).collect()
}

/// `vals` followed by [`GUARD`] elements of f32 poison.
fn with_guard(mut vals: Vec<f32>) -> Vec<f32> {
    vals.extend(std::iter::repeat_n(f32::from_bits(POISON_F32), GUARD));
    vals
}

static KERNELS: [KernelParts; 8] = [
    KernelParts {
        info: &BIAS_ADD,
        pipelines: || describe_all([ModelPipeline::BiasAdd]),
        // (rows, n): odd rows of odd lengths, one element, partial last workgroups (of 64).
        test: || boxed([(3, 7), (5, 131), (1, 1), (7, 1000), (2, 4099)].map(|(rows, n)| BiasCase { rows, n })),
        bench: || boxed([(1, 4096), (512, 4096)].map(|(rows, n)| BiasCase { rows, n })),
    },
    KernelParts {
        info: &KV_STORE,
        pipelines: || describe_all([false, true].map(|neox| ModelPipeline::KvStore { neox })),
        // Both layouts among the first three; odd head counts, positions past 0, head dims 64 and
        // 80 (an odd multiple of 16) and small odd-pair ones.
        test: || {
            use PairLayout::{HalfSplit as H, Interleaved as I};
            let shapes = [(3, 3, 10, 5, 9, I), (3, 3, 80, 2, 7, H), (1, 1, 64, 0, 1, I), (5, 2, 6, 2, 11, H), (1, 1, 64, 0, 1, H), (4, 5, 80, 3, 9, I), (2, 3, 64, 6, 8, H)];
            boxed(shapes.map(|(tokens, kv_heads, d, pos0, capacity, layout)| KvCase { tokens, kv_heads, d, pos0, capacity, layout }))
        },
        // A decode step at a 4096-position cache (Llama-3-8B's 8 KV heads of 128), a prefill chunk.
        bench: || {
            let shapes = [(1, 8, 128, 4095, 4096, PairLayout::Interleaved), (512, 8, 128, 0, 512, PairLayout::HalfSplit)];
            boxed(shapes.map(|(tokens, kv_heads, d, pos0, capacity, layout)| KvCase { tokens, kv_heads, d, pos0, capacity, layout }))
        },
    },
    KernelParts {
        info: &COPY_ROW,
        pipelines: || describe_all([ModelPipeline::CopyRow]),
        // (rows, row, n): a middle row, the last, the only one.
        test: || boxed([(5, 2, 7), (3, 2, 1000), (1, 0, 1), (9, 4, 4099)].map(|(rows, row, n)| CopyRowCase { rows, row, n })),
        bench: || boxed([CopyRowCase { rows: 512, row: 511, n: 4096 }]),
    },
    KernelParts {
        info: &GLU_PAIRS,
        pipelines: || describe_all([false, true].map(|gelu| ModelPipeline::GluPairs { gelu })),
        test: || {
            use Activation::{GeluTanh as G, Silu as S};
            boxed([(37, S), (131, G), (1, S), (4099, G), (4099, S), (65_537, G)].map(|(n, act)| GluCase { n, act }))
        },
        // Llama-3-8B's FFN (14336): a decode step and a prefill chunk.
        bench: || boxed([(14336, Activation::Silu), (14336, Activation::GeluTanh), (512 * 14336, Activation::Silu)].map(|(n, act)| GluCase { n, act })),
    },
    KernelParts {
        info: &SPLIT_QKV,
        pipelines: || describe_all([ModelPipeline::SplitQkv]),
        test: || {
            let (qd, kvd) = (10, 7);
            let n3 = qd + 2 * kvd;
            // (r0, w, bias): all of it; a run from inside q across k into v; runs ending or
            // starting at each boundary; then Qwen2-0.5B's widths.
            let runs = [(0, n3, true), (qd - 3, kvd + 5, false), (qd + kvd, kvd, true), (0, qd + kvd, false), (qd, 2 * kvd, true), (0, qd, false), (qd, kvd, true), (0, n3, false)];
            let mut v: Vec<SplitCase> = runs.into_iter().map(|(r0, w, bias)| SplitCase { m: 3, qd, kvd, r0, w, bias }).collect();
            v.push(SplitCase { m: 2, qd: 896, kvd: 128, r0: 0, w: 1152, bias: true });
            boxed(v)
        },
        // Qwen2-7B (3584 + 2 x 512, with bias): a decode step and a prefill chunk.
        bench: || boxed([1, 512].map(|m| SplitCase { m, qd: 3584, kvd: 512, r0: 0, w: 4608, bias: true })),
    },
    KernelParts {
        info: &ARGMAX,
        pipelines: || describe_all([ModelPipeline::Argmax]),
        test: || {
            use Fill::{AllNan, NegInf, Ties};
            boxed([(1000, 17, Ties), (5, 1, AllNan), (300, 0, NegInf), (1, 0, Ties), (7, 3, Ties), (4099, 5, Ties), (40_003, 2, Ties)].map(|(n, off, fill)| ArgmaxCase {
                n,
                off,
                fill,
            }))
        },
        // Llama 3's vocabulary.
        bench: || boxed([ArgmaxCase { n: 128_256, off: 0, fill: Fill::Ties }]),
    },
    KernelParts {
        info: &TOP_K,
        pipelines: || describe_all([ModelPipeline::TopK]),
        // First three: three levels (with an offset), one level with k = 1, k above n. Then a
        // row of one, one full workgroup (k at the maximum), two levels, three levels with k at
        // the maximum and of a 300001-entry row; the special rows over two levels and one; a
        // plain logits row.
        test: || {
            let mut v: Vec<TopKCase> = [(40_003, 3, 40), (1000, 5, 1), (7, 3, 40), (1, 0, 3), (1024, 0, TOP_K_MAX), (1025, 1, 3), (5000, 2, TOP_K_MAX), (300_001, 7, 40)]
                .into_iter()
                .map(|(n, off, k)| TopKCase { n, off, k, row: Row::Tied })
                .collect();
            for row in [Row::Flat, Row::Ascending, Row::Descending, Row::OneFinite, Row::Nan, Row::Inf, Row::Zeros, Row::Subnormal] {
                v.extend([(3000, 2, 40), (700, 0, TOP_K_MAX), (3, 0, 1)].map(|(n, off, k)| TopKCase { n, off, k, row }));
            }
            v.push(TopKCase { n: 4099, off: 1, k: 40, row: Row::Logits });
            boxed(v)
        },
        // Llama 3's vocabulary: a sampler's usual k and the maximum.
        bench: || boxed([40, TOP_K_MAX].map(|k| TopKCase { n: 128_256, off: 0, k, row: Row::Logits })),
    },
    KernelParts {
        info: &DRAW,
        pipelines: || describe_all([ModelPipeline::Draw]),
        // (n, k, temperature, top_p, row): a sampler's usual settings; every slot filled at the
        // maximum k; fewer filled slots than k; k = 1; a temperature near 0; ties with +-f32::MAX
        // and subnormals; no filled slot; a flat row at a high temperature; a tight top-p; a
        // subnormal temperature.
        test: || {
            let cases = [
                (4099, 40, 0.8, 0.95, Row::Logits),
                (300, TOP_K_MAX, 1.0, 1.0, Row::Logits),
                (50, TOP_K_MAX, 1.5, 0.9, Row::Logits),
                (1000, 1, 0.7, 0.5, Row::Logits),
                (7, 3, 0.01, 1.0, Row::Tied),
                (2000, 40, 1.0, 0.9, Row::Tied),
                (10, 5, 1.0, 1.0, Row::Nan),
                (700, TOP_K_MAX, 100.0, 0.99, Row::Flat),
                (500, 64, 1.0, 0.3, Row::Descending),
                (300, 8, 1e-40, 1.0, Row::Logits),
            ];
            boxed(cases.map(|(n, k, temperature, top_p, row)| DrawCase { n, k, temperature, top_p, row }))
        },
        bench: || boxed([DrawCase { n: 128_256, k: 40, temperature: 0.8, top_p: 0.95, row: Row::Logits }]),
    },
];

/// The glue kernels, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    KERNELS.iter().map(|k| k as &dyn Kernel).collect()
}

/// [`bias_add`] on `rows` rows of `n`.
struct BiasCase {
    rows: usize,
    n: usize,
}

struct BiasPrepared {
    y: Vec<GpuBuffer<f32>>,
    bias: GpuBuffer<f32>,
    rows: usize,
    n: usize,
    want: Vec<f32>,
}

impl Case for BiasCase {
    fn name(&self) -> String {
        format!("rows={} n={}", self.rows, self.n)
    }
    fn bytes(&self) -> u64 {
        (4 * (2 * self.rows * self.n + self.n)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let y = rng.normal_vec(self.rows * self.n);
        let bias = rng.normal_vec(self.n);
        // One f32 add: exact on every backend.
        let want = y.iter().enumerate().map(|(i, &v)| v + bias[i % self.n]).collect();
        Ok(Box::new(BiasPrepared { y: uploads(ctx, &with_guard(y), copies)?, bias: ctx.upload(&bias)?, rows: self.rows, n: self.n, want }))
    }
}

impl Prepared for BiasPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        bias_add(b, &self.y[copy % self.y.len()], &self.bias, self.rows, self.n)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(bits_check(&ctx.read(&self.y[0])?, &self.want))
    }
}

/// [`copy_row`] of row `row` of `rows` rows of `n`.
struct CopyRowCase {
    rows: usize,
    row: usize,
    n: usize,
}

struct CopyRowPrepared {
    src: Vec<GpuBuffer<f32>>,
    dst: GpuBuffer<f32>,
    row: usize,
    n: usize,
    want: Vec<f32>,
}

impl Case for CopyRowCase {
    fn name(&self) -> String {
        format!("rows={} row={} n={}", self.rows, self.row, self.n)
    }
    fn bytes(&self) -> u64 {
        (8 * self.n) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let src = rng.normal_vec(self.rows * self.n);
        let want = src[self.row * self.n..(self.row + 1) * self.n].to_vec();
        Ok(Box::new(CopyRowPrepared { src: uploads(ctx, &src, copies)?, dst: guarded_f32(ctx, self.n)?, row: self.row, n: self.n, want }))
    }
}

impl Prepared for CopyRowPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        copy_row(b, &self.src[copy % self.src.len()], self.row, self.n, &self.dst)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(bits_check(&ctx.read(&self.dst)?, &self.want))
    }
}

/// [`glu_pairs`] of `n` pairs.
struct GluCase {
    n: usize,
    act: Activation,
}

/// The first gates of every GLU case: both signs of gates whose exponential overflows (|g| up to
/// 100: the guarded quotient gives g or 0, never inf / inf), of one whose exp(-|g|) is subnormal
/// (88.5), and of zero.
const GLU_GATES: [f32; 10] = [100.0, -100.0, 88.5, -88.5, 30.0, -30.0, 0.0, -0.0, 1e-3, -1e-3];

struct GluPrepared {
    gu: Vec<GpuBuffer<f32>>,
    out: GpuBuffer<f32>,
    n: usize,
    act: Activation,
    reference: (Vec<f64>, Vec<f64>),
}

impl Case for GluCase {
    fn name(&self) -> String {
        format!("n={} {}", self.n, if self.act == Activation::Silu { "silu" } else { "gelu" })
    }
    fn bytes(&self) -> u64 {
        (12 * self.n) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        // After the fixed gates: a quarter uniform in +-100, the rest normal x 3.
        let gate: Vec<f32> =
            (0..self.n).map(|i| GLU_GATES.get(i).copied().unwrap_or_else(|| if rng.u32(4) == 0 { rng.uniform(-100.0, 100.0) } else { 3.0 * rng.normal() })).collect();
        let up = rng.normal_vec(self.n);
        let gu: Vec<f32> = gate.iter().zip(&up).flat_map(|(&g, &u)| [g, u]).collect();
        let reference = reference_gate(self.act, &gate, &up);
        Ok(Box::new(GluPrepared { gu: uploads(ctx, &gu, copies)?, out: guarded_f32(ctx, self.n)?, n: self.n, act: self.act, reference }))
    }
}

impl Prepared for GluPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        glu_pairs(b, self.act, &self.gu[copy % self.gu.len()], self.n, &self.out)
    }
    /// The elementwise gates' tolerance (their exp is within a few ulp); magnitudes floored at
    /// 1e-30, so a result that underflows to 0 passes and any NaN or inf fails.
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.out)?, &self.reference.0, &self.reference.1, 2e-5))
    }
}

/// [`split_qkv`] of columns `r0..r0 + w` of `m` rows.
struct SplitCase {
    m: usize,
    qd: usize,
    kvd: usize,
    r0: usize,
    w: usize,
    bias: bool,
}

struct SplitPrepared {
    src: Vec<GpuBuffer<f32>>,
    bias: Option<GpuBuffer<f32>>,
    /// q, k, v.
    out: [GpuBuffer<f32>; 3],
    case: (usize, usize, usize, usize, usize),
    want: [Vec<f32>; 3],
}

impl Case for SplitCase {
    fn name(&self) -> String {
        format!("m={} qd={} kvd={} cols={}+{}{}", self.m, self.qd, self.kvd, self.r0, self.w, if self.bias { " bias" } else { "" })
    }
    fn bytes(&self) -> u64 {
        (4 * (2 * self.m * self.w + if self.bias { self.w } else { 0 })) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let (m, qd, kvd) = (self.m, self.qd, self.kvd);
        let src = rng.normal_vec(m * self.w);
        let bias = self.bias.then(|| rng.normal_vec(qd + 2 * kvd));
        // Columns outside the run keep the poison.
        let poison = f32::from_bits(POISON_F32);
        let [mut q, mut k, mut v] = [m * qd, m * kvd, m * kvd].map(|len| vec![poison; len]);
        reference_split_qkv(&src, m, self.r0, self.w, bias.as_deref(), qd, kvd, &mut q, &mut k, &mut v);
        let out = [guarded_f32(ctx, m * qd)?, guarded_f32(ctx, m * kvd)?, guarded_f32(ctx, m * kvd)?];
        let bias = bias.map(|b| ctx.upload(&b)).transpose()?;
        Ok(Box::new(SplitPrepared { src: uploads(ctx, &src, copies)?, bias, out, case: (m, self.r0, self.w, qd, kvd), want: [q, k, v] }))
    }
}

impl Prepared for SplitPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let (m, r0, w, qd, kvd) = self.case;
        let [q, k, v] = &self.out;
        split_qkv(b, &self.src[copy % self.src.len()], m, r0, w, self.bias.as_ref(), &QkvOut { q, k, v, qd, kvd })
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let mut c = bits_check(&ctx.read(&self.out[0])?, &self.want[0]);
        for i in 1..3 {
            c = c.and(bits_check(&ctx.read(&self.out[i])?, &self.want[i]));
        }
        Ok(c)
    }
}

/// [`kv_store`] of `tokens` tokens at `pos0..` into caches of `capacity` rows.
struct KvCase {
    tokens: usize,
    kv_heads: usize,
    d: usize,
    pos0: usize,
    capacity: usize,
    layout: PairLayout,
}

struct KvPrepared {
    /// (k_new, v_new) per copy.
    new: Vec<(GpuBuffer<f32>, GpuBuffer<f32>)>,
    table: RopeTable,
    caches: [GpuBuffer<f16>; 2],
    case: (usize, usize, usize, usize, PairLayout),
    /// The rotated keys (f64) and the values.
    want: [Vec<f64>; 2],
}

impl Case for KvCase {
    fn name(&self) -> String {
        format!("tokens={} kv_heads={} d={} pos0={} capacity={} {:?}", self.tokens, self.kv_heads, self.d, self.pos0, self.capacity, self.layout)
    }
    fn bytes(&self) -> u64 {
        // f32 keys and values in, f16 out, one table row per token.
        (self.tokens * (self.kv_heads * self.d * 12 + 4 * self.d)) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let cfg = RopeConfig::new(self.d, 10_000.0, RopeScaling::Linear { factor: 2.0 });
        let table = RopeTable::build(ctx, cfg.clone(), self.capacity)?;
        let len = self.tokens * self.kv_heads * self.d;
        let (k, v) = (rng.uniform_vec(len, -2.0, 2.0), rng.uniform_vec(len, -2.0, 2.0));
        let want = [reference_kv_store(&k, self.tokens, self.kv_heads, self.d, self.pos0, self.layout, &cfg.inv_freq()), v.iter().map(|&x| x as f64).collect()];
        let new = (0..copies.max(1)).map(|_| Ok((ctx.upload(&k)?, ctx.upload(&v)?))).collect::<Result<_>>()?;
        let cache = vec![f16::from_bits(POISON_F16); self.capacity * self.kv_heads * self.d + GUARD];
        let caches = [ctx.upload(&cache)?, ctx.upload(&cache)?];
        Ok(Box::new(KvPrepared { new, table, caches, case: (self.tokens, self.kv_heads, self.pos0, self.capacity, self.layout), want }))
    }
}

impl Prepared for KvPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let (tokens, kv_heads, pos0, capacity, layout) = self.case;
        let (k_new, v_new) = &self.new[copy % self.new.len()];
        let [k_cache, v_cache] = &self.caches;
        kv_store(b, &KvStore { k_new, v_new, tokens, kv_heads, pos0, layout, table: &self.table, k_cache, v_cache, capacity })
    }
    /// Rows `pos0..pos0 + tokens` within the f16 rounding bound, `|got - want| <= (|want| + f) /
    /// 1024` (half an f16 ulp is 2^-11 of the value; `f` = 1e-2 for keys covers the f32 table's
    /// ~1e-6, 1e-4 for values the subnormal range); every other row and the guard untouched.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let (tokens, kv_heads, pos0, _, _) = self.case;
        let row = kv_heads * self.table.head_dim();
        let written = pos0 * row..(pos0 + tokens) * row;
        let mut c = Check { err: 0.0, tol: 1.0 / 1024.0, nonfinite: 0, guard_damage: 0, note: String::new() };
        for (cache, (want, floor)) in self.caches.iter().zip(self.want.iter().zip([1e-2, 1e-4])) {
            for (i, g) in ctx.read(cache)?.into_iter().enumerate() {
                if !written.contains(&i) {
                    c.guard_damage += (g.to_bits() != POISON_F16) as usize;
                } else if !g.is_finite() {
                    c.nonfinite += 1;
                } else {
                    let w = want[i - written.start];
                    c.err = c.err.max((g.to_f64() - w).abs() / (w.abs() + floor));
                }
            }
        }
        Ok(c)
    }
}

/// How an [`ArgmaxCase`] fills its row.
#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Integers in -20..20 (many equal maxima), a tenth NaN, a twentieth -inf.
    Ties,
    /// All NaN: no candidate.
    AllNan,
    /// -inf, a tenth NaN (the first included): the first -inf wins.
    NegInf,
}

/// [`argmax`] of a row of `n` at offset `off` in a buffer whose other elements are larger.
struct ArgmaxCase {
    n: usize,
    off: usize,
    fill: Fill,
}

struct ArgmaxPrepared {
    src: Vec<GpuBuffer<f32>>,
    tok: GpuBuffer<u32>,
    off: usize,
    n: usize,
    want: u32,
}

/// `len` elements outside a row: +inf and 1e30 alternating (a read outside the row picks one).
fn outside(len: usize) -> impl Iterator<Item = f32> {
    (0..len).map(|i| if i % 2 == 0 { 1e30 } else { f32::INFINITY })
}

/// A buffer with `row` at `off`, [`outside`] values around it (7 after it).
fn placed(row: &[f32], off: usize) -> Vec<f32> {
    outside(off).chain(row.iter().copied()).chain(outside(7)).collect()
}

impl Case for ArgmaxCase {
    fn name(&self) -> String {
        format!("n={} off={} {:?}", self.n, self.off, self.fill)
    }
    fn bytes(&self) -> u64 {
        (4 * self.n + 4) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let row: Vec<f32> = (0..self.n)
            .map(|i| match (self.fill, rng.u32(20)) {
                (Fill::AllNan, _) | (Fill::Ties | Fill::NegInf, 0 | 1) => f32::NAN,
                (Fill::NegInf, _) if i == 0 => f32::NAN,
                (Fill::NegInf, _) | (Fill::Ties, 2) => f32::NEG_INFINITY,
                (Fill::Ties, _) => rng.u32(40) as f32 - 20.0,
            })
            .collect();
        let want = sample::argmax(&row).unwrap_or(u32::MAX);
        Ok(Box::new(ArgmaxPrepared { src: uploads(ctx, &placed(&row, self.off), copies)?, tok: guarded_u32(ctx, 1)?, off: self.off, n: self.n, want }))
    }
}

impl Prepared for ArgmaxPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        argmax(b, &self.src[copy % self.src.len()], self.off, self.n, &self.tok)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = ctx.read(&self.tok)?;
        let note = if got[0] == self.want { String::new() } else { format!("token {}, want {}", got[0], self.want) };
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: guard_damage(&got, 1, POISON_U32), note })
    }
}

/// The logits row of a [`TopKCase`].
#[derive(Clone, Copy, Debug)]
enum Row {
    /// Few distinct values (many ties), signed zeros, subnormals, +-f32::MAX, NaN and +-inf.
    Tied,
    /// Normal x 3 (a model's logits).
    Logits,
    /// One value everywhere: the ids 0..k.
    Flat,
    Ascending,
    Descending,
    /// NaN but one finite logit.
    OneFinite,
    /// All NaN: no candidates.
    Nan,
    /// +inf and -inf alternating: no candidates.
    Inf,
    /// -0 and +0: equal, the lower id first.
    Zeros,
    /// The smallest subnormals of both signs and zeros: ranked as their values.
    Subnormal,
}

impl Row {
    fn values(self, rng: &mut Rng, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| match self {
                Row::Tied => match rng.u32(40) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    4 => 0.0,
                    5 => f32::from_bits(1 + rng.u32(3)),
                    6 => f32::from_bits(0x8000_0001 + rng.u32(3)),
                    7 => f32::MAX,
                    8 => f32::MIN,
                    _ => (rng.u32(12) as f32 - 6.0) * 0.5,
                },
                Row::Logits => 3.0 * rng.normal(),
                Row::Flat => 0.25,
                Row::Ascending => i as f32,
                Row::Descending => -(i as f32),
                Row::OneFinite => [f32::NAN, -3.0][(i == n / 2) as usize],
                Row::Nan => f32::NAN,
                Row::Inf => [f32::INFINITY, f32::NEG_INFINITY][i % 2],
                Row::Zeros => [-0.0, 0.0, 0.0][i % 3],
                Row::Subnormal => [0.0, f32::from_bits(1), -0.0, f32::from_bits(0x8000_0001)][i % 4],
            })
            .collect()
    }
}

/// [`top_k`] of a row of `n` at offset `off` in a buffer whose other elements are +inf and 1e30.
struct TopKCase {
    n: usize,
    off: usize,
    k: usize,
    row: Row,
}

struct TopKPrepared {
    src: Vec<GpuBuffer<f32>>,
    scratch: [GpuBuffer<u32>; 2],
    scratch_len: usize,
    out: GpuBuffer<u32>,
    case: (usize, usize, usize),
    /// The full sort's first k, as (logit bits, id).
    want: Vec<(u32, u32)>,
    /// The sampler's configuration and its draws from the whole row.
    sampler: (SamplerConfig, Vec<Option<u32>>),
}

/// Draws of the CPU sampler per case, from the row and from the candidates.
const DRAWS: usize = 8;

impl Case for TopKCase {
    fn name(&self) -> String {
        format!("n={} off={} k={} {:?}", self.n, self.off, self.k, self.row)
    }
    fn bytes(&self) -> u64 {
        (4 * self.n + 8 * self.k) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>> {
        let row = self.row.values(rng, self.n);
        let want = reference_top_k(&row, self.k).iter().map(|&(v, i)| (v.to_bits(), i)).collect();
        let cfg = SamplerConfig { temperature: 0.8, top_k: self.k, top_p: 0.95, seed: rng.u32(u32::MAX) as u64 };
        let mut s = Sampler::new(cfg)?;
        let draws = (0..DRAWS).map(|_| s.sample(&row).ok()).collect();
        let scratch_len = top_k_scratch_len(self.n, self.k)?;
        let poisoned = vec![POISON_U32; scratch_len + GUARD];
        Ok(Box::new(TopKPrepared {
            src: uploads(ctx, &placed(&row, self.off), copies)?,
            scratch: [ctx.upload(&poisoned)?, ctx.upload(&poisoned)?],
            scratch_len,
            out: guarded_u32(ctx, 2 * self.k)?,
            case: (self.n, self.off, self.k),
            want,
            sampler: (cfg, draws),
        }))
    }
}

impl Prepared for TopKPrepared {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        let (n, off, k) = self.case;
        top_k(b, &self.src[copy % self.src.len()], off, n, k, [&self.scratch[0], &self.scratch[1]], &self.out)
    }
    /// The full sort's k best in rank order, bit for bit, empty slots only after them; the CPU
    /// sampler draws the same tokens from them as from the row; the guards after the output and
    /// after each scratch buffer untouched.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let k = self.case.2;
        let words = ctx.read(&self.out)?;
        let mut damage = guard_damage(&words, 2 * k, POISON_U32);
        for s in &self.scratch {
            damage += guard_damage(&ctx.read(s)?, self.scratch_len, POISON_U32);
        }
        let mut got = Vec::new();
        top_k_candidates(&words[..2 * k], &mut got);
        let filled = words[..2 * k].chunks(2).take_while(|w| w[1] != TOP_K_NONE).count();
        let got_bits: Vec<(u32, u32)> = got.iter().map(|&(v, i)| (v.to_bits(), i)).collect();
        let mut notes = Vec::new();
        if filled != got.len() {
            notes.push(format!("an empty slot among the candidates ({filled} before it, {} in all)", got.len()));
        }
        if got_bits != self.want {
            let first = got_bits.iter().zip(&self.want).position(|(a, b)| a != b).unwrap_or(got_bits.len().min(self.want.len()));
            notes.push(format!("{} candidates, want {}; first difference at rank {first}", got_bits.len(), self.want.len()));
        }
        let (cfg, want_draws) = &self.sampler;
        let mut s = Sampler::new(*cfg)?;
        let draws: Vec<Option<u32>> = (0..DRAWS).map(|_| s.sample_top_k(&got).ok()).collect();
        if draws != *want_draws {
            notes.push(format!("sampled {draws:?} from the candidates, {want_draws:?} from the row"));
        }
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: damage, note: notes.join("; ") })
    }
}

/// [`draw`] from the top-k candidates of a row of `n` (the reference's, as [`top_k`] writes
/// them), [`DRAW_UNIFORMS`] times with fresh uniforms, each into its own token word.
struct DrawCase {
    n: usize,
    k: usize,
    temperature: f32,
    top_p: f32,
    row: Row,
}

struct DrawPrepared {
    cand: GpuBuffer<u32>,
    toks: Vec<GpuBuffer<u32>>,
    k: usize,
    temperature: f32,
    top_p: f32,
    uniforms: Vec<f32>,
    /// Per uniform: the tokens the f64 draw gives for it and its neighbours (empty: no candidate).
    want: Vec<Vec<u32>>,
}

/// Draws per [`DrawCase`].
const DRAW_UNIFORMS: usize = 32;

/// The tokens [`sample::pick`] draws from `sorted` for the uniforms and top-p within `rel` of
/// `r` and `top_p` (f32 rounding of the GPU's softmax and running sums moves a boundary by less).
fn drawn_near(sorted: &[(f32, u32)], temperature: f32, top_p: f32, r: f32, rel: f64) -> Vec<u32> {
    let mut toks = Vec::new();
    for dr in [-rel, 0.0, rel] {
        for dp in [-rel, 0.0, rel] {
            let p = ((top_p as f64) * (1.0 + dp)).min(1.0) as f32;
            let u = ((r as f64) + dr).clamp(0.0, 1.0 - 1e-12);
            let t = sorted[sample::pick(sorted, temperature, if top_p < 1.0 { p } else { 1.0 }, u)].1;
            if !toks.contains(&t) {
                toks.push(t);
            }
        }
    }
    toks
}

impl Case for DrawCase {
    fn name(&self) -> String {
        format!("n={} k={} t={} top_p={} {:?}", self.n, self.k, self.temperature, self.top_p, self.row)
    }
    fn bytes(&self) -> u64 {
        (8 * self.k + 4) as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let sorted = reference_top_k(&self.row.values(rng, self.n), self.k);
        let mut words: Vec<u32> = sorted.iter().flat_map(|&(v, i)| [v.to_bits(), i]).collect();
        words.resize(2 * self.k, TOP_K_NONE);
        // Poison after the candidates: a read past 2 k words sees a filled slot of a huge logit.
        words.extend(std::iter::repeat_n(POISON_U32, GUARD));
        let uniforms: Vec<f32> = (0..DRAW_UNIFORMS).map(|_| rng.uniform(0.0, 1.0).min(1.0 - f32::EPSILON / 2.0)).collect();
        let want = uniforms.iter().map(|&r| if sorted.is_empty() { Vec::new() } else { drawn_near(&sorted, self.temperature, self.top_p, r, 1e-4) }).collect();
        let toks = (0..DRAW_UNIFORMS).map(|_| guarded_u32(ctx, 1)).collect::<Result<_>>()?;
        Ok(Box::new(DrawPrepared { cand: ctx.upload(&words)?, toks, k: self.k, temperature: self.temperature, top_p: self.top_p, uniforms, want }))
    }
}

impl Prepared for DrawPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        for (tok, &r) in self.toks.iter().zip(&self.uniforms) {
            draw(b, &self.cand, self.k, self.temperature, self.top_p, r, tok)?;
        }
        Ok(())
    }
    /// Each token is the f64 draw's for its uniform (or for one within f32 rounding of it);
    /// no candidate gives the empty id; the guards after each token word untouched.
    fn check(&self, ctx: &Context) -> Result<Check> {
        let mut damage = 0;
        let mut wrong = Vec::new();
        for ((tok, want), r) in self.toks.iter().zip(&self.want).zip(&self.uniforms) {
            let got = ctx.read(tok)?;
            damage += guard_damage(&got, 1, POISON_U32);
            let ok = if want.is_empty() { got[0] == TOP_K_NONE } else { want.contains(&got[0]) };
            if !ok {
                wrong.push(format!("r={r}: token {}, want one of {want:?}", got[0]));
            }
        }
        let note = if wrong.is_empty() { String::new() } else { format!("{} of {} draws wrong: {}", wrong.len(), self.toks.len(), wrong.join("; ")) };
        Ok(Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: damage, note })
    }
}
