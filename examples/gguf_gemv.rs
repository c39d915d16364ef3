//! GEMV on a real GGUF file, any supported weight format: lists the tensors, uploads the chosen
//! tensor (or, without one, every matrix tensor of a supported format) as a
//! `kernels::matmul::WeightMatrix`, runs the GEMV on a random input, checks it against the CPU
//! (the format's dequantised weights, f64 dot, error normalised by the operand magnitudes) and,
//! for a chosen tensor, prints µs and GB/s.
//!
//!   cargo run --release --example gguf_gemv -- FILE.gguf [TENSOR]
//!   cargo run --release --example gguf_gemv            # the committed tests/data/q4k_golden.gguf
//!
//! It uses only the product API (no test kit): copy it into an application as it is.

use std::time::Instant;
use wgkernels::formats::gguf::{GgufFile, TensorInfo};
use wgkernels::formats::{self, format_of};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::{Context, ContextOptions, Error};

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `len` values in [-1, 1) from a small xorshift generator seeded by `seed`.
fn random_input(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Upload `info`, run the GEMV on random x, check it against the CPU row by row: the largest
/// error normalised by `sum |w| |x|` of its row must stay below 1e-5. Returns whether it did.
fn check_tensor(ctx: &Context, file: &GgufFile, info: &TensorInfo, seed: u64, time: bool) -> wgkernels::Result<bool> {
    let w = WeightMatrix::from_gguf_info(ctx, file, info)?;
    let (n, k) = (w.n(), w.k());
    let xs = random_input(k, seed);
    let x = ctx.upload(&xs)?;
    let y = ctx.alloc::<f32>(n)?;
    let mut b = ctx.batch();
    matmul::gemv(&mut b, &w, &x, &y)?;
    b.run()?;
    let got = ctx.read(&y)?;

    let f = w.format();
    let data = file.tensor_data(info)?;
    let row_bytes = k / f.block_weights * f.block_bytes;
    let (mut wv, mut mv) = (vec![0f32; k], vec![0f64; k]);
    let mut err = 0f64;
    for (r, row) in data.chunks_exact(row_bytes).take(n).enumerate() {
        formats::dequantize(info.ggml_type, row, &mut wv)?;
        (f.magnitudes)(row, &mut mv);
        let (mut yref, mut ymag) = (0f64, 0f64);
        for c in 0..k {
            yref += wv[c] as f64 * xs[c] as f64;
            ymag += mv[c] * (xs[c] as f64).abs();
        }
        err = err.max((got[r] as f64 - yref).abs() / ymag.max(f64::MIN_POSITIVE));
        if !got[r].is_finite() {
            err = f64::INFINITY;
        }
    }
    let ok = err <= 1e-5;
    println!("{:<40} {:<5} n = {n:>6}, k = {k:>6}, {} chunk(s): max error {err:.2e} -> {}", info.name, f.name, w.chunks(), if ok { "ok" } else { "WRONG" });
    if time {
        // Wall clock of 50 GEMVs in one submit, after the run above built the pipeline.
        let reps = 50;
        let mut b = ctx.batch();
        for _ in 0..reps {
            matmul::gemv(&mut b, &w, &x, &y)?;
        }
        let t = Instant::now();
        b.run()?;
        let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        let bytes = w.bytes() + 4 * (k + n) as u64;
        println!("GEMV: {us:.1} µs per dispatch back to back, wall clock ({:.1} GB/s; {bytes} bytes per call)", bytes as f64 / (us * 1e3));
    }
    Ok(ok)
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/q4k_golden.gguf").to_string());
    let wanted = args.next();
    let file = GgufFile::open(&path).map_err(|e| format!("{path}: {e}"))?;
    println!("{path}: GGUF v{}, {} metadata keys, {} tensors", file.version(), file.metadata().len(), file.tensors().len());
    for t in file.tensors() {
        let bytes = t.n_bytes.map_or("?".to_string(), |b| b.to_string());
        println!("  {:<40} {:<8} {:<24} {:>12} bytes", t.name, format!("{:?}", t.ggml_type), format!("{:?}", t.dims), bytes);
    }
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("\non {}", ctx.caps().adapter_name);
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut failed = 0;
    match &wanted {
        Some(name) => {
            let info = file.tensor(name).ok_or_else(|| format!("{path}: no tensor named {name:?}"))?;
            failed += !check_tensor(&ctx, &file, info, seed, true)? as usize;
        }
        None => {
            for info in file.tensors().iter().filter(|t| t.dims.len() >= 2 && format_of(t.ggml_type).is_ok()) {
                match check_tensor(&ctx, &file, info, seed, false) {
                    Ok(ok) => failed += !ok as usize,
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
