//! WGSL vs MSL throughput: for each kernel, every variant this adapter supports (Portable, Subgroup,
//! Native on a Mac, Matrix where cooperative matrices are offered) at LLM shapes, each first
//! checked against the CPU reference, then timed.
//! Prints a side-by-side table of µs per dispatch and GB/s with ratios, plus the in-process copy
//! kernel's bandwidth as the ceiling. Off Metal it runs what it can and says why Native is not there.
//!
//!   cargo run --release --example compare [-- --reps 20 --kernel mm_gemv_q4_k --rotate-mib 256]
//!
//! --reps N        timed repetitions per case (default 20)
//! --kernel NAME   only kernels whose name contains NAME
//! --rotate-mib M  rotate among enough weight copies to touch M MiB per round, so timings are not
//!                 served from the last-level cache (default 256; Apple Max chips have up to 48 MB SLC)
//! --max-cases N   at most N bench cases per kernel (default all)
//! --full          on a CPU adapter, the GPU defaults anyway
//!
//! On a CPU adapter (e.g. lavapipe) it shrinks itself unless `--full` is given, and says so: the
//! first 2 test-grid cases (small, odd shapes) per kernel instead of the LLM-shaped bench cases,
//! 3 repetitions, no weight copies, a 32 MiB copy kernel.

use wgkernels::suite::{Case, Rng};
use wgkernels::timing::{copy_bandwidth, measure, Timing};
use wgkernels::{kernels, Context, ContextOptions, Error, Result, Variant, VariantPolicy};

/// Seconds of cases on a CPU adapter before the rest are skipped (each variant's pipelines are
/// compiled by the CPU driver, seconds apiece).
const CPU_BUDGET_S: u64 = 40;

struct Args {
    reps: usize,
    kernel: Option<String>,
    rotate_mib: u64,
    max_cases: usize,
    /// Test-grid shapes instead of the bench's (set on a CPU adapter).
    small: bool,
    full: bool,
    given: Vec<String>,
}

fn args() -> std::result::Result<Args, String> {
    let mut a = Args { reps: 20, kernel: None, rotate_mib: 256, max_cases: usize::MAX, small: false, full: false, given: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        a.given.push(flag.clone());
        match flag.as_str() {
            "--full" => a.full = true,
            "--reps" => a.reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--kernel" => a.kernel = Some(value()?),
            "--rotate-mib" => a.rotate_mib = value()?.parse().map_err(|e| format!("--rotate-mib: {e}"))?,
            "--max-cases" => a.max_cases = value()?.parse().map_err(|e| format!("--max-cases: {e}"))?,
            other => return Err(format!("unknown argument {other} (see the header of examples/compare.rs)")),
        }
    }
    Ok(a)
}

/// One variant's outcome on one case.
enum Cell {
    Timed(Timing),
    Wrong(String),
    Failed(String),
}

fn run_variant(ctx: &Context, case: &dyn Case, rng: &mut Rng, a: &Args) -> Cell {
    let copies = ((a.rotate_mib << 20).div_ceil(case.bytes().max(1)) as usize).clamp(1, 16);
    let mut go = || -> Result<Cell> {
        let prepared = case.setup(ctx, rng, copies)?;
        let mut b = ctx.batch();
        prepared.encode(&mut b, 0)?;
        b.run()?;
        let check = prepared.check(ctx)?;
        if !check.passed() {
            return Ok(Cell::Wrong(check.summary()));
        }
        Ok(Cell::Timed(measure(ctx, a.reps, &|b, i| prepared.encode(b, i))?))
    };
    go().unwrap_or_else(|e: Error| Cell::Failed(e.to_string()))
}

fn fmt_cell(c: Option<&Cell>, bytes: u64) -> String {
    match c {
        Some(Cell::Timed(t)) => format!("{:>9.1} {:>7.1}", t.batched_us, bytes as f64 / (t.batched_us * 1e3)),
        Some(Cell::Wrong(_)) => format!("{:>17}", "WRONG"),
        Some(Cell::Failed(_)) => format!("{:>17}", "ERROR"),
        None => format!("{:>17}", "-"),
    }
}

fn us(c: Option<&Cell>) -> Option<f64> {
    match c {
        Some(Cell::Timed(t)) => Some(t.batched_us),
        _ => None,
    }
}

fn ratio(num: Option<f64>, den: Option<f64>) -> String {
    match (num, den) {
        (Some(n), Some(d)) if n > 0.0 => format!("{:>8.2}x", d / n),
        _ => format!("{:>9}", "-"),
    }
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let base = match Context::new_blocking(ContextOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("no GPU adapter: {e}");
            std::process::exit(1);
        }
    };
    println!("{}\n", base.caps().report());
    let mut a = a;
    if base.caps().device_type == wgkernels::wgpu::DeviceType::Cpu && !a.full {
        let given = |f: &str| a.given.iter().any(|g| g == f);
        a.small = true;
        if !given("--reps") {
            a.reps = 3;
        }
        if !given("--rotate-mib") {
            a.rotate_mib = 0;
        }
        if !given("--max-cases") {
            a.max_cases = 1;
        }
        println!(
            "CPU adapter: shrunk to the first {} test-grid case(s) per kernel, {} reps, {} MiB of weight copies, a 32 MiB copy kernel, \
             and {CPU_BUDGET_S} s of cases (--full for the GPU defaults)\n",
            a.max_cases, a.reps, a.rotate_mib
        );
    }
    if let Err(why) = base.caps().variant_support(Variant::Native) {
        println!("Native (MSL) is unavailable here: {why}. Running the WGSL variants only.\n");
    }
    match copy_bandwidth(&base, if a.small { 32 << 20 } else { 256 << 20 }, a.reps.min(10)) {
        Ok((gbs, _)) => println!("copy kernel (read + write): {gbs:.1} GB/s, the in-process ceiling\n"),
        Err(e) => println!("copy kernel failed: {e}\n"),
    }
    let seed = Rng::fresh_seed();
    let mut rng = Rng::new(seed);
    println!(
        "{:<16} {:<44} {:>17} {:>17} {:>17} {:>17} {:>9} {:>9} {:>9}",
        "kernel", "case", "portable µs GB/s", "subgroup µs GB/s", "native µs GB/s", "matrix µs GB/s", "sg/port", "nat/sg", "mat/sg"
    );
    let mut notes = Vec::new();
    let mut wrong = 0;
    let (start, mut skipped) = (std::time::Instant::now(), Vec::new());
    for kernel in kernels::registry() {
        let info = kernel.info();
        if a.kernel.as_deref().is_some_and(|k| !info.name.contains(k)) {
            continue;
        }
        if a.small && start.elapsed().as_secs() >= CPU_BUDGET_S {
            skipped.push(info.name);
            continue;
        }
        let cases = if a.small { kernel.test_cases() } else { kernel.bench_cases() };
        for case in cases.into_iter().take(a.max_cases) {
            let mut cells: Vec<(Variant, Cell)> = Vec::new();
            for v in Variant::ALL {
                if let Err(why) = info.support(base.caps(), v) {
                    if info.variants.contains(&v) {
                        notes.push(format!("{} {v}: not run: {why}", info.name));
                    }
                    continue;
                }
                let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)));
                let cell = run_variant(&ctx, case.as_ref(), &mut rng, &a);
                match &cell {
                    Cell::Wrong(s) => {
                        wrong += 1;
                        notes.push(format!("{} {v} {}: WRONG, not timed: {s}", info.name, case.name()));
                    }
                    Cell::Failed(s) => notes.push(format!("{} {v} {}: {s}", info.name, case.name())),
                    Cell::Timed(_) => {}
                }
                cells.push((v, cell));
            }
            let get = |v: Variant| cells.iter().find(|(w, _)| *w == v).map(|(_, c)| c);
            let bytes = case.bytes();
            println!(
                "{:<16} {:<44} {} {} {} {} {} {} {}",
                info.name,
                case.name(),
                fmt_cell(get(Variant::Portable), bytes),
                fmt_cell(get(Variant::Subgroup), bytes),
                fmt_cell(get(Variant::Native), bytes),
                fmt_cell(get(Variant::Matrix), bytes),
                ratio(us(get(Variant::Subgroup)), us(get(Variant::Portable))),
                ratio(us(get(Variant::Native)), us(get(Variant::Subgroup))),
                ratio(us(get(Variant::Matrix)), us(get(Variant::Subgroup))),
            );
        }
    }
    notes.dedup();
    if !skipped.is_empty() {
        notes.push(format!("CPU adapter: {CPU_BUDGET_S} s budget spent; not run: {} (--kernel NAME runs one)", skipped.join(", ")));
    }
    println!("\nµs: per dispatch, {} dispatches recorded back to back in one pass; GB/s: bytes the kernel must move / time.", a.reps);
    println!("ratios: speed-up of the left variant over the right one (e.g. nat/sg 1.30x = Native 30% faster).");
    for n in &notes {
        println!("note: {n}");
    }
    println!("seed {seed} (WGKERNELS_SEED={seed} reproduces the inputs)");
    if wrong > 0 {
        eprintln!("{wrong} variant/case combinations were WRONG");
        std::process::exit(1);
    }
}
