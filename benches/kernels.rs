//! Benchmark: every kernel (from the registry) × every variant the adapter supports, at LLM
//! shapes. Each case is first checked against its CPU reference (a wrong kernel is never timed),
//! then timed with timestamp queries (wall clock where the adapter has none): median of single
//! submits and per-dispatch time of a back-to-back batch, with weights rotated over enough copies
//! that the last-level cache cannot serve them. GB/s and % of the copy kernel measured in the
//! same process. Prints a table and writes a CSV.
//!
//!   cargo bench --bench kernels -- [--filter SUBSTR] [--reps N] [--csv PATH] [--rotate-mib M]

use std::fmt::Write as _;
use wgkernels::suite::Rng;
use wgkernels::timing::{copy_bandwidth, measure};
use wgkernels::{kernels, Context, ContextOptions, Variant, VariantPolicy};

struct Args {
    filter: Option<String>,
    reps: usize,
    csv: String,
    rotate_bytes: u64,
    copy_bytes: u64,
}

fn args() -> Args {
    let mut a = Args { filter: None, reps: 30, csv: "target/bench.csv".into(), rotate_bytes: 512 << 20, copy_bytes: 1 << 30 };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        match s.as_str() {
            "--filter" => a.filter = it.next(),
            "--reps" => a.reps = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.reps),
            "--csv" => a.csv = it.next().unwrap_or(a.csv),
            "--rotate-mib" => a.rotate_bytes = it.next().and_then(|v| v.parse::<u64>().ok()).map_or(a.rotate_bytes, |m| m << 20),
            "--copy-mib" => a.copy_bytes = it.next().and_then(|v| v.parse::<u64>().ok()).map_or(a.copy_bytes, |m| m << 20),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn main() {
    let a = args();
    let ctx = match Context::new_blocking(ContextOptions::from_env().expect("WGKERNELS_* environment")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("no GPU adapter: {e}");
            std::process::exit(1);
        }
    };
    let caps = ctx.caps().clone();
    println!("{}\n", caps.report());
    let cpu = caps.device_type == wgpu::DeviceType::Cpu;
    let (copy_bytes, reps) = if cpu { (a.copy_bytes.min(64 << 20), a.reps.min(5)) } else { (a.copy_bytes, a.reps) };
    let (copy_gbs, ct) = copy_bandwidth(&ctx, copy_bytes, reps).expect("copy kernel");
    println!("copy kernel: {copy_gbs:.1} GB/s read+write over {} MiB ({:.1} µs; {})\n", copy_bytes >> 20, ct.single_us, if ct.gpu_timestamps { "timestamps" } else { "wall clock" });

    let mut rng = Rng::new(Rng::fresh_seed());
    let mut csv = String::from("kernel,case,variant,bytes,copies,single_us,batched_us,gb_s,pct_copy,batched_gb_s,check_err\n");
    println!("{:<16} {:<30} {:<9} {:>10} {:>10} {:>8} {:>7} {:>9}  check", "kernel", "case", "variant", "single µs", "batch µs", "GB/s", "% copy", "batch GB/s");
    let mut failures = 0;
    for kernel in kernels::registry() {
        let info = kernel.info();
        for case in kernel.bench_cases() {
            let label = format!("{} {}", info.name, case.name());
            if a.filter.as_ref().is_some_and(|f| !label.contains(f.as_str())) {
                continue;
            }
            for v in Variant::ALL {
                if let Err(why) = info.support(&caps, v) {
                    if v != Variant::Native || !why.contains("no native implementation") {
                        println!("{:<16} {:<30} {:<9} unsupported: {why}", info.name, case.name(), v.name());
                    }
                    continue;
                }
                let vctx = ctx.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)));
                let copies = a.rotate_bytes.div_ceil(case.bytes().max(1)).clamp(1, 64) as usize;
                let mut run = || -> wgkernels::Result<(wgkernels::suite::Check, Option<wgkernels::timing::Timing>)> {
                    let p = case.setup(&vctx, &mut rng, copies)?;
                    let mut b = vctx.batch();
                    p.encode(&mut b, 0)?;
                    b.run()?;
                    let check = p.check(&vctx)?;
                    if !check.passed() {
                        return Ok((check, None));
                    }
                    let t = measure(&vctx, reps.max(copies.min(64)), &|b, i| p.encode(b, i))?;
                    Ok((check, Some(t)))
                };
                match run() {
                    Ok((check, Some(t))) => {
                        let gbs = case.bytes() as f64 / (t.single_us * 1e3);
                        let bgbs = case.bytes() as f64 / (t.batched_us * 1e3);
                        let pct = 100.0 * gbs / copy_gbs;
                        println!(
                            "{:<16} {:<30} {:<9} {:>10.1} {:>10.1} {:>8.1} {:>6.1}% {:>9.1}  ok ({:.1e})",
                            info.name, case.name(), v.name(), t.single_us, t.batched_us, gbs, pct, bgbs, check.err
                        );
                        let _ = writeln!(
                            csv,
                            "{},{},{},{},{},{:.2},{:.2},{:.1},{:.1},{:.1},{:.2e}",
                            info.name, case.name(), v.name(), case.bytes(), copies, t.single_us, t.batched_us, gbs, pct, bgbs, check.err
                        );
                    }
                    Ok((check, None)) => {
                        failures += 1;
                        println!("{:<16} {:<30} {:<9} WRONG RESULT, not timed: {}", info.name, case.name(), v.name(), check.summary());
                    }
                    Err(e) => {
                        failures += 1;
                        println!("{:<16} {:<30} {:<9} error: {e}", info.name, case.name(), v.name());
                    }
                }
            }
        }
    }
    let _ = writeln!(csv, "copy,{} MiB,portable,{},1,{:.2},{:.2},{:.1},100.0,,", copy_bytes >> 20, 2 * copy_bytes, ct.single_us, ct.batched_us, copy_gbs);
    if let Some(dir) = std::path::Path::new(&a.csv).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&a.csv, csv) {
        Ok(()) => println!("\nwrote {}", a.csv),
        Err(e) => println!("\ncould not write {}: {e}", a.csv),
    }
    if failures > 0 {
        eprintln!("{failures} bench cases failed their correctness check");
        std::process::exit(1);
    }
}
