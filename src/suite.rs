//! The test/bench vocabulary every kernel family implements, so the harness (tests/harness.rs),
//! the bench (benches/kernels.rs), the probe and the compare example iterate over
//! `kernels::registry` and never name a family.
//!
//! A family provides, per kernel, a `Kernel`: its [`crate::KernelInfo`] plus test and bench
//! [`Case`]s. A case sets up fresh random inputs on a context ([`Case::setup`]), records its
//! dispatch ([`Prepared::encode`]) and compares the output with its CPU reference, checking
//! NaN/Inf and the poisoned guard region after every output ([`Prepared::check`]).
//!
//! The Native self-check ([`crate::native`]) runs a few cases in every build, so what it needs
//! (cases, checks, guard regions, seeded random inputs) is built without the `testkit` feature
//! too, crate-private there; the registry side (`Kernel`, `describe_all`, fresh seeds) is
//! `testkit` only.

use crate::batch::Batch;
use crate::buffer::Elem;
use crate::buffer::GpuBuffer;
#[cfg(feature = "testkit")]
use crate::caps::{Caps, KernelInfo};
use crate::context::Context;
use crate::error::Result;
#[cfg(feature = "testkit")]
use crate::pipeline::{PipelineDesc, PipelineKey};
use bytemuck::Pod;

/// Elements of poison after every output buffer.
pub const GUARD: usize = 67;
/// Poison for f32 outputs: a signalling-NaN bit pattern no kernel produces.
pub const POISON_F32: u32 = 0x7fa0_dead;
/// Poison for u32 outputs.
pub const POISON_U32: u32 = 0xdead_beef;
/// Poison after an f16 output.
pub const POISON_F16: u16 = 0x7e5d;

/// Seeded random inputs. The seed is fresh per run (time), or `WGKERNELS_SEED` to reproduce.
pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed))
    }

    /// `WGKERNELS_SEED` if set, else derived from the clock.
    #[cfg(feature = "testkit")]
    pub fn fresh_seed() -> u64 {
        if let Some(s) = std::env::var("WGKERNELS_SEED").ok().and_then(|s| s.parse().ok()) {
            return s;
        }
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(1);
        (t as u64) ^ ((t >> 64) as u64) ^ 0x9e37_79b9_7f4a_7c15
    }

    pub fn u32(&mut self, below: u32) -> u32 {
        self.0.u32(0..below.max(1))
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.0.f32()
    }

    pub fn uniform_vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = (1.0 - self.0.f64()).max(1e-300);
        let u2 = self.0.f64();
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    pub fn normal_vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.normal()).collect()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.0.u8(..)).collect()
    }
}

/// Outcome of one correctness check.
#[derive(Clone, Debug)]
pub struct Check {
    /// Largest error, normalised per element by the reference's magnitude (e.g. sum |w*x| of a
    /// dot product) - the quantity floating-point error bounds are stated in.
    pub err: f64,
    pub tol: f64,
    pub nonfinite: usize,
    /// Guard elements that no longer hold the poison.
    pub guard_damage: usize,
    /// Other failures (e.g. codes that differ), empty when none.
    pub note: String,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.err <= self.tol && self.nonfinite == 0 && self.guard_damage == 0 && self.note.is_empty()
    }

    /// Combine two checks of one case (e.g. codes and scales).
    pub fn and(mut self, o: Check) -> Check {
        self.err = (self.err / self.tol.max(1e-300)).max(o.err / o.tol.max(1e-300)) * self.tol;
        self.nonfinite += o.nonfinite;
        self.guard_damage += o.guard_damage;
        if !o.note.is_empty() {
            self.note = if self.note.is_empty() { o.note } else { format!("{}; {}", self.note, o.note) };
        }
        self
    }

    pub fn summary(&self) -> String {
        let mut s = format!("err {:.2e} (tol {:.0e})", self.err, self.tol);
        if self.nonfinite > 0 {
            s += &format!(", {} NaN/Inf", self.nonfinite);
        }
        if self.guard_damage > 0 {
            s += &format!(", {} guard elements overwritten", self.guard_damage);
        }
        if !self.note.is_empty() {
            s += &format!(", {}", self.note);
        }
        s
    }
}

/// Compare a GPU f32 output with an f64 reference. `mag[i]` is the scale the error at `i` is
/// normalised by (use the reference's absolute-value sum for dot products; `|ref|` otherwise).
/// `out` holds `len + GUARD` elements; the tail must still be poison.
pub fn compare(out: &[f32], reference: &[f64], mag: &[f64], tol: f64) -> Check {
    let n = reference.len();
    let mut err = 0f64;
    let mut nonfinite = 0;
    for i in 0..n.min(out.len()) {
        let g = out[i] as f64;
        if !g.is_finite() {
            nonfinite += 1;
            continue;
        }
        let e = (g - reference[i]).abs() / mag[i].max(f64::MIN_POSITIVE);
        err = err.max(e);
    }
    let note = if out.len() < n { format!("output has {} of {} elements", out.len(), n) } else { String::new() };
    Check { err, tol, nonfinite, guard_damage: guard_damage(out, n, POISON_F32), note }
}

/// Count guard elements after `len` that no longer hold `poison`.
pub fn guard_damage<T: Pod>(out: &[T], len: usize, poison: u32) -> usize {
    out.iter().skip(len).filter(|v| bytemuck::bytes_of(*v) != poison.to_le_bytes()).count()
}

/// An output buffer of `len` f32 elements followed by [`GUARD`] elements of poison; the whole
/// buffer is pre-filled with poison so unwritten outputs show up too.
pub fn guarded_f32(ctx: &Context, len: usize) -> Result<GpuBuffer<f32>> {
    ctx.upload(&vec![f32::from_bits(POISON_F32); len + GUARD])
}

/// Like [`guarded_f32`] for u32 outputs.
pub fn guarded_u32(ctx: &Context, len: usize) -> Result<GpuBuffer<u32>> {
    ctx.upload(&vec![POISON_U32; len + GUARD])
}

/// Compare an f32 or f16 output (followed by [`GUARD`] poisoned elements) with a reference.
pub fn check_elems<T: Elem>(out: &[T], reference: &[f64], mag: &[f64], tol: f64) -> Result<Check> {
    if T::F16 {
        let n = reference.len();
        let as_f32: Vec<f32> = out.iter().take(n).map(|v| v.to_f32()).collect();
        let mut c = compare(&as_f32, reference, mag, tol);
        c.guard_damage = out.iter().skip(n).filter(|v| bytemuck::bytes_of(*v) != POISON_F16.to_le_bytes()).count();
        Ok(c)
    } else {
        let as_f32: Vec<f32> = out.iter().map(|v| v.to_f32()).collect();
        Ok(compare(&as_f32, reference, mag, tol))
    }
}

/// Upload `vals` as `T` followed by [`GUARD`] poisoned elements; returns the buffer and the
/// values as stored (rounded to f16 where `T` is f16), in f64.
pub fn upload_guarded<T: Elem>(ctx: &Context, vals: &[f32]) -> Result<(GpuBuffer<T>, Vec<f64>)> {
    let mut data: Vec<T> = vals.iter().map(|&v| T::from_f32(v)).collect();
    let stored = data.iter().map(|v| v.to_f32() as f64).collect();
    let poison: T = if T::F16 { bytemuck::cast_slice::<u16, T>(&[POISON_F16])[0] } else { bytemuck::cast_slice::<u32, T>(&[POISON_F32])[0] };
    data.extend(std::iter::repeat_n(poison, GUARD));
    Ok((ctx.upload(&data)?, stored))
}

/// One problem instance of a kernel (a shape and its options).
pub trait Case: Send + Sync {
    /// E.g. `n=33 k=1000 g=7 asym+zeros`.
    fn name(&self) -> String;
    /// Bytes the kernel must move per dispatch (for GB/s).
    #[cfg(feature = "testkit")]
    fn bytes(&self) -> u64;
    /// Floating-point operations per dispatch, for cases whose cost is set by them rather than
    /// by the bytes moved (attention prefill); `None` for the others.
    #[cfg(feature = "testkit")]
    fn flop_count(&self) -> Option<f64> {
        None
    }
    /// Upload fresh random inputs: `copies` independent weight sets for benches that must not
    /// be served from cache (copy 0 is the one checked).
    fn setup(&self, ctx: &Context, rng: &mut Rng, copies: usize) -> Result<Box<dyn Prepared>>;
}

/// A case whose inputs live on the GPU.
pub trait Prepared {
    /// Record the kernel's dispatch(es) on weight set `copy % copies`.
    fn encode(&self, batch: &mut Batch, copy: usize) -> Result<()>;
    /// Read back the output of copy 0 and compare with the CPU reference.
    fn check(&self, ctx: &Context) -> Result<Check>;
}

/// What a kernel registers for the harness, the bench and the probe.
#[cfg(feature = "testkit")]
pub trait Kernel: Sync {
    fn info(&self) -> &'static KernelInfo;
    /// The correctness grid (small, odd shapes).
    fn test_cases(&self) -> Vec<Box<dyn Case>>;
    /// The grid the harness runs again with wgpu's shader bounds checks on (where an access out of
    /// range would be clamped, so a result that differs from the unchecked run's exposes it): by
    /// default the whole correctness grid; a kernel whose pipelines are slow to build on a CPU
    /// adapter may give a subset that still runs each of its plans.
    fn bounds_checked_cases(&self) -> Vec<Box<dyn Case>> {
        self.test_cases()
    }
    /// LLM-sized shapes for the bench.
    fn bench_cases(&self) -> Vec<Box<dyn Case>>;
    /// Every pipeline this kernel can build (all variants and override combinations), for the
    /// offline shader checks. Use [`describe_all`].
    fn pipelines(&self) -> Vec<(String, PipelineDesc)>;
    /// Small cases, each with the launch-plan overrides under which it dispatches plans of
    /// [`Kernel::pipelines`] that the test grid (default tuning) does not reach: with the grid,
    /// every listed plan that a Mac runs through naga is reached by a case (tests/naga_msl
    /// executes them all). A family derives its list and these from one table of plans.
    fn plan_cases(&self) -> Vec<PlanCase> {
        Vec::new()
    }
}

/// A case and the tuning under which it dispatches one listed plan (see [`Kernel::plan_cases`]).
#[cfg(feature = "testkit")]
pub struct PlanCase {
    /// The variant whose plan it reaches (`None`: every variant's, the same overrides).
    pub variant: Option<crate::caps::Variant>,
    pub tuning: crate::tuning::Tuning,
    /// The adapter the plan is made for, where that matters.
    pub adapter: PlanAdapter,
    pub case: Box<dyn Case>,
}

#[cfg(feature = "testkit")]
impl PlanCase {
    pub fn new(variant: Option<crate::caps::Variant>, tuning: crate::tuning::Tuning, case: Box<dyn Case>) -> PlanCase {
        PlanCase { variant, tuning, adapter: PlanAdapter::default(), case }
    }
}

/// Adapter capabilities a plan depends on (`None`: the running adapter's), for
/// [`Context::with_caps`]: a plan case runs on a context that plans for them. The subgroup size
/// may only be raised where the dispatches run on subgroups at least that wide (e.g. the CPU
/// Metal runtime's 32 lanes, the simdgroup width of every Apple GPU, where wgpu reports 4..64).
#[cfg(feature = "testkit")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanAdapter {
    pub subgroup_min_size: Option<u32>,
    pub workgroup_memory: Option<u32>,
}

#[cfg(feature = "testkit")]
impl PlanAdapter {
    /// `caps` with these capabilities.
    pub fn apply(&self, caps: &mut Caps) {
        if let Some(s) = self.subgroup_min_size {
            caps.subgroup_min_size = s;
            caps.subgroup_max_size = caps.subgroup_max_size.max(s);
        }
        if let Some(m) = self.workgroup_memory {
            caps.limits.max_compute_workgroup_storage_size = m;
        }
    }
}

/// A kernel given by its parts: its info, its pipelines and its two case lists.
#[cfg(feature = "testkit")]
pub(crate) struct KernelParts {
    pub(crate) info: &'static KernelInfo,
    pub(crate) pipelines: fn() -> Vec<(String, PipelineDesc)>,
    pub(crate) test: fn() -> Vec<Box<dyn Case>>,
    pub(crate) bench: fn() -> Vec<Box<dyn Case>>,
}

#[cfg(feature = "testkit")]
impl Kernel for KernelParts {
    fn info(&self) -> &'static KernelInfo {
        self.info
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        (self.test)()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        (self.bench)()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        (self.pipelines)()
    }
}

/// The cases as trait objects.
#[cfg(feature = "testkit")]
pub(crate) fn boxed<C: Case + 'static>(cases: impl IntoIterator<Item = C>) -> Vec<Box<dyn Case>> {
    cases.into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect()
}

/// Every output element bit for bit against `want` (poison included where nothing may be
/// written), and the [`GUARD`] elements after it still poison.
#[cfg(feature = "testkit")]
pub(crate) fn bits_check(got: &[f32], want: &[f32]) -> Check {
    let n = want.len();
    let bad: Vec<usize> = (0..n).filter(|&i| got.get(i).map(|g| g.to_bits()) != Some(want[i].to_bits())).collect();
    let note = match bad.first() {
        None => String::new(),
        Some(&i) => format!("{} of {n} elements differ (first [{i}]: {:?}, want {:?})", bad.len(), got.get(i), want[i]),
    };
    Check { err: 0.0, tol: 0.0, nonfinite: 0, guard_damage: guard_damage(got, n, POISON_F32), note }
}

/// Label and description of each key, on [`Caps::nominal`].
#[cfg(feature = "testkit")]
pub fn describe_all<K: PipelineKey>(keys: impl IntoIterator<Item = K>) -> Vec<(String, PipelineDesc)> {
    let caps = Caps::nominal();
    keys.into_iter().map(|k| (format!("{k:?}"), k.describe(&caps))).collect()
}

/// Weights that multiply `m` input rows: lets families share [`MatmulPrepared`].
pub trait MatmulWeights {
    /// Record `y[m, n] = x[m, k] W^T` (GEMV when `m == 1`).
    fn encode_matmul(&self, b: &mut Batch, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()>;
}

/// The prepared form of a GEMV/GEMM case: rotated weight copies, one input, one guarded output,
/// and the f64 reference (values, magnitudes) of copy 0.
pub struct MatmulPrepared<W> {
    pub weights: Vec<W>,
    pub x: GpuBuffer<f32>,
    pub y: GpuBuffer<f32>,
    pub m: usize,
    pub reference: (Vec<f64>, Vec<f64>),
    pub tol: f64,
}

impl<W: MatmulWeights> Prepared for MatmulPrepared<W> {
    fn encode(&self, b: &mut Batch, copy: usize) -> Result<()> {
        self.weights[copy % self.weights.len()].encode_matmul(b, &self.x, &self.y, self.m)
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        Ok(compare(&ctx.read(&self.y)?, &self.reference.0, &self.reference.1, self.tol))
    }
}

/// Run one case end to end on `ctx`: set up, dispatch, check.
pub fn run_case(ctx: &Context, case: &dyn Case, rng: &mut Rng) -> Result<Check> {
    let prepared = case.setup(ctx, rng, 1)?;
    let mut b = ctx.batch();
    prepared.encode(&mut b, 0)?;
    b.run()?;
    prepared.check(ctx)
}
