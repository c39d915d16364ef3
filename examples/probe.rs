//! Capability probe: adapter, features, limits, the variant chosen per kernel (and why the
//! others were not), then a small Q4_K GEMV checked against the CPU reference.
//!
//!   cargo run --release --example probe
//!   WGKERNELS_VARIANT=portable cargo run --release --example probe

use wgkernels::formats::{self, gguf::GgmlType};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::suite::Rng;
use wgkernels::{reference, Context, ContextOptions};

fn main() -> wgkernels::Result<()> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("{}", wgkernels::probe_report(&ctx));

    let (n, k) = (1000, 4096);
    let f = &formats::q4k::FORMAT;
    let mut rng = Rng::new(Rng::fresh_seed());
    let bytes = (f.random_blocks)(&mut fastrand::Rng::with_seed(u64::from(rng.u32(u32::MAX))), n * k / f.block_weights);
    let (mut wv, mut mv) = (vec![0f32; n * k], vec![0f64; n * k]);
    (f.dequantize)(&bytes, &mut wv);
    (f.magnitudes)(&bytes, &mut mv);
    let xs = rng.uniform_vec(k, -1.0, 1.0);
    let w = WeightMatrix::upload(&ctx, GgmlType::Q4_K, n, k, &bytes)?;
    let x = ctx.upload(&xs)?;
    let y = ctx.alloc::<f32>(n)?;
    let mut b = ctx.batch();
    matmul::gemv(&mut b, &w, &x, &y)?;
    b.run()?;
    let got = ctx.read(&y)?;
    let (want, mag) = reference::gemv(n, k, |r, c| wv[r * k + c] as f64, |r, c| mv[r * k + c], &xs);
    let err = got.iter().zip(&want).zip(&mag).map(|((g, w), m)| (*g as f64 - w).abs() / m).fold(0.0, f64::max);
    let variant = ctx.variant_for(&matmul::kernel_infos(f).gemv)?;
    println!("Q4_K GEMV check ({variant}, n={n} k={k}): normalised error {err:.2e} -> {}", if err < 1e-5 { "OK" } else { "WRONG" });
    if err >= 1e-5 {
        std::process::exit(1);
    }
    Ok(())
}
