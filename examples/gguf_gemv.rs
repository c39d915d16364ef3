//! GEMV on a real GGUF file, any supported weight format: lists the tensors, uploads the chosen
//! tensor (or, without one, every matrix tensor of a supported format) as a
//! `kernels::matmul::WeightMatrix`, runs the GEMV on a random input, checks it against the CPU
//! (the format's dequantised weights, f64 dot, error normalised by the operand magnitudes) and,
//! for a chosen tensor, prints µs and GB/s.
//!
//!   cargo run --release --example gguf_gemv -- FILE.gguf [TENSOR]
//!   cargo run --release --example gguf_gemv            # the committed tests/data/q4k_golden.gguf

use wgkernels::formats::gguf::{GgufFile, TensorInfo};
use wgkernels::formats::{self, format_of};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::suite::{compare, Check, Rng};
use wgkernels::timing::measure;
use wgkernels::{Context, ContextOptions, Error, Result};

/// Upload `info`, run the GEMV on random x, check it against the CPU row by row.
fn check_tensor(ctx: &Context, file: &GgufFile, info: &TensorInfo, rng: &mut Rng, time: bool) -> Result<Check> {
    let w = WeightMatrix::from_gguf_info(ctx, file, info)?;
    let (n, k) = (w.n(), w.k());
    let xs = rng.uniform_vec(k, -1.0, 1.0);
    let x = ctx.upload(&xs)?;
    let y = ctx.alloc::<f32>(n)?;
    let mut b = ctx.batch();
    matmul::gemv(&mut b, &w, &x, &y)?;
    b.run()?;
    let got = ctx.read(&y)?;

    let f = w.format();
    let data = file.tensor_data(info).map_err(|e| Error::Format(e.to_string()))?;
    let row_bytes = k / f.block_weights * f.block_bytes;
    let (mut wv, mut mv) = (vec![0f32; k], vec![0f64; k]);
    let (mut yref, mut ymag) = (vec![0f64; n], vec![0f64; n]);
    for r in 0..n {
        let row = &data[r * row_bytes..(r + 1) * row_bytes];
        formats::dequantize(info.ggml_type, row, &mut wv).map_err(|e| Error::Format(e.to_string()))?;
        (f.magnitudes)(row, &mut mv);
        for c in 0..k {
            yref[r] += wv[c] as f64 * xs[c] as f64;
            ymag[r] += mv[c] * (xs[c] as f64).abs();
        }
    }
    let check = compare(&got, &yref, &ymag, 1e-5);
    println!("{:<40} {:<5} n = {n:>6}, k = {k:>6}, {} chunk(s): {} -> {}", info.name, f.name, w.chunks(), check.summary(), if check.passed() { "ok" } else { "WRONG" });
    if time {
        let t = measure(ctx, 50, &|b, _| matmul::gemv(b, &w, &x, &y))?;
        let bytes = w.bytes() + 4 * (k + n) as u64;
        println!(
            "GEMV: {:.1} µs single ({:.1} GB/s), {:.1} µs per dispatch back to back ({:.1} GB/s); {} ({bytes} bytes per call)",
            t.single_us,
            bytes as f64 / (t.single_us * 1e3),
            t.batched_us,
            bytes as f64 / (t.batched_us * 1e3),
            if t.gpu_timestamps { "GPU timestamps" } else { "wall clock" },
        );
    }
    Ok(check)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/q4k_golden.gguf").to_string());
    let wanted = args.next();
    let file = GgufFile::open(&path).map_err(|e| Error::Format(format!("{path}: {e}")))?;
    println!("{path}: GGUF v{}, {} metadata keys, {} tensors", file.version(), file.metadata().len(), file.tensors().len());
    for t in file.tensors() {
        let bytes = t.n_bytes.map_or("?".to_string(), |b| b.to_string());
        println!("  {:<40} {:<8} {:<24} {:>12} bytes", t.name, format!("{:?}", t.ggml_type), format!("{:?}", t.dims), bytes);
    }
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("\non {}", ctx.caps().adapter_name);
    let mut rng = Rng::new(Rng::fresh_seed());
    let mut failed = 0;
    match &wanted {
        Some(name) => {
            let info = file.tensor(name).ok_or_else(|| Error::Argument(format!("no tensor named {name:?}")))?;
            failed += !check_tensor(&ctx, &file, info, &mut rng, true)?.passed() as usize;
        }
        None => {
            for info in file.tensors().iter().filter(|t| t.dims.len() >= 2 && format_of(t.ggml_type).is_ok()) {
                match check_tensor(&ctx, &file, info, &mut rng, false) {
                    Ok(c) => failed += !c.passed() as usize,
                    // Shapes the family does not take (e.g. k % 4 != 0 for the float formats).
                    Err(e @ Error::Shape(_)) => println!("{:<40} skipped: {e}", info.name),
                    Err(e) => {
                        println!("{:<40} error: {e}", info.name);
                        failed += 1;
                    }
                }
            }
        }
    }
    if failed > 0 {
        println!("{failed} tensor(s) failed");
        std::process::exit(1);
    }
    Ok(())
}
