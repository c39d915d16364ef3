//! Capability probe: adapter, features, limits, the variant chosen per kernel (and why the
//! others were not), then a small INT4 GEMV checked against the CPU reference.
//!
//!   cargo run --release --example probe
//!   WGKERNELS_VARIANT=portable cargo run --release --example probe

use wgkernels::kernels::int4::{self, Int4Matrix, Int4Mode};
use wgkernels::suite::Rng;
use wgkernels::{reference, Context, ContextOptions};

fn main() -> wgkernels::Result<()> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    println!("{}", wgkernels::probe_report(&ctx));

    let (n, k, g) = (1000, 4099, 128);
    let mut rng = Rng::new(Rng::fresh_seed());
    let host = int4::random_host(&mut rng, n, k, g, Int4Mode::Signed, false);
    let xs = rng.uniform_vec(k, -1.0, 1.0);
    let w = Int4Matrix::upload(&ctx, &host)?;
    let x = ctx.upload(&xs)?;
    let y = ctx.alloc::<f32>(n)?;
    let mut b = ctx.batch();
    int4::gemv(&mut b, &w, &x, &y)?;
    b.run()?;
    let got = ctx.read(&y)?;
    let (want, mag) = reference::gemv(n, k, |r, c| host.value(r, c), |r, c| host.magnitude(r, c), &xs);
    let err = got.iter().zip(&want).zip(&mag).map(|((g, w), m)| (*g as f64 - w).abs() / m).fold(0.0, f64::max);
    let variant = ctx.variant_for(&int4::GEMV)?;
    println!("INT4 GEMV check ({variant}, n={n} k={k} g={g}): normalised error {err:.2e} -> {}", if err < 1e-5 { "OK" } else { "WRONG" });
    if err >= 1e-5 {
        std::process::exit(1);
    }
    Ok(())
}
