//! Decode attention: spread of repeated measurements and a sweep of the split plan's knobs.
//!
//! `cargo run --release --example decode_sweep -- [rounds] [reps] [setups] [rotate MiB]`
//! (defaults 3 30 2 256, on a CPU adapter 1 5 1, kv 4k, the f16 cache and 3 configurations only; `DECODE_SWEEP_SET=first` for the
//! first round's configurations)
//!
//! For kv 32k / 16k / 4k (32 heads / 8 kv heads, head_dim 128, f16 and f32 caches): `setups`
//! fresh setups at 4k (new cache buffers; one at 16k / 32k) of enough cache copies to exceed a 60 MB last-level
//! cache (`rotate MiB` of them); in each, every configuration below is checked against the f64 CPU reference, then
//! timed `rounds` times, configurations interleaved (A B C .. A B C ..), so a slow spell of the
//! GPU shows up in all of them while a slow configuration or a slow buffer shows up in its own
//! rows only. Each timing line: median / p10 / p90 / max of `reps` single submits (GPU
//! timestamps, busy-kernel warm-up, as the bench), the batched per-dispatch time, and the
//! seconds since start (to line up with an `nvidia-smi` clock log). The first configuration
//! also prints the median single time per cache copy.
//!
//! Configurations: the decode overrides of [`wgkernels::Tuning`] (named as their environment
//! variables WGKERNELS_DECODE_PF / _WGS / _KEYS / _WG / _MERGE_U / _MINCHUNK / _LANES / _GB) with the Subgroup variant (and Portable in the
//! first set), or your own list in `DECODE_SWEEP_CONFIGS` (see `custom_configs`).
//! `DECODE_SWEEP_KV=32768,4096` picks the KV lengths; `DECODE_SWEEP_ATTEND_ONLY=1` times the
//! attention alone (split pass + merge, no RoPE or cache append), which is what torch's SDPA does.

use wgkernels::kernels::attention::cases::DecodeCase;
use wgkernels::kernels::attention::{decode_plan, AttnShape};
use wgkernels::kernels::rope::PairLayout;
use wgkernels::suite::{Case, Rng};
use wgkernels::timing::measure_all;
use wgkernels::{Context, ContextOptions, Tuning, Variant, VariantPolicy};

const NK: usize = 8;
const KNOBS: [&str; NK] = [
    "WGKERNELS_DECODE_PF",
    "WGKERNELS_DECODE_WGS",
    "WGKERNELS_DECODE_KEYS",
    "WGKERNELS_DECODE_WG",
    "WGKERNELS_DECODE_MERGE_U",
    "WGKERNELS_DECODE_MINCHUNK",
    "WGKERNELS_DECODE_LANES",
    "WGKERNELS_DECODE_GB",
];

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// (name, variant, knob values in KNOBS order; "" = unset). "before" is the plan and merge of
/// commit b3c9685 (64-key chunks at 4k, 4 merge loads in flight, no prefetch, 4 keys).
fn configs() -> Vec<(String, Variant, [&'static str; NK])> {
    if let Ok(spec) = std::env::var("DECODE_SWEEP_CONFIGS") {
        return custom_configs(&spec);
    }
    let list: Vec<(&str, Variant, [&str; NK])> = match std::env::var("DECODE_SWEEP_SET").as_deref() {
        // The first round of measurements: the old merge (4 loads), no minimum chunk.
        Ok("first") => vec![
            ("sub pf0", Variant::Subgroup, ["0", "", "4", "", "4", "0", "", ""]),
            ("sub pf1", Variant::Subgroup, ["1", "", "4", "", "4", "0", "", ""]),
            ("sub pf1 wgs1056", Variant::Subgroup, ["1", "1056", "4", "", "4", "0", "", ""]),
            ("sub pf1 wgs264", Variant::Subgroup, ["1", "264", "4", "", "4", "0", "", ""]),
            ("sub pf1 keys2", Variant::Subgroup, ["1", "", "2", "", "4", "0", "", ""]),
            ("sub pf1 wg256", Variant::Subgroup, ["1", "", "4", "256", "4", "0", "", ""]),
            ("sub pf0 wgs1056", Variant::Subgroup, ["0", "1056", "4", "", "4", "0", "", ""]),
            ("portable", Variant::Portable, ["", "", "", "", "4", "0", "", ""]),
        ],
        // The second round (names as printed then; "new" = 128-key chunks and 8 merge loads,
        // no prefetch, 4 keys; the defaults since are "new pf1 keys2" for f16 and "new pf1" for
        // f32, and "default" shows them).
        _ => vec![
            ("before", Variant::Subgroup, ["0", "", "4", "", "4", "0", "", ""]),
            ("default", Variant::Subgroup, ["", "", "", "", "", "", "", ""]),
            ("new", Variant::Subgroup, ["0", "", "4", "", "", "", "", ""]),
            ("new merge_u4", Variant::Subgroup, ["0", "", "4", "", "4", "", "", ""]),
            ("new pf1", Variant::Subgroup, ["1", "", "4", "", "", "", "", ""]),
            ("new pf1 keys2", Variant::Subgroup, ["1", "", "2", "", "", "", "", ""]),
            ("new lanes8", Variant::Subgroup, ["0", "", "4", "", "", "", "8", ""]),
            ("new minchunk256", Variant::Subgroup, ["0", "", "4", "", "", "256", "", ""]),
            ("new keys8", Variant::Subgroup, ["0", "", "8", "", "", "", "", ""]),
            ("new wgs1056", Variant::Subgroup, ["0", "1056", "4", "", "", "", "", ""]),
        ],
    };
    list.into_iter().map(|(n, v, k)| (n.to_string(), v, k)).collect()
}

/// `DECODE_SWEEP_CONFIGS="name=KNOB:VALUE,KNOB:VALUE;name2=..."` with KNOB the name after
/// `WGKERNELS_DECODE_` (PF, WGS, KEYS, WG, MERGE_U, MINCHUNK, LANES, GB), all Subgroup; an
/// empty list after `=` is the default plan; unknown knobs are reported and ignored.
fn custom_configs(spec: &str) -> Vec<(String, Variant, [&'static str; NK])> {
    let mut out = Vec::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, knobs) = item.split_once('=').unwrap_or((item, ""));
        let mut vals = [""; NK];
        for kv in knobs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once(':').unwrap_or((kv, ""));
            match KNOBS.iter().position(|n| n.strip_prefix("WGKERNELS_DECODE_") == Some(k)) {
                // Leaked once per configuration of a short-lived tool: the knob table holds &'static str.
                Some(i) => vals[i] = Box::leak(v.to_string().into_boxed_str()),
                None => eprintln!("decode_sweep: unknown knob {k} in {name}, ignored"),
            }
        }
        out.push((name.to_string(), Variant::Subgroup, vals));
    }
    out
}

/// The tuning of one configuration (values in KNOBS order; "" = default; unparsable = default).
fn tuning(k: &[&str; NK]) -> Tuning {
    let n = |i: usize| k[i].parse::<usize>().ok();
    Tuning {
        decode_prefetch: n(0).map(|v| v == 1),
        decode_workgroups: n(1),
        decode_keys: n(2),
        decode_wg: n(3),
        decode_merge_unroll: n(4),
        decode_min_chunk: n(5),
        decode_lanes: n(6),
        decode_gb: n(7),
        ..Tuning::default()
    }
}

/// A context on `ctx`'s device that requires `variant` and uses configuration `knobs`.
fn config_context(ctx: &Context, variant: Variant, knobs: &[&str; NK]) -> Context {
    ctx.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(variant)).with_tuning(tuning(knobs)))
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> wgkernels::Result<()> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("{}\n", ctx.caps().report());
    let cpu = ctx.caps().device_type == wgkernels::wgpu::DeviceType::Cpu;
    // On a CPU adapter (lavapipe) only a quick pass: 1 round of 5 reps, 1 setup (it is a GPU tool).
    let (rounds, reps, setups, rotate_mib) = if cpu { (arg(1, 1), arg(2, 5), arg(3, 1), arg(4, 256)) } else { (arg(1, 3), arg(2, 30), arg(3, 2), arg(4, 256)) };
    let start = std::time::Instant::now();
    let (copy_gbs, _) = wgkernels::timing::copy_bandwidth(&ctx, if cpu { 32 << 20 } else { 1 << 30 }, if cpu { 3 } else { 10 })?;
    println!("copy kernel: {copy_gbs:.1} GB/s (read + write)\n");
    let mut rng = Rng::new(Rng::fresh_seed());
    let shape = AttnShape::new(32, 8, 128);
    let kvs: Vec<usize> = match std::env::var("DECODE_SWEEP_KV") {
        Ok(list) => list.split(',').filter_map(|v| v.trim().parse().ok()).collect(),
        Err(_) if cpu => vec![4096],
        Err(_) => vec![32768, 16384, 4096],
    };
    // DECODE_SWEEP_ATTEND_ONLY=1: time decode_attention alone (split pass + merge), as torch's SDPA.
    let attend_only = std::env::var("DECODE_SWEEP_ATTEND_ONLY").is_ok_and(|v| v == "1");
    let mut failures = 0;
    if cpu {
        println!("CPU adapter: shrunk to kv 4096 (unless DECODE_SWEEP_KV), the f16 cache, the first 3 configurations, 1 round of 5 reps\n");
    }
    for &kv in &kvs {
        for kv_f16 in if cpu { vec![true] } else { vec![true, false] } {
            let case = DecodeCase { pos: kv - 1, shape, layout: PairLayout::HalfSplit, kv_f16, mode: 5, window: None, softcap: None, attend_only, q8: false };
            let copies = if cpu { 1 } else { (rotate_mib << 20).div_ceil(case.bytes() as usize).clamp(1, 16) };
            let nsetups = if kv <= 4096 { setups } else { 1 };
            for setup in 0..nsetups {
                let prepared = case.setup(&ctx, &mut rng, copies)?;
                println!("== {} setup {setup} ({copies} copies)", case.name());
                let mut cfgs = configs();
                if cpu {
                    cfgs.truncate(3);
                }
                for (name, variant, knobs) in &cfgs {
                    let vctx = config_context(&ctx, *variant, knobs);
                    let plan = decode_plan(vctx.caps(), *variant, &shape, kv_f16, kv)?;
                    let mut b = vctx.batch();
                    prepared.encode(&mut b, 0)?;
                    b.run()?;
                    let check = prepared.check(&vctx)?;
                    if !check.passed() {
                        failures += 1;
                    }
                    println!(
                        "   plan {name:<18} wg {} gb {} lanes {} keys {} pf {} chunk {} nchunks {} workgroups {}  check: {}",
                        plan.wg,
                        plan.gb,
                        plan.lanes,
                        plan.keys,
                        plan.prefetch as u8,
                        plan.chunk,
                        plan.nchunks,
                        plan.nchunks * plan.gblocks * shape.kv_heads,
                        check.summary()
                    );
                }
                for round in 0..rounds {
                    for (ci, (name, variant, knobs)) in cfgs.iter().enumerate() {
                        let vctx = config_context(&ctx, *variant, knobs);
                        let at = start.elapsed().as_secs_f64();
                        let (singles, t) = measure_all(&vctx, reps, &|b, i| prepared.encode(b, i))?;
                        let mut sorted = singles.clone();
                        sorted.sort_by(f64::total_cmp);
                        let gbs = case.bytes() as f64 / (t.single_us * 1e3);
                        println!(
                            "   r{round} {name:<18} single {:7.1} (p10 {:7.1} p90 {:7.1} max {:7.1}) batch {:7.1} us  {:5.1}% copy  t={at:.1}s",
                            t.single_us,
                            pct(&sorted, 0.1),
                            pct(&sorted, 0.9),
                            sorted[sorted.len() - 1],
                            t.batched_us,
                            100.0 * gbs / copy_gbs
                        );
                        if ci == 0 && copies > 1 {
                            let per: Vec<String> = (0..copies.min(reps))
                                .map(|c| {
                                    let mut v: Vec<f64> = singles.iter().skip(c).step_by(copies).copied().collect();
                                    v.sort_by(f64::total_cmp);
                                    format!("{:.0}", v[v.len() / 2])
                                })
                                .collect();
                            println!("      per copy: {}", per.join(" "));
                        }
                    }
                }
            }
        }
    }
    println!("\n{failures} check failures; {:.1} s", start.elapsed().as_secs_f64());
    if failures > 0 {
        std::process::exit(1);
    }
    Ok(())
}
