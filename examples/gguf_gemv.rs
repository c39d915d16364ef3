//! Q4_K GEMV on a real GGUF file: lists the tensors, runs the fused Q4_K GEMV on the chosen (or
//! the largest) Q4_K tensor with a random input, checks it against the CPU reference and prints
//! µs and GB/s (over the 144 bytes per 256 weights read, plus x and y).
//!
//!   cargo run --release --example gguf_gemv -- FILE.gguf [TENSOR]
//!   cargo run --release --example gguf_gemv            # the committed tests/data/q4k_golden.gguf
//!   WGKERNELS_VARIANT=portable cargo run --release --example gguf_gemv -- FILE.gguf

use wgkernels::formats::gguf::{GgmlType, GgufFile};
use wgkernels::formats::q4k::{self, QK_K};
use wgkernels::kernels::q4k::{self as gpu, Q4kMatrix};
use wgkernels::suite::{compare, Rng};
use wgkernels::timing::measure;
use wgkernels::{Context, ContextOptions, Error};

fn main() -> wgkernels::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/q4k_golden.gguf").to_string());
    let wanted = args.next();
    let file = GgufFile::open(&path).map_err(|e| Error::Format(format!("{path}: {e}")))?;
    println!("{path}: GGUF v{}, {} metadata keys, {} tensors", file.version(), file.metadata().len(), file.tensors().len());
    for t in file.tensors() {
        let bytes = t.n_bytes.map_or("?".to_string(), |b| b.to_string());
        println!("  {:<40} {:<8} {:<24} {:>12} bytes", t.name, format!("{:?}", t.ggml_type), format!("{:?}", t.dims), bytes);
    }
    let info = match &wanted {
        Some(name) => file.tensor(name).ok_or_else(|| Error::Argument(format!("no tensor named {name:?}")))?,
        None => {
            file.tensors().iter().filter(|t| t.ggml_type == GgmlType::Q4_K).max_by_key(|t| t.n_elements).ok_or_else(|| Error::Argument("the file has no Q4_K tensor".into()))?
        }
    };
    if info.ggml_type != GgmlType::Q4_K {
        return Err(Error::Argument(format!("tensor {:?} is {:?}, not Q4_K", info.name, info.ggml_type)));
    }

    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    let variant = ctx.variant_for(&gpu::GEMV)?;
    let w = Q4kMatrix::from_gguf(&ctx, &file, &info.name)?;
    let (n, k) = (w.n(), w.k());
    println!("\n{} on {} ({variant}): n = {n}, k = {k}", info.name, ctx.caps().adapter_name);

    let mut rng = Rng::new(Rng::fresh_seed());
    let xs = rng.uniform_vec(k, -1.0, 1.0);
    let x = ctx.upload(&xs)?;
    let y = ctx.alloc::<f32>(n)?;
    let mut b = ctx.batch();
    gpu::gemv(&mut b, &w, &x, &y)?;
    b.run()?;
    let got = ctx.read(&y)?;

    // CPU reference, row by row: f64 dot of the exact dequantised weights, and the operand
    // magnitudes the error is normalised by.
    let blocks = q4k::blocks_from_bytes(file.tensor_data(info).map_err(|e| Error::Format(e.to_string()))?).map_err(|e| Error::Format(e.to_string()))?;
    let bpr = k / QK_K;
    let (mut yref, mut ymag) = (vec![0f64; n], vec![0f64; n]);
    for r in 0..n {
        let row = &blocks[r * bpr..(r + 1) * bpr];
        let (wv, mv) = (q4k::dequantize_row(row), gpu::operand_magnitudes(row));
        for c in 0..k {
            yref[r] += wv[c] as f64 * xs[c] as f64;
            ymag[r] += mv[c] * (xs[c] as f64).abs();
        }
    }
    let check = compare(&got, &yref, &ymag, 1e-5);
    println!("check vs CPU: {} -> {}", check.summary(), if check.passed() { "ok" } else { "WRONG" });

    let t = measure(&ctx, 50, &|b, _| gpu::gemv(b, &w, &x, &y))?;
    let bytes = w.bytes() + 4 * (k + n) as u64;
    println!(
        "GEMV: {:.1} µs single ({:.1} GB/s), {:.1} µs per dispatch back to back ({:.1} GB/s); {} ({} bytes per call)",
        t.single_us,
        bytes as f64 / (t.single_us * 1e3),
        t.batched_us,
        bytes as f64 / (t.batched_us * 1e3),
        if t.gpu_timestamps { "GPU timestamps" } else { "wall clock" },
        bytes
    );
    if !check.passed() {
        std::process::exit(1);
    }
    Ok(())
}
