//! What WGSL cooperative matrices reach on this adapter at all: the ceiling for the Matrix
//! prefill. `cargo run --release --example matrix_peak [iters]`.
//!
//! Every subgroup runs loops of 16x16x16 `coopMultiplyAdd` (f16 inputs; f32 accumulators, and
//! f16 ones where the adapter lists that configuration) on 2x4 or 1x4 register accumulators,
//! with the operands (examples/matrix_peak.wgsl):
//! * `reg`: loaded once, kept in registers (the MMA pipe alone);
//! * `shared`: reloaded from workgroup memory every step (A and B, or B only: one load per
//!   product, as in the attention kernel's Q K^T with Q in registers);
//! * `global`: reloaded from the storage buffer every step (a 6 KiB set: L1-resident).
//!
//! `matrix_peak probe`: whether a cooperative load then store of each role (A, B, C f16) and
//! layout pair moves every element where the layouts say (storage -> workgroup memory).
//! `matrix_peak prefill`: the attention prefill (32/8 heads, d 128, causal, f16 K/V, K rotated in
//! the call) at 512 and 2048 tokens under each prefill variant, Matrix checked against Portable
//! on the GPU first (the bench's f64 CPU check takes minutes at 2048), TFLOP/s = 4 T^2/2 h d / t.
//!
//! Each configuration is first checked on a few workgroups against an f64 CPU product (inputs
//! are multiples of 1/4 in [-1/2, 1/2]: every sum is exact in f16 and f32), then timed with
//! [`timing::measure`] (GPU timestamps, busy kernel ahead of each submit). FLOPs: 2 * 16^3 per
//! `coopMultiplyAdd`. Adapters without cooperative matrices (lavapipe) print "unsupported"
//! after validating the shader text with naga, and exit 0.

use half::f16;
use wgkernels::caps::Caps;
use wgkernels::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use wgkernels::suite::Rng;
use wgkernels::timing::measure;
use wgkernels::wgpu::CooperativeScalarType as Cst;
use wgkernels::{Context, ContextOptions, Error, GpuBuffer};

const WGSL: &str = include_str!("matrix_peak.wgsl");
const PROBE_WGSL: &str = include_str!("matrix_probe.wgsl");
const ACC_F32: &str = "alias ACC = f32;\n";
const ACC_F16: &str = "alias ACC = f16;\n";
const BINDINGS_F32: &[StorageBinding] = &[StorageBinding::read("src", "f16"), StorageBinding::write("dst", "f32")];
const BINDINGS_F16: &[StorageBinding] = &[StorageBinding::read("src", "f16"), StorageBinding::write("dst", "f16")];
const SET: usize = 6 * 256;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    iters: u32,
    writers: u32,
    salt: u32,
    _p: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mode {
    Reg = 0,
    Shared = 1,
    Global = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Peak {
    mode: Mode,
    /// A tiles per subgroup: `ma` x 4 products per step.
    ma: u32,
    load_a: bool,
    acc_f16: bool,
    wg: u32,
}

impl PipelineKey for Peak {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![WGSL, if self.acc_f16 { ACC_F16 } else { ACC_F32 }]),
            entry: "main",
            constants: vec![("MODE", self.mode as u32 as f64), ("MA", self.ma as f64), ("LOAD_A", self.load_a as u32 as f64), ("WG", self.wg as f64)],
            workgroup_size: [self.wg, 1, 1],
            params_size: std::mem::size_of::<Params>() as u64,
            bindings: if self.acc_f16 { BINDINGS_F16 } else { BINDINGS_F32 },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Probe {
    role: u32,
    lt: bool,
    st: bool,
}

impl PipelineKey for Probe {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        PipelineDesc {
            source: ShaderSource::Wgsl(vec![PROBE_WGSL]),
            entry: "main",
            constants: vec![("ROLE", self.role as f64), ("LT", self.lt as u32 as f64), ("ST", self.st as u32 as f64), ("WG", 32.0)],
            workgroup_size: [32, 1, 1],
            params_size: std::mem::size_of::<Params>() as u64,
            bindings: BINDINGS_F16,
        }
    }
}

/// Run every role x layout probe; print one line each.
fn probe(ctx: &Context) -> wgkernels::Result<()> {
    let host: Vec<f16> = (0..16 * 24 + 16).map(|i| f16::from_f32(i as f32)).collect();
    let src = ctx.upload(&host)?;
    for role in 0..3u32 {
        for (lt, st) in [(false, false), (true, true), (true, false), (false, true)] {
            let key = Probe { role, lt, st };
            let dst: GpuBuffer<f16> = ctx.alloc(640)?;
            let mut b = ctx.batch();
            b.dispatch(&key, &Params { iters: 0, writers: 0, salt: 0, _p: 0 }, &[src.raw(), dst.raw()], [1, 1, 1])?;
            b.run()?;
            let got = ctx.read(&dst)?;
            let mut bad = 0;
            let mut first = String::new();
            for i in 0..16 {
                for j in 0..16 {
                    let want = host[8 + if lt { i * 24 + j } else { j * 24 + i }];
                    let g = got[if st { i * 40 + j } else { j * 40 + i }];
                    if g != want {
                        if bad == 0 {
                            first = format!(" first: ({i},{j}) got {g} want {want}");
                        }
                        bad += 1;
                    }
                }
            }
            let role_name = ["A", "B", "C f16"][role as usize];
            let lay = |t: bool| if t { "row-major" } else { "col-major" };
            println!("probe {role_name:<5} load {} store {}: {}", lay(lt), lay(st), if bad == 0 { "exact".to_string() } else { format!("{bad}/256 misplaced{first}") });
        }
    }
    Ok(())
}

/// The prefill under each variant at 512 and 2048 tokens (see the module docs).
fn prefill(ctx: &Context) -> wgkernels::Result<()> {
    use wgkernels::kernels::attention::{self, AttnShape, Prefill};
    use wgkernels::kernels::rope::{PairLayout, RopeConfig, RopeScaling, RopeTable};
    use wgkernels::{Variant, VariantPolicy};
    let (heads, kv_heads, d) = (32, 8, 128);
    let shape = AttnShape::new(heads, kv_heads, d);
    let mut rng = Rng::new(Rng::fresh_seed());
    println!("| tokens | variant | µs single | µs batched | TFLOP/s | max |Matrix - Portable| / max |out| |");
    println!("|---|---|---|---|---|---|");
    for t in [512usize, 2048] {
        let cfg = RopeConfig::new(d, 1_000_000.0, RopeScaling::yarn(4.0, 32768));
        let table = RopeTable::build(ctx, cfg, t)?;
        let q = ctx.upload(&rng.normal_vec(t * heads * d))?;
        let to16 = |x: Vec<f32>| x.into_iter().map(f16::from_f32).collect::<Vec<_>>();
        let k: GpuBuffer<f16> = ctx.upload(&to16(rng.normal_vec(t * kv_heads * d)))?;
        let v: GpuBuffer<f16> = ctx.upload(&to16(rng.normal_vec(t * kv_heads * d)))?;
        let outs: Vec<GpuBuffer<f32>> = (0..2).map(|_| ctx.alloc(t * heads * d)).collect::<wgkernels::Result<_>>()?;
        let flops = 4.0 * (t * t) as f64 / 2.0 * heads as f64 * d as f64;
        let mut portable: Option<Vec<f32>> = None;
        for (vi, var) in [Variant::Portable, Variant::Matrix].into_iter().enumerate() {
            let vctx = ctx.with_options(ContextOptions::from_env()?.with_policy(VariantPolicy::Require(var)));
            let out = &outs[vi];
            let args = Prefill {
                shape,
                tokens: t,
                offset: 0,
                kv_len: t,
                causal: true,
                k_rotated: false,
                layout: PairLayout::HalfSplit,
                scale: None,
                window: None,
                softcap: None,
                q: &q,
                k: &k,
                v: &v,
                table: &table,
                out,
            };
            let mut b = vctx.batch();
            if let Err(e) = attention::prefill(&mut b, &args) {
                println!("| {t} | {} | unsupported: {e} | | | |", var.name());
                continue;
            }
            b.run()?;
            let got = vctx.read(out)?;
            let check = match &portable {
                None => {
                    portable = Some(got);
                    "reference".to_string()
                }
                Some(p) => {
                    let scale = p.iter().fold(0f32, |m, x| m.max(x.abs()));
                    let err = got.iter().zip(p).map(|(a, b)| if a.is_finite() { (a - b).abs() } else { f32::INFINITY }).fold(0f32, f32::max) / scale;
                    if err.is_nan() || err >= 1e-2 {
                        println!("| {t} | {} | WRONG: {err:.2e} | | | |", var.name());
                        continue;
                    }
                    format!("{err:.1e}")
                }
            };
            let tm = measure(&vctx, 20, &|b, _| attention::prefill(b, &args))?;
            println!("| {t} | {} | {:.1} | {:.1} | {:.1} | {check} |", var.name(), tm.single_us, tm.batched_us, flops / (tm.single_us * 1e6));
        }
    }
    Ok(())
}

impl Peak {
    fn name(&self) -> String {
        let ops = match (self.mode, self.load_a) {
            (Mode::Reg, _) => "A,B in registers".to_string(),
            (m, true) => format!("A,B from {} each step", if m == Mode::Shared { "workgroup mem" } else { "global" }),
            (m, false) => format!("B from {} each step", if m == Mode::Shared { "workgroup mem" } else { "global" }),
        };
        format!("{}x4 acc {} | {ops} | wg {}", self.ma, if self.acc_f16 { "f16" } else { "f32" }, self.wg)
    }

    /// Loads per product in the loop.
    fn loads_per_mma(&self) -> f64 {
        match self.mode {
            Mode::Reg => 0.0,
            _ => (4.0 + if self.load_a { 2.0 } else { 0.0 }) / (4.0 * self.ma as f64),
        }
    }
}

/// Column-major 16x16 tile `t` (0..12: set 0 = A0 A1 B0..B3, set 1 likewise) element (r, c).
fn at(src: &[f16], t: usize, r: usize, c: usize) -> f64 {
    src[t * 256 + c * 16 + r].to_f64()
}

/// C[i][j] (i < 2, j < 4) the kernel should hold after `iters` steps.
fn expected(src: &[f16], p: &Peak, iters: u32, salt: u32) -> Vec<f64> {
    let mut out = vec![0.0; 8 * 256];
    for it in 0..iters {
        let set = ((it + salt) % 2) as usize;
        let (sa, sb) = match p.mode {
            Mode::Reg => (0, 0),
            _ => (if p.load_a { set } else { 0 }, set),
        };
        for i in 0..p.ma as usize {
            for j in 0..4 {
                for r in 0..16 {
                    for c in 0..16 {
                        let dot: f64 = (0..16).map(|k| at(src, sa * 6 + i, r, k) * at(src, sb * 6 + 2 + j, k, c)).sum();
                        out[(i * 4 + j) * 256 + c * 16 + r] += dot;
                    }
                }
            }
        }
    }
    out
}

fn run<T: bytemuck::Pod>(ctx: &Context, p: &Peak, src: &GpuBuffer<f16>, host: &[f16], iters: u32, conv: fn(T) -> f64) -> wgkernels::Result<(f64, f64)> {
    let sgs = (p.wg / ctx.caps().subgroup_max_size) as usize;
    // Check: 3 workgroups, every subgroup's 8 accumulators.
    let (check_wg, check_iters) = (3u32, 9u32);
    let dst: GpuBuffer<T> = ctx.alloc(check_wg as usize * sgs * 8 * 256)?;
    let params = Params { iters: check_iters, writers: check_wg, salt: 0, _p: 0 };
    let mut b = ctx.batch();
    b.dispatch(p, &params, &[src.raw(), dst.raw()], [check_wg, 1, 1])?;
    b.run()?;
    let got = ctx.read(&dst)?;
    let want = expected(host, p, check_iters, 0);
    let mut err = 0.0f64;
    for (i, g) in got.iter().enumerate() {
        err = err.max((conv(*g) - want[i % want.len()]).abs());
    }
    if err > 1e-3 {
        return Err(Error::Readback(format!("{}: max abs error {err} vs the CPU product", p.name())));
    }
    // Time: enough workgroups to fill the GPU many times over; only workgroup 0 stores.
    let groups = 2048u32;
    let params = Params { iters, writers: 1, salt: 0, _p: 0 };
    let grid = ctx.grid(groups as u64)?;
    let t = measure(ctx, 20, &|b, _| b.dispatch(p, &params, &[src.raw(), dst.raw()], grid))?;
    let flops = groups as f64 * sgs as f64 * iters as f64 * (4 * p.ma) as f64 * 2.0 * 4096.0;
    Ok((flops / (t.single_us * 1e6), flops / (t.batched_us * 1e6)))
}

fn main() -> wgkernels::Result<()> {
    let arg = std::env::args().nth(1);
    let iters: u32 = arg.as_deref().and_then(|s| s.parse().ok()).unwrap_or(512);
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    let caps = ctx.caps().clone();
    let mut configs = Vec::new();
    for acc_f16 in [false, true] {
        for (mode, ma, load_a) in [
            (Mode::Reg, 2, false),
            (Mode::Reg, 1, false),
            (Mode::Shared, 2, true),
            (Mode::Shared, 2, false),
            (Mode::Shared, 1, false),
            (Mode::Global, 2, true),
            (Mode::Global, 1, false),
        ] {
            configs.push(Peak { mode, ma, load_a, acc_f16, wg: 128 });
        }
    }
    configs.push(Peak { mode: Mode::Reg, ma: 2, load_a: false, acc_f16: false, wg: 256 });
    configs.push(Peak { mode: Mode::Shared, ma: 1, load_a: false, acc_f16: false, wg: 256 });
    // The text must validate wherever this runs (naga, no adapter needed).
    for p in &configs {
        wgkernels::shaders::translate(&p.describe(&Caps::nominal())).map_err(|e| Error::Argument(format!("{}: {e}", p.name())))?;
    }
    for role in 0..3 {
        let p = Probe { role, lt: true, st: false };
        wgkernels::shaders::translate(&p.describe(&Caps::nominal())).map_err(|e| Error::Argument(format!("{p:?}: {e}")))?;
    }
    println!("adapter: {} ({:?}), subgroup {}..{}", caps.adapter_name, caps.backend, caps.subgroup_min_size, caps.subgroup_max_size);
    let f32_ok = caps.cooperative_matrix && caps.has_coop_config(16, Cst::F16, Cst::F32);
    let f16_ok = caps.cooperative_matrix && caps.has_coop_config(16, Cst::F16, Cst::F16);
    for c in &caps.cooperative_matrix_configs {
        println!("  coop config {}x{}x{} {:?} -> {:?}", c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type);
    }
    if !f32_ok || caps.subgroup_min_size != caps.subgroup_max_size || caps.subgroup_max_size == 0 {
        println!(
            "matrix_peak: unsupported on this adapter (needs a 16x16x16 f16 -> f32 cooperative matrix and one subgroup size); its {} throughput and 3 probe shaders validate",
            configs.len()
        );
        return Ok(());
    }
    match arg.as_deref() {
        Some("probe") => return probe(&ctx),
        Some("prefill") => return prefill(&ctx),
        _ => {}
    }
    let mut rng = Rng::new(Rng::fresh_seed());
    let host: Vec<f16> = (0..2 * SET).map(|_| f16::from_f32((rng.u32(5) as f32 - 2.0) / 4.0)).collect();
    let src = ctx.upload(&host)?;
    println!("iters {iters}, 2048 workgroups; TFLOP/s from the median single-dispatch time and from 20 back-to-back dispatches\n");
    println!("| configuration | loads / product | check | TFLOP/s single | TFLOP/s batched |");
    println!("|---|---|---|---|---|");
    for p in &configs {
        if p.acc_f16 && !f16_ok {
            println!("| {} | — | unsupported (no f16 -> f16 config) | — | — |", p.name());
            continue;
        }
        let r = if p.acc_f16 { run::<f16>(&ctx, p, &src, &host, iters, |x| x.to_f64()) } else { run::<f32>(&ctx, p, &src, &host, iters, |x| x as f64) };
        match r {
            Ok((s, b)) => println!("| {} | {:.2} | exact | {s:.1} | {b:.1} |", p.name(), p.loads_per_mma()),
            Err(e) => println!("| {} | {:.2} | FAILED: {e} | — | — |", p.name(), p.loads_per_mma()),
        }
    }
    Ok(())
}
