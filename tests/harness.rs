//! The harness: every kernel of every family (from the registry) x every variant x its shape
//! grid, against the CPU reference, with guard regions, fresh random inputs, and wgpu's shader
//! bounds checks both off (the default) and on (a kernel may run a subset of its grid with them
//! on: `Kernel::bounds_checked_cases`). Variants the adapter can't run are printed as
//! UNSUPPORTED and never counted as passed. A variant that runs on the adapter but not for some
//! shapes (the Matrix prefill needs head_dim % 16 == 0) reports those cases UNSUPPORTED; if it
//! takes none of a kernel's cases, that is a failure.
//!
//! Progress (a line per kernel x variant x bounds-check mode, with the elapsed time) goes
//! straight to stderr, past the test runner's output capture, so a long run on a CPU adapter
//! shows where it is; the per-case lines are printed at the end (or with `--nocapture`).

mod common;

use std::io::Write;
use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, ContextOptions, Error, Variant, VariantPolicy};

#[test]
fn every_kernel_every_variant() {
    let base = common::context();
    println!("{}", base.caps().report());
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)\n");
    let mut rng = Rng::new(seed);
    // WGKERNELS_KERNEL=substr runs only the kernels whose name contains it (while developing one
    // family; CI runs them all).
    let filter = std::env::var("WGKERNELS_KERNEL").ok().filter(|f| !f.is_empty());
    let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
    let mut failures = Vec::new();
    // Seconds per kernel x variant x bounds-check mode (pipeline builds included), slowest listed last.
    let mut times = Vec::new();
    let kernels: Vec<_> = kernels::registry().into_iter().filter(|k| filter.as_deref().is_none_or(|f| k.info().name.contains(f))).collect();
    let started = std::time::Instant::now();
    // Written to the process's stderr directly: the test runner captures `eprintln!`.
    let progress = |line: String| {
        let _ = writeln!(std::io::stderr().lock(), "[harness {:>6.1} s] {line}", started.elapsed().as_secs_f64());
    };
    for bounds_checks in [false, true] {
        println!("== shader bounds checks {} ==", if bounds_checks { "ON" } else { "OFF" });
        for (i, kernel) in kernels.iter().enumerate() {
            let info = kernel.info();
            for v in Variant::ALL {
                if let Err(reason) = info.support(base.caps(), v) {
                    println!("{:<18} {:<9} UNSUPPORTED: {reason}", info.name, v.name());
                    unsupported += 1;
                    continue;
                }
                let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_bounds_checks(bounds_checks));
                let mut ran = 0;
                let start = std::time::Instant::now();
                let cases = if bounds_checks { kernel.bounds_checked_cases() } else { kernel.test_cases() };
                for case in cases {
                    let result = run_case(&ctx, case.as_ref(), &mut rng);
                    ran += !matches!(result, Err(Error::Unsupported { .. })) as usize;
                    let line = match result {
                        Err(Error::Unsupported { reason, .. }) => {
                            unsupported += 1;
                            format!("UNSUPPORTED for this shape: {reason}")
                        }
                        Ok(c) if c.passed() => {
                            passed += 1;
                            format!("PASS  {}", c.summary())
                        }
                        Ok(c) => {
                            failed += 1;
                            failures.push(format!("{} {} {}: {}", info.name, v.name(), case.name(), c.summary()));
                            format!("FAIL  {}", c.summary())
                        }
                        Err(e) => {
                            failed += 1;
                            failures.push(format!("{} {} {}: {e}", info.name, v.name(), case.name()));
                            format!("FAIL  error: {e}")
                        }
                    };
                    println!("{:<18} {:<9} {:<36} {line}", info.name, v.name(), case.name());
                }
                times.push((start.elapsed().as_secs_f64(), info.name, v.name(), bounds_checks));
                progress(format!(
                    "bounds checks {} kernel {}/{} {} {}: {ran} cases in {:.1} s; so far {passed} passed, {failed} failed",
                    if bounds_checks { "on " } else { "off" },
                    i + 1,
                    kernels.len(),
                    info.name,
                    v.name(),
                    start.elapsed().as_secs_f64()
                ));
                if ran == 0 {
                    failed += 1;
                    failures.push(format!("{} {}: supported by the adapter but took none of the test cases", info.name, v.name()));
                }
            }
        }
    }
    println!("\nharness: {passed} cases passed, {failed} failed, {unsupported} kernel x variant combinations or cases unsupported on {}", base.caps().adapter_name);
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = times.iter().map(|t| t.0).sum();
    println!("slowest kernel x variant runs ({total:.1} s in all):");
    for (secs, name, variant, bounds) in times.iter().take(12) {
        println!("  {secs:>7.1} s  {name} {variant} (bounds checks {})", if *bounds { "on" } else { "off" });
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    assert!(failures.is_empty(), "{} harness cases failed (seed {seed})", failures.len());
    assert!(passed > 0, "the harness ran nothing");
}
