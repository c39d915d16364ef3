//! Benchmark: every kernel (from the registry) × every variant the adapter supports, at LLM
//! shapes. Each case is first checked against its CPU reference (a wrong kernel is never timed),
//! then timed with timestamp queries (wall clock where the adapter has none): median of single
//! submits and per-dispatch time of a back-to-back batch, with weights rotated over enough copies
//! that the last-level cache cannot serve them. GB/s and % of the copy kernel measured in the
//! same process. Prints a table, writes a CSV and an SVG bar chart of GB/s per case and variant
//! with the copy kernel's bandwidth as a vertical line. Next to each case: the read ceiling, the
//! time of a read-only kernel over the same bytes rotated the same way (`timing::read_ceiling`),
//! i.e. the floor any kernel reading those bytes has at that size (launch, ramp-up, drain).
//!
//!   cargo bench --bench kernels -- [--filter SUBSTR[|SUBSTR...]] [--reps N] [--csv PATH] [--svg PATH] [--rotate-mib M] [--no-read-ceiling] [--time-failed] [--variants portable,subgroup,native,matrix]
//!   cargo bench --bench kernels -- --chart-from results.csv [--svg out.svg] [--title TEXT]
//!   cargo bench --bench kernels -- --list [--filter SUBSTR]
//!
//! `--chart-from` only redraws the chart from a saved CSV (no GPU needed); `--list` prints the
//! label (`kernel case`) of every bench case the filter keeps, without a GPU.

use std::fmt::Write as _;
use wgkernels::suite::Rng;
use wgkernels::timing::{copy_bandwidth, measure, read_ceiling};
use wgkernels::{kernels, Context, ContextOptions, Variant, VariantPolicy};

struct Args {
    filter: Option<String>,
    /// Time cases whose check failed too (ablations: a kernel with a phase removed).
    time_failed: bool,
    reps: usize,
    csv: String,
    svg: String,
    chart_from: Option<String>,
    list: bool,
    title: Option<String>,
    rotate_bytes: u64,
    copy_bytes: u64,
    read_ceiling: bool,
    /// Only these variants (by name); all when empty.
    variants: Vec<Variant>,
}

fn args() -> Args {
    let mut a = Args {
        filter: None,
        time_failed: false,
        reps: 30,
        csv: "target/bench.csv".into(),
        svg: "target/bench.svg".into(),
        chart_from: None,
        list: false,
        title: None,
        rotate_bytes: 512 << 20,
        copy_bytes: 1 << 30,
        read_ceiling: true,
        variants: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        match s.as_str() {
            "--filter" => a.filter = it.next(),
            "--reps" => a.reps = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.reps),
            "--csv" => a.csv = it.next().unwrap_or(a.csv),
            "--svg" => a.svg = it.next().unwrap_or(a.svg),
            "--chart-from" => a.chart_from = it.next(),
            "--list" => a.list = true,
            "--title" => a.title = it.next(),
            "--no-read-ceiling" => a.read_ceiling = false,
            "--time-failed" => a.time_failed = true,
            "--variants" => a.variants = it.next().unwrap_or_default().split(',').filter_map(Variant::parse).collect(),
            "--rotate-mib" => a.rotate_bytes = it.next().and_then(|v| v.parse::<u64>().ok()).map_or(a.rotate_bytes, |m| m << 20),
            "--copy-mib" => a.copy_bytes = it.next().and_then(|v| v.parse::<u64>().ok()).map_or(a.copy_bytes, |m| m << 20),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn main() {
    let a = args();
    if let Some(src) = &a.chart_from {
        let title = a.title.clone().unwrap_or_else(|| format!("wgkernels bench ({src})"));
        match std::fs::read_to_string(src).map_err(|e| e.to_string()).and_then(|text| chart::write_svg(&text, &title, &a.svg)) {
            Ok(n) => println!("wrote {} ({n} bars)", a.svg),
            Err(e) => {
                eprintln!("chart from {src}: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if a.list {
        for kernel in kernels::registry() {
            for case in kernel.bench_cases() {
                let label = format!("{} {}", kernel.info().name, case.name());
                if a.filter.as_ref().is_none_or(|f| f.split('|').any(|part| label.contains(part))) {
                    println!("{label}");
                }
            }
        }
        return;
    }
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
    println!(
        "copy kernel: {copy_gbs:.1} GB/s read+write over {} MiB ({:.1} µs; {})\n",
        copy_bytes >> 20,
        ct.single_us,
        if ct.gpu_timestamps { "timestamps" } else { "wall clock" }
    );

    let mut rng = Rng::new(Rng::fresh_seed());
    let mut csv = String::from("kernel,case,variant,bytes,copies,single_us,batched_us,gb_s,pct_copy,batched_gb_s,check_err,read_single_us,read_batched_us\n");
    let _ = writeln!(csv, "copy,{} MiB,portable,{},1,{:.2},{:.2},{:.1},100.0,,,,", copy_bytes >> 20, 2 * copy_bytes, ct.single_us, ct.batched_us, copy_gbs);
    if let Some(dir) = std::path::Path::new(&a.csv).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // The CSV is rewritten after every timed case, so a run cut short (a device time limit)
    // still leaves every row it measured.
    let _ = std::fs::write(&a.csv, &csv);
    println!(
        "{:<22} {:<30} {:<9} {:>10} {:>10} {:>8} {:>7} {:>9} {:>13}  check",
        "kernel", "case", "variant", "single µs", "batch µs", "GB/s", "% copy", "batch GB/s", "read µs s/b"
    );
    // Read ceilings per (bytes, copies): a read-only kernel over the case's bytes, rotated alike.
    let mut ceilings: std::collections::HashMap<(u64, usize), Option<wgkernels::timing::Timing>> = Default::default();
    let mut failures = 0;
    for kernel in kernels::registry() {
        let info = kernel.info();
        for case in kernel.bench_cases() {
            let label = format!("{} {}", info.name, case.name());
            if a.filter.as_ref().is_some_and(|f| !f.split('|').any(|part| label.contains(part))) {
                continue;
            }
            for v in Variant::ALL {
                if !a.variants.is_empty() && !a.variants.contains(&v) {
                    continue;
                }
                if let Err(why) = info.support(&caps, v) {
                    // A variant the kernel does not have is not news; one the adapter can't run is.
                    if !why.contains(&format!("has no {} implementation", v.name())) {
                        println!("{:<22} {:<30} {:<9} unsupported: {why}", info.name, case.name(), v.name());
                    }
                    continue;
                }
                // The environment's options (tuning, bounds checks) with the variant required.
                let vctx = ctx.with_options(ctx.options().clone().with_policy(VariantPolicy::Require(v)));
                let copies = a.rotate_bytes.div_ceil(case.bytes().max(1)).clamp(1, 64) as usize;
                let mut run = || -> wgkernels::Result<(wgkernels::suite::Check, Option<wgkernels::timing::Timing>)> {
                    let p = case.setup(&vctx, &mut rng, copies)?;
                    let mut b = vctx.batch();
                    p.encode(&mut b, 0)?;
                    b.run()?;
                    let check = p.check(&vctx)?;
                    if !check.passed() && !a.time_failed {
                        return Ok((check, None));
                    }
                    let t = measure(&vctx, reps.max(copies.min(64)), &|b, i| p.encode(b, i))?;
                    Ok((check, Some(t)))
                };
                let result = run();
                let ceiling = match &result {
                    Ok((_, Some(_))) if a.read_ceiling => {
                        *ceilings.entry((case.bytes(), copies)).or_insert_with(|| match read_ceiling(&ctx, case.bytes(), copies, reps.max(copies.min(64))) {
                            Ok(t) => Some(t),
                            Err(e) => {
                                println!("read ceiling for {} bytes: {e}", case.bytes());
                                None
                            }
                        })
                    }
                    _ => None,
                };
                let (rs, rb) = ceiling.map_or((String::new(), String::new()), |r| (format!("{:.2}", r.single_us), format!("{:.2}", r.batched_us)));
                match result {
                    Ok((check, Some(t))) => {
                        let gbs = case.bytes() as f64 / (t.single_us * 1e3);
                        let bgbs = case.bytes() as f64 / (t.batched_us * 1e3);
                        let pct = 100.0 * gbs / copy_gbs;
                        println!(
                            "{:<22} {:<30} {:<9} {:>10.1} {:>10.1} {:>8.1} {:>6.1}% {:>9.1} {:>13}  {} ({:.1e})",
                            info.name,
                            case.name(),
                            v.name(),
                            t.single_us,
                            t.batched_us,
                            gbs,
                            pct,
                            bgbs,
                            ceiling.map_or(String::from("-"), |r| format!("{:.1}/{:.1}", r.single_us, r.batched_us)),
                            if check.passed() { "ok" } else { "FAILED" },
                            check.err
                        );
                        let _ = writeln!(
                            csv,
                            "{},{},{},{},{},{:.2},{:.2},{:.1},{:.1},{:.1},{:.2e},{rs},{rb}",
                            info.name,
                            case.name(),
                            v.name(),
                            case.bytes(),
                            copies,
                            t.single_us,
                            t.batched_us,
                            gbs,
                            pct,
                            bgbs,
                            check.err
                        );
                        let _ = std::fs::write(&a.csv, &csv);
                    }
                    Ok((check, None)) => {
                        failures += 1;
                        println!("{:<22} {:<30} {:<9} WRONG RESULT, not timed: {}", info.name, case.name(), v.name(), check.summary());
                    }
                    // A shape this variant does not take (e.g. the Matrix decode with an f32 cache):
                    // reported like an adapter that can't run it, not counted as a failure.
                    Err(e @ wgkernels::Error::Unsupported { .. }) => {
                        println!("{:<22} {:<30} {:<9} unsupported: {e}", info.name, case.name(), v.name());
                    }
                    Err(e) => {
                        failures += 1;
                        println!("{:<22} {:<30} {:<9} error: {e}", info.name, case.name(), v.name());
                    }
                }
            }
        }
    }
    match std::fs::write(&a.csv, &csv) {
        Ok(()) => println!("\nwrote {}", a.csv),
        Err(e) => println!("\ncould not write {}: {e}", a.csv),
    }
    let title = a.title.clone().unwrap_or_else(|| format!("wgkernels bench: {} ({:?}, {})", caps.adapter_name, caps.backend, caps.driver_info));
    match chart::write_svg(&csv, &title, &a.svg) {
        Ok(n) => println!("wrote {} ({n} bars)", a.svg),
        Err(e) => println!("could not write {}: {e}", a.svg),
    }
    if failures > 0 {
        eprintln!("{failures} bench cases failed their correctness check");
        std::process::exit(1);
    }
}

/// The SVG chart: one horizontal bar per (kernel, case, variant) row of the bench CSV, GB/s of the
/// single-dispatch time, coloured by variant, and the copy kernel's GB/s as a vertical line.
mod chart {
    use plotters::prelude::*;

    pub struct Row {
        pub label: String,
        pub variant: String,
        pub gbs: f64,
    }

    /// Parse the bench CSV (header `kernel,case,variant,bytes,copies,single_us,batched_us,gb_s,...`).
    /// Returns the rows and the copy kernel's GB/s (the `copy` row), if present.
    pub fn parse(text: &str) -> Result<(Vec<Row>, Option<f64>), String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Vec<&str> = lines.next().ok_or("empty CSV")?.split(',').collect();
        let col = |name: &str| header.iter().position(|h| h.trim() == name).ok_or(format!("CSV has no `{name}` column"));
        let (ck, cc, cv, cg) = (col("kernel")?, col("case")?, col("variant")?, col("gb_s")?);
        let ncols = header.len();
        let (mut rows, mut copy) = (Vec::new(), None);
        for line in lines {
            let mut f: Vec<&str> = line.split(',').collect();
            // A case name holding commas: rejoin the surplus into the case column.
            let extra = f.len().saturating_sub(ncols);
            let case = f[cc..=cc + extra].join(",");
            f.splice(cc..=cc + extra, [""]);
            let get = |i: usize| f.get(i).copied().unwrap_or("").trim();
            let Ok(gbs) = get(cg).parse::<f64>() else { continue };
            if get(ck) == "copy" {
                copy = Some(gbs);
                continue;
            }
            rows.push(Row { label: format!("{} {}", get(ck), case.trim()), variant: get(cv).to_string(), gbs });
        }
        Ok((rows, copy))
    }

    fn colour(variant: &str) -> RGBColor {
        match variant {
            "portable" => RGBColor(86, 140, 200),
            "subgroup" => RGBColor(232, 140, 50),
            "native" => RGBColor(90, 170, 90),
            _ => RGBColor(140, 140, 140),
        }
    }

    fn short(s: &str, n: usize) -> String {
        if s.chars().count() <= n {
            s.to_string()
        } else {
            s.chars().take(n - 1).collect::<String>() + "…"
        }
    }

    /// Draw the chart of `csv` into `path`; returns the number of bars.
    pub fn write_svg(csv: &str, title: &str, path: &str) -> Result<usize, String> {
        let (rows, copy) = parse(csv)?;
        if rows.is_empty() {
            return Err("no rows with GB/s in the CSV".into());
        }
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
        let (row_h, top, bottom, left) = (15u32, 60u32, 50u32, 430u32);
        let n = rows.len();
        let (w, h) = (1200u32, top + bottom + row_h * n as u32);
        let xmax = rows.iter().map(|r| r.gbs).chain(copy).fold(1.0, f64::max) * 1.1;
        let root = SVGBackend::new(path, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin_top(28)
            .margin_right(20)
            .x_label_area_size(bottom - 10)
            .y_label_area_size(left)
            .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .light_line_style(WHITE)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("GB/s (bytes the kernel must move / single-dispatch time)")
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(e)?;
        // Row i from the top: y in [n - i - 1, n - i].
        let y0 = |i: usize| (n - i - 1) as f64;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| Rectangle::new([(0.0, y0(i) + 0.15), (r.gbs, y0(i) + 0.85)], colour(&r.variant).filled()))).map_err(e)?;
        let label_style = TextStyle::from(("sans-serif", 10).into_font()).color(&BLACK);
        let value_style = TextStyle::from(("sans-serif", 9).into_font()).color(&RGBColor(60, 60, 60));
        for (i, r) in rows.iter().enumerate() {
            let (_, py) = chart.backend_coord(&(0.0, y0(i) + 0.5));
            root.draw(&Text::new(short(&format!("{} [{}]", r.label, r.variant), 80), (8, py - 6), label_style.clone())).map_err(e)?;
            let (px, _) = chart.backend_coord(&(r.gbs, 0.0));
            root.draw(&Text::new(format!("{:.0}", r.gbs), (px + 3, py - 5), value_style.clone())).map_err(e)?;
        }
        if let Some(c) = copy {
            chart.draw_series(LineSeries::new([(c, 0.0), (c, n as f64)], RED.stroke_width(2))).map_err(e)?;
            let (px, py) = chart.backend_coord(&(c, n as f64));
            root.draw(&Text::new(format!("copy kernel {c:.0} GB/s"), (px - 150, py - 14), TextStyle::from(("sans-serif", 11).into_font()).color(&RED))).map_err(e)?;
        }
        // Legend.
        let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
        variants.dedup();
        variants.sort();
        variants.dedup();
        for (i, v) in variants.iter().enumerate() {
            let x = 10 + 100 * i as i32;
            root.draw(&Rectangle::new([(x, 30), (x + 12, 42)], colour(v).filled())).map_err(e)?;
            root.draw(&Text::new(v.to_string(), (x + 16, 31), label_style.clone())).map_err(e)?;
        }
        root.present().map_err(e)?;
        Ok(n)
    }
}
