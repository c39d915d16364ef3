//! Measurement helpers shared by the bench and the examples: the copy kernel (the in-process
//! bandwidth reference) and GPU timing of recorded work (timestamp queries, wall clock where the
//! adapter has none).
//!
//! Its three kernels (copy, the read ceiling's read, the warm-up's busy loop) are test kit kernels
//! too ([`kernels`], in [`crate::kernels::registry`] as `bench_copy`, `bench_read`, `bench_busy`):
//! small cases check each one's output bit for bit, so every shader check and executor that walks
//! the registry runs them.

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::Caps;
use crate::caps::{KernelInfo, Variant};
use crate::context::Context;
use crate::error::Result;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use crate::suite::{bits_check, boxed, describe_all, Case, Check, Kernel, KernelParts, Prepared, Rng, GUARD, POISON_F32};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Timing of one piece of work.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Median over single-dispatch submits (µs).
    pub single_us: f64,
    /// Per dispatch, when many are recorded back to back in one pass (µs).
    pub batched_us: f64,
    /// Whether timestamps (true) or wall clock (false) measured it.
    pub gpu_timestamps: bool,
}

/// Time `encode(batch, i)`: `reps` single submits (median) and one pass of `reps` dispatches.
///
/// Clocks: a GPU that sits idle while the CPU waits for each single submit lowers its clocks
/// (measured on an H200 with nvidia-smi during the bench: the SM clock sat at 1020–1080 MHz for
/// seconds at a time instead of 1980 MHz, and every variant measured in such a spell ran 2–2.5x
/// slow, single and batched alike). So every timed submit is
/// preceded, in the queue, by ~1 ms of an arithmetic-only busy kernel (no memory traffic: the
/// caches stay as the weight rotation left them), after a warm-up that waits for the clock.
///
/// Warm-up: after the CPU-side setup of a case (seconds of idle GPU at its 345 MHz idle clock)
/// the SM clock reaches 1980 MHz only 0.2–0.5 s after work arrives (nvidia-smi at 100 ms on the
/// H200, 2026-11-22). A fixed 0.3 s warm-up ended inside that ramp often enough to time whole
/// (case, variant) entries 2–3x slow — launch- and latency-bound work such as decode at short
/// caches worst. The busy kernel is the clock probe: being arithmetic-only, its GPU time is
/// inversely proportional to the SM clock. The warm-up runs rounds of (timed busy dispatch, the
/// `reps` dispatches) until the busy time has stopped falling (3 rounds without a 2% gain) and
/// is within 5% of the fastest busy time this process has seen (per iteration), or, when the
/// process has no such record yet, for at least 1 s; at most 3 s. Then the busy kernel is
/// rescaled to `BUSY_US` at the working clock. On a CPU adapter: a plain 0.3 s warm-up.
pub fn measure(ctx: &Context, reps: usize, encode: &dyn Fn(&mut Batch, usize) -> Result<()>) -> Result<Timing> {
    let (mut singles, t) = measure_all(ctx, reps, encode)?;
    singles.sort_by(f64::total_cmp);
    Ok(Timing { single_us: singles[singles.len() / 2], ..t })
}

/// As [`measure`], but also every single-submit time in submit order (`encode(batch, i)` for
/// i = 0..reps): the spread, and which inputs (copies) were slow.
pub fn measure_all(ctx: &Context, reps: usize, encode: &dyn Fn(&mut Batch, usize) -> Result<()>) -> Result<(Vec<f64>, Timing)> {
    let reps = reps.max(1);
    let mut busy = Busy::new(ctx)?;
    let start = Instant::now();
    let (mut best, mut calm) = (f64::INFINITY, 0);
    let had_record = BUSY_BEST.load(Ordering::Relaxed) != f64::INFINITY.to_bits();
    // A CPU adapter (lavapipe) has no clock governor to wait for, and its timings are noisy.
    let cpu = ctx.caps().device_type == wgpu::DeviceType::Cpu;
    loop {
        let mut b = ctx.timed_batch();
        busy.record(&mut b)?;
        let (gpu_us, wall_us) = submit_timed(b)?;
        let t = gpu_us.unwrap_or(wall_us);
        if t < best * 0.98 {
            best = t;
            calm = 0;
        } else {
            calm += 1;
        }
        let per_iter = t / busy.params.len as f64;
        let record = f64::from_bits(BUSY_BEST.fetch_min(per_iter.to_bits(), Ordering::Relaxed)).min(per_iter);
        let mut b = ctx.batch();
        for i in 0..reps {
            encode(&mut b, i)?;
        }
        b.run()?;
        let el = start.elapsed().as_secs_f64();
        let at_clock = had_record && per_iter <= 1.05 * record;
        let warm = if cpu { el >= 0.3 } else { calm >= 3 && (at_clock || (!had_record && el >= 1.0)) };
        if warm || el >= 3.0 {
            break;
        }
    }
    busy.params.len = ((busy.params.len as f64 * BUSY_US / best).round() as u32).max(1);
    let mut singles = Vec::with_capacity(reps);
    let mut ts = ctx.caps().timestamps;
    for i in 0..reps {
        let mut b = ctx.timed_batch();
        encode(&mut b, i)?;
        busy.submit(ctx)?;
        match submit_timed(b)? {
            (Some(gpu_us), _) if ts => singles.push(gpu_us),
            (_, wall_us) => {
                ts = false;
                singles.push(wall_us);
            }
        }
    }
    let mut b = ctx.timed_batch();
    for i in 0..reps {
        encode(&mut b, i)?;
    }
    busy.submit(ctx)?;
    let total_us = match submit_timed(b)? {
        (Some(gpu_us), _) if ts => gpu_us,
        (_, wall_us) => wall_us,
    };
    let mut sorted = singles.clone();
    sorted.sort_by(f64::total_cmp);
    Ok((singles, Timing { single_us: sorted[sorted.len() / 2], batched_us: total_us / reps as f64, gpu_timestamps: ts }))
}

/// Submit `b` and wait: (GPU µs from its timestamps if it has them, wall-clock µs).
fn submit_timed(b: Batch) -> Result<(Option<f64>, f64)> {
    let t0 = Instant::now();
    let gpu = b.submit()?.gpu_ns()?.map(|ns| ns / 1e3);
    Ok((gpu, t0.elapsed().as_secs_f64() * 1e6))
}

/// GPU time of the busy kernel that precedes every timed submit (µs): long against the CPU's
/// round trip per submit, so the GPU is ~90% busy while the timed loop runs and its clock
/// governor keeps working clocks.
const BUSY_US: f64 = 1000.0;

/// Fastest busy-kernel time per iteration (µs, f64 bits) seen by this process: the working clock.
/// Positive f64s order as their bits, so `fetch_min` on the bits keeps the smallest.
static BUSY_BEST: AtomicU64 = AtomicU64::new(0x7FF0_0000_0000_0000);

/// The busy kernel of [`measure`]: its iteration count is calibrated once to run [`BUSY_US`].
struct Busy {
    src: GpuBuffer<[f32; 4]>,
    sink: GpuBuffer<[f32; 4]>,
    params: CopyParams,
    groups: [u32; 3],
}

impl Busy {
    fn new(ctx: &Context) -> Result<Busy> {
        let (src, sink) = (ctx.alloc(1)?, ctx.alloc(1)?);
        let groups = ctx.grid(1024)?;
        // Start from the working-clock rate this process has already measured (BUSY_BEST), so
        // only the first measure() call has to search; then calibrate (GPU timestamps where the
        // adapter has them, else wall clock): double the iteration count until one busy
        // dispatch takes BUSY_US.
        let best = f64::from_bits(BUSY_BEST.load(Ordering::Relaxed));
        let len = if best.is_finite() && best > 0.0 { (BUSY_US / best).round().clamp(256.0, u32::MAX as f64) as u32 } else { 256 };
        let mut busy = Busy { src, sink, params: CopyParams { len, _p0: 0, _p1: 0, _p2: 0 }, groups };
        for _ in 0..20 {
            let mut b = ctx.timed_batch();
            busy.record(&mut b)?;
            let (gpu_us, wall_us) = submit_timed(b)?;
            if gpu_us.unwrap_or(wall_us) >= BUSY_US {
                break;
            }
            busy.params.len = busy.params.len.saturating_mul(2);
        }
        Ok(busy)
    }

    fn record(&self, b: &mut Batch) -> Result<()> {
        b.dispatch(&BusyPipeline, &self.params, &[self.src.raw(), self.sink.raw()], self.groups)
    }

    /// Queue one busy dispatch without waiting for it.
    fn submit(&self, ctx: &Context) -> Result<()> {
        let mut b = ctx.batch();
        self.record(&mut b)?;
        b.submit().map(|_| ())
    }
}

crate::kernels::params_struct! {
    struct CopyParams {
        len: u32,
        _p0: u32,
        _p1: u32,
        _p2: u32,
    }
}

/// The copy kernels' params and their pipelines (the params reflection test).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twin() -> crate::kernels::ParamsTwin {
    crate::kernels::params_twin!(CopyParams, kernels().iter().flat_map(|k| k.pipelines()).collect())
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CopyPipeline;

impl PipelineKey for CopyPipeline {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        const B: &[StorageBinding] = &[StorageBinding::read("src", "vec4<f32>"), StorageBinding::write("dst", "vec4<f32>")];
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![include_str!("../wgsl/copy.wgsl")]),
            entry: "main",
            constants: vec![],
            workgroup_size: [256, 1, 1],
            params_size: std::mem::size_of::<CopyParams>() as u64,
            bindings: B,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct BusyPipeline;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ReadPipeline;

impl PipelineKey for ReadPipeline {
    fn describe(&self, caps: &Caps) -> PipelineDesc {
        PipelineDesc { entry: "read_once", ..CopyPipeline.describe(caps) }
    }
}

impl PipelineKey for BusyPipeline {
    fn describe(&self, caps: &Caps) -> PipelineDesc {
        PipelineDesc { entry: "busy", ..CopyPipeline.describe(caps) }
    }
}

/// Measure the copy kernel over `bytes` (rounded to 16) of source: returns GB/s of
/// read + write traffic, the reference every "% of copy" figure uses.
pub fn copy_bandwidth(ctx: &Context, bytes: u64, reps: usize) -> Result<(f64, Timing)> {
    let limit = ctx.caps().limits.max_storage_buffer_binding_size.min(ctx.caps().limits.max_buffer_size);
    let bytes = bytes.min(limit) / 16 * 16;
    let len = (bytes / 16) as usize;
    let src: GpuBuffer<[f32; 4]> = ctx.alloc(len)?;
    let dst: GpuBuffer<[f32; 4]> = ctx.alloc(len)?;
    // Verify the copy on a marker before timing it.
    let marker = [[1.5f32, -2.0, 3.25, 7.0]; 4];
    ctx.write(&src, &marker)?;
    let params = CopyParams { len: len as u32, _p0: 0, _p1: 0, _p2: 0 };
    let groups = ctx.grid((len as u64).div_ceil(256).min(65_535 * 4))?;
    let encode = |b: &mut Batch, _i: usize| b.dispatch(&CopyPipeline, &params, &[src.raw(), dst.raw()], groups);
    let t = measure(ctx, reps, &encode)?;
    let head = ctx.read(&dst)?;
    if head[..4] != marker {
        return Err(crate::Error::Readback("copy kernel produced wrong data".into()));
    }
    Ok((2.0 * bytes as f64 / (t.single_us * 1e3), t))
}

/// The read ceiling for `bytes` (rounded up to 16): the time of a kernel that only reads that many
/// bytes once (one small digest write per 16 KiB read) over `copies` buffers rotated exactly like
/// a bench case rotates its weights, measured like every case ([`measure`]). Any kernel that must
/// read `bytes` takes at least this long: at small sizes it is launch, ramp-up and drain, not
/// bandwidth, which "% of copy" (measured over 1 GiB) does not show. The digest is checked against
/// the CPU before timing.
pub fn read_ceiling(ctx: &Context, bytes: u64, copies: usize, reps: usize) -> Result<Timing> {
    let len = bytes.div_ceil(16).max(1) as usize;
    let groups_n = len.div_ceil(1024);
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ bytes;
    let words: Vec<[u32; 4]> = (0..len)
        .map(|_| {
            let mut w = [0u32; 4];
            for v in &mut w {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *v = (state >> 16) as u32;
            }
            w
        })
        .collect();
    let want = words.iter().fold(0u32, |h, w| h ^ w[0] ^ w[1] ^ w[2] ^ w[3]);
    let srcs: Vec<GpuBuffer<[u32; 4]>> = (0..copies.max(1)).map(|_| ctx.upload(&words)).collect::<Result<_>>()?;
    let dst: GpuBuffer<[f32; 4]> = ctx.alloc(groups_n)?;
    let params = CopyParams { len: len as u32, _p0: 0, _p1: 0, _p2: 0 };
    let groups = ctx.grid(groups_n as u64)?;
    let encode = |b: &mut Batch, i: usize| b.dispatch(&ReadPipeline, &params, &[srcs[i % srcs.len()].raw(), dst.raw()], groups);
    let mut b = ctx.batch();
    encode(&mut b, 0)?;
    b.run()?;
    let got = ctx.read(&dst)?.iter().fold(0u32, |h, d| h ^ (d[0] as u32 | (d[1] as u32) << 16));
    if got != want {
        return Err(crate::Error::Readback(format!("read kernel digest {got:#x}, expected {want:#x}")));
    }
    measure(ctx, reps, &encode)
}

pub const BENCH_COPY: KernelInfo = KernelInfo::new("bench_copy", &[Variant::Portable], None);
pub const BENCH_READ: KernelInfo = KernelInfo::new("bench_read", &[Variant::Portable], None);
pub const BENCH_BUSY: KernelInfo = KernelInfo::new("bench_busy", &[Variant::Portable], None);

static KERNELS: [KernelParts; 3] = [
    KernelParts {
        info: &BENCH_COPY,
        pipelines: || describe_all([CopyPipeline]),
        // (vec4s, workgroups): fewer workgroups than the grid-stride loop's rounds (one of 256
        // invocations for 1000 vec4s: 4 rounds, the last partial), one element, every workgroup.
        test: || boxed([(1000, 1), (4099, 3), (1, 1), (70_001, 274), (65_537, 2)].map(|(len, groups)| CopyCase { len, groups })),
        bench: || boxed([CopyCase { len: 4 << 20, groups: (4 << 20) / 256 }]),
    },
    KernelParts {
        info: &BENCH_READ,
        pipelines: || describe_all([ReadPipeline]),
        // vec4s: a partial last workgroup (of 1024 vec4s each), one element, one vec4 past a
        // workgroup, whole workgroups.
        test: || boxed([3001, 1, 1025, 1024, 65_539].map(|len| ReadCase { len })),
        bench: || boxed([ReadCase { len: 4 << 20 }]),
    },
    KernelParts {
        info: &BENCH_BUSY,
        pipelines: || describe_all([BusyPipeline]),
        test: || boxed([(1000, 2), (1, 1), (5000, 3)].map(|(iters, groups)| BusyCase { iters, groups })),
        // Its time is set by the iteration count, not by bytes: nothing to bench.
        bench: Vec::new,
    },
];

/// This module's kernels, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    KERNELS.iter().map(|k| k as &dyn Kernel).collect()
}

/// Which of this module's kernels a case dispatches.
#[derive(Clone, Copy)]
enum Op {
    Copy,
    Read,
    Busy,
}

/// One dispatch of a bench kernel on `groups` workgroups, and what its output must hold (f32 bits;
/// the [`GUARD`] vec4s after it still poison).
struct BenchPrepared {
    op: Op,
    src: GpuBuffer<[u32; 4]>,
    dst: GpuBuffer<[f32; 4]>,
    params: CopyParams,
    groups: [u32; 3],
    want: Vec<f32>,
}

impl BenchPrepared {
    /// `src` uploaded, `dst` of `dst_len` poisoned vec4s plus the guard.
    fn prepare(ctx: &Context, op: Op, src: &[[u32; 4]], dst_len: usize, len: usize, groups: usize, want: Vec<f32>) -> Result<Box<dyn Prepared>> {
        let dst = ctx.upload(&vec![[f32::from_bits(POISON_F32); 4]; dst_len + GUARD])?;
        let params = CopyParams { len: u32::try_from(len).map_err(|_| crate::Error::Shape(format!("{len} vec4s")))?, _p0: 0, _p1: 0, _p2: 0 };
        Ok(Box::new(BenchPrepared { op, src: ctx.upload(src)?, dst, params, groups: ctx.grid(groups as u64)?, want }))
    }
}

impl Prepared for BenchPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        let bufs = [self.src.raw(), self.dst.raw()];
        match self.op {
            Op::Copy => b.dispatch(&CopyPipeline, &self.params, &bufs, self.groups),
            Op::Read => b.dispatch(&ReadPipeline, &self.params, &bufs, self.groups),
            Op::Busy => b.dispatch(&BusyPipeline, &self.params, &bufs, self.groups),
        }
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let got = ctx.read(&self.dst)?;
        Ok(bits_check(bytemuck::cast_slice(&got), &self.want))
    }
}

/// `len` random vec4s of u32 words that are no NaN's bits as f32 (the copy moves f32 vec4s,
/// which a backend may quiet), every other bit pattern possible.
fn random_words(rng: &mut Rng, len: usize) -> Vec<[u32; 4]> {
    let bytes = rng.bytes(16 * len);
    let word = |b: &[u8]| {
        let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if (w >> 23) & 0xff == 0xff {
            w ^ 1 << 23
        } else {
            w
        }
    };
    bytes.chunks_exact(16).map(|v| [0, 4, 8, 12].map(|i| word(&v[i..i + 4]))).collect()
}

/// The copy kernel over `len` vec4s on `groups` workgroups (a grid-stride loop).
struct CopyCase {
    len: usize,
    groups: usize,
}

impl Case for CopyCase {
    fn name(&self) -> String {
        format!("n={} vec4 groups={}", self.len, self.groups)
    }
    fn bytes(&self) -> u64 {
        32 * self.len as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let src = random_words(rng, self.len);
        let want = bytemuck::cast_slice(&src).to_vec();
        BenchPrepared::prepare(ctx, Op::Copy, &src, self.len, self.len, self.groups, want)
    }
}

/// The read kernel over `len` vec4s: per workgroup of 1024 vec4s, the XOR of its words as two
/// 16-bit halves.
struct ReadCase {
    len: usize,
}

impl Case for ReadCase {
    fn name(&self) -> String {
        format!("n={} vec4", self.len)
    }
    fn bytes(&self) -> u64 {
        16 * self.len as u64
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let src = random_words(rng, self.len);
        let want = src
            .chunks(1024)
            .flat_map(|block| {
                let h = block.iter().flatten().fold(0u32, |h, w| h ^ w);
                [(h & 0xffff) as f32, (h >> 16) as f32, 0.0, 0.0]
            })
            .collect();
        let groups = self.len.div_ceil(1024);
        BenchPrepared::prepare(ctx, Op::Read, &src, groups, self.len, groups, want)
    }
}

/// The busy kernel: `iters` rounds of its loop on `groups` workgroups. Its sink is written only
/// for a loop value below -1, which finite inputs never reach: the sink must keep its poison (a
/// comparison, branch or loop translated wrong writes it).
struct BusyCase {
    iters: usize,
    groups: usize,
}

impl Case for BusyCase {
    fn name(&self) -> String {
        format!("iters={} groups={}", self.iters, self.groups)
    }
    fn bytes(&self) -> u64 {
        0
    }
    fn flop_count(&self) -> Option<f64> {
        Some(2.0 * (self.iters * self.groups * 256) as f64)
    }
    fn setup(&self, ctx: &Context, _rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        BenchPrepared::prepare(ctx, Op::Busy, &[[0; 4]], 1, self.iters, self.groups, vec![f32::from_bits(POISON_F32); 4])
    }
}
