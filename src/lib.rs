//! # wgkernels
//!
//! LLM inference kernels on wgpu: quantised GEMV/GEMM (INT4, INT8), with a capability probe
//! that picks, per adapter, the fastest variant (Portable WGSL, Subgroup WGSL, Native MSL) that
//! is correct there.
//!
//! ```no_run
//! use wgkernels::{Context, ContextOptions, kernels::int4};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! let (n, k) = (256, 512);
//! let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
//! let weights = int4::Int4Matrix::alloc(&ctx, n, k, 32, int4::Int4Mode::Signed)?;
//! let src = ctx.upload(&w)?;
//! let x = ctx.upload(&vec![1.0f32; k])?;
//! let y = ctx.alloc::<f32>(n)?;
//! let mut batch = ctx.batch();
//! int4::quantize(&mut batch, &src, &weights)?;
//! int4::gemv(&mut batch, &weights, &x, &y)?;
//! batch.run()?;
//! let out = ctx.read(&y)?;
//! # Ok(()) }
//! ```

pub mod batch;
pub mod buffer;
pub mod caps;
pub mod context;
pub mod error;
pub mod formats;
pub mod kernels;
pub mod model;
pub mod native;
pub mod pipeline;
// The CPU references and the case vocabulary: public with the `testkit` feature; otherwise
// crate-private and reduced to what the Native self-check runs (see `native.rs`).
#[cfg(feature = "testkit")]
pub mod reference;
#[cfg(not(feature = "testkit"))]
pub(crate) mod reference;
#[cfg(feature = "testkit")]
pub mod shaders;
#[cfg(feature = "testkit")]
pub mod suite;
#[cfg(not(feature = "testkit"))]
pub(crate) mod suite;
#[cfg(feature = "testkit")]
pub mod timing;
pub mod tuning;

pub use batch::{Batch, Recorded, Submitted};
pub use buffer::GpuBuffer;
pub use caps::{Caps, KernelInfo, Variant, VariantPolicy};
pub use context::{Context, ContextOptions};
pub use error::{Error, Result};
pub use tuning::{GemvTuning, Tuning};
pub use wgpu;

/// The probe report: capabilities plus, per kernel, the chosen variant and why the others
/// were not chosen.
pub fn probe_report(ctx: &Context) -> String {
    let mut s = ctx.caps().report();
    s += &format!("\npolicy       {:?}\n", ctx.options().policy);
    #[cfg(feature = "testkit")]
    for line in ctx.probe_native() {
        s += &format!("native build {line}\n");
    }
    s += "\nkernel variants:\n";
    for info in kernels::infos() {
        s += "  ";
        s += &ctx.explain(info);
        s += "\n";
    }
    s
}
