//! # wgkernels
//!
//! LLM inference kernels on wgpu: GEMV and GEMM over the common GGUF weight formats (F32, F16,
//! BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, with f32 or int8 activations), RoPE with its
//! scalings, flash-attention prefill and split-K decode, TurboQuant KV-cache compression and the
//! elementwise glue of a decode step; a GGUF reader ([`formats::gguf`]) and a model runner
//! ([`model`]: `llama`, `qwen2`). A capability probe picks, per adapter, the fastest variant
//! (Portable WGSL, Subgroup WGSL, Native MSL on Metal, cooperative-matrix WGSL) that is correct
//! there ([`probe_report`] says which and why).
//!
//! Everything is recorded into a [`Batch`] (many dispatches, one submit) on a [`Context`]
//! (the device, its queue and its capabilities; [`Context::from_device`] wraps an application's
//! own device, [`device_descriptor`] creates one with everything the kernels use).
//! Every fallible call returns a [`Result`]; shapes, lengths and limits are checked before
//! anything is recorded.
//!
//! The examples below run in CI (`cargo test --doc`) on a CPU adapter (lavapipe).
//!
//! ## A quantised matrix times a vector ([`kernels::matmul`])
//!
//! ```
//! use wgkernels::formats::gguf::GgmlType;
//! use wgkernels::kernels::matmul::{self, WeightMatrix};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> wgkernels::Result<()> {
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! // A 2 x 64 Q8_0 matrix from its GGUF block bytes: per 32 weights, an f16 scale (0.5 here)
//! // and 32 int8 codes (row r: c - 16 + r for c = 0..32).
//! let (n, k) = (2, 64);
//! let mut bytes = Vec::new();
//! for r in 0..n {
//!     for _block in 0..k / 32 {
//!         bytes.extend_from_slice(&0x3800u16.to_le_bytes());
//!         bytes.extend((0..32).map(|c| (c - 16 + r as i8) as u8));
//!     }
//! }
//! let w = WeightMatrix::upload(&ctx, GgmlType::Q8_0, n, k, &bytes)?;
//! let x = ctx.upload(&vec![1.0f32; k])?;
//! let y = ctx.alloc::<f32>(n)?;
//! let mut batch = ctx.batch();
//! matmul::matmul(&mut batch, &w, &x, &y, 1)?; // one row of x: a GEMV (more rows: a GEMM)
//! batch.run()?;
//! assert_eq!(ctx.read(&y)?, [-16.0, 16.0]);
//! # Ok(()) }
//! ```
//!
//! ## A tensor of a GGUF file ([`formats::gguf`])
//!
//! ```
//! use wgkernels::formats::{self, gguf::GgufFile};
//! use wgkernels::kernels::matmul::{self, WeightMatrix};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Reads the file into memory; `unsafe GgufFile::open_mapped` maps it instead (see its contract).
//! let file = GgufFile::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/q4k_golden.gguf"))?;
//! let info = &file.tensors()[0];
//! println!("{}: {:?} {:?}, {} metadata keys", info.name, info.ggml_type, info.dims, file.metadata().len());
//! // On the CPU: the first row, dequantised as gguf-py does.
//! let k = info.dims[0] as usize;
//! let mut row = vec![0f32; k];
//! let row_bytes = file.tensor_data(info)?.len() / info.dims[1] as usize;
//! formats::dequantize(info.ggml_type, &file.tensor_data(info)?[..row_bytes], &mut row)?;
//! // On the GPU: the whole tensor as a weight matrix, times a vector of ones.
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! let w = WeightMatrix::from_gguf(&ctx, &file, &info.name)?;
//! let (x, y) = (ctx.upload(&vec![1.0f32; w.k()])?, ctx.alloc::<f32>(w.n())?);
//! let mut batch = ctx.batch();
//! matmul::gemv(&mut batch, &w, &x, &y)?;
//! batch.run()?;
//! let (gpu, cpu) = (ctx.read(&y)?[0], row.iter().map(|&v| v as f64).sum::<f64>());
//! assert!((gpu as f64 - cpu).abs() <= 1e-4 * row.iter().map(|v| v.abs() as f64).sum::<f64>());
//! # Ok(()) }
//! ```
//!
//! ## A model ([`model`])
//!
//! The bundled fixture is a two-layer `llama` with **random weights** (made by the repository's
//! tools, so that tests run in seconds): its text is gibberish by design. Its quantised files
//! (Q4_K_M, Q8_0) round each weight, so after a few tokens their greedy choices part from the
//! f16 file's wherever two logits of random weights lie closer than that rounding moves them;
//! `tests/model.rs` compares each file's logits with llama.cpp's for the same file instead.
//!
//! ```
//! use wgkernels::model::{tokenizer::Tokenizer, Model, Sampler, SamplerConfig, Session, SessionOptions};
//! use wgkernels::{Context, ContextOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models/llama-tiny-q8_0.gguf");
//! let model = Model::open(&ctx, path, &mut |_progress| {})?;
//! let tok = Tokenizer::from_gguf(&model.file)?;
//! let opts = SessionOptions { context: 32, int8_activations: false, ..Default::default() };
//! let mut session = Session::new(&ctx, &model, opts)?;
//! let mut sampler = Sampler::new(SamplerConfig::default())?; // greedy
//! let mut logits = session.prefill(&ctx, &model, &tok.encode("Once upon a time", true)?)?;
//! let mut text = tok.decoder(false);
//! for _ in 0..4 {
//!     let next = sampler.sample(&logits)?;
//!     print!("{}", text.push(next)?);
//!     if tok.is_eog(next) {
//!         break;
//!     }
//!     logits = session.decode(&ctx, &model, next)?;
//! }
//! assert_eq!(session.kv().pos(), session.kv().capacity() - session.kv().remaining());
//! # Ok(()) }
//! ```

/// Declares an item of the test kit: `pub` with the `testkit` feature, crate-private without it
/// (where the Native self-check, which runs in every build, may still use it).
macro_rules! testkit_pub {
    ($(#[$m:meta])* pub $($item:tt)*) => {
        #[cfg(feature = "testkit")]
        $(#[$m])* pub $($item)*
        #[cfg(not(feature = "testkit"))]
        #[allow(dead_code, unused_imports)]
        $(#[$m])* pub(crate) $($item)*
    };
}
pub(crate) use testkit_pub;

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
pub use context::{device_descriptor, wanted_features, wanted_limits, Context, ContextOptions};
pub use error::{Error, Result};
pub use tuning::{GemvTuning, Tuning};
pub use wgpu;

/// The probe report: capabilities plus, per kernel, the chosen variant and why the others
/// were not chosen.
pub fn probe_report(ctx: &Context) -> String {
    let mut s = ctx.caps().report();
    s += &format!("\npolicy       {:?}\n", ctx.options().policy);
    #[cfg(feature = "testkit")]
    for line in ctx.probe_native(&kernels::registry()) {
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
