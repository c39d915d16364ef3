//! Running a GGUF model: tokenizer ([`tokenizer::Tokenizer`], from the file's own vocabulary), configuration from the file's metadata ([`Config`]), weights streamed
//! to the GPU ([`Weights`]), a KV cache ([`KvCache`], f16 or TurboQuant), the forward pass
//! ([`Session`]: a prefill chunk or a decode step recorded into one batch) and sampling
//! ([`Sampler`], on the CPU, from the logits or from the GPU's top-k candidates).
//!
//! Chat ([`chat::Chat`]): the file's own chat template, conversations across turns on one
//! session's cache, end-of-generation tokens and stop strings.
//!
//! Architectures: `llama` (Llama 2/3/3.1, Mistral), `qwen2`, `qwen3`, `phi3`, `gemma2` and
//! `gemma3`, one module each
//! in [`arch`]; see also [`config`].
//!
//! ```
//! use wgkernels::{Context, ContextOptions};
//! use wgkernels::model::{tokenizer::Tokenizer, Model, Sampler, SamplerConfig, Session, SessionOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models/llama-tiny-q8_0.gguf");
//! // A memory map instead of a copy: `unsafe { Model::open_mapped(&ctx, path, ..) }`.
//! let model = Model::open(&ctx, path, &mut |_| {})?;
//! let mut session = Session::new(&ctx, &model, SessionOptions { context: 512, ..Default::default() })?;
//! let mut sampler = Sampler::new(SamplerConfig::default())?;
//! let tok = Tokenizer::from_gguf(&model.file)?;
//! let prompt = tok.encode("Once upon a time", true)?;
//! let mut logits = session.prefill(&ctx, &model, &prompt)?;
//! let mut text = tok.decoder(false);
//! for _ in 0..4 {
//!     let next = sampler.sample(&logits)?;
//!     print!("{}", text.push(next)?);
//!     if tok.is_eog(next) {
//!         break;
//!     }
//!     logits = session.decode(&ctx, &model, next)?;
//! }
//! # Ok(()) }
//! ```

pub mod arch;
pub mod chat;
pub mod config;
pub mod error;
pub mod forward;
pub mod kv;
pub mod linear;
pub mod ops;
pub mod sample;
pub mod tokenizer;
pub mod weights;

use linear as mm;

pub use arch::{Arch, Spec};
pub use config::{Config, RopeScalingKind};
pub use error::{ModelError, Result};
pub use forward::{Model, Session, SessionOptions};
pub use kv::{KvCache, KvKind};
pub use sample::{Sampler, SamplerConfig};
pub use weights::{FfnIn, Progress, Weights};

/// The kernels a forward pass of `model` with a `kv` cache records (for reporting the variant
/// chosen for each).
pub fn kernels_used(model: &Model, kv: KvKind) -> Vec<&'static crate::caps::KernelInfo> {
    use crate::kernels::{attention, elementwise, matmul, rope, turboquant};
    let mut v = vec![&elementwise::RMSNORM];
    for f in model.weights.formats() {
        let k = matmul::kernel_infos(f);
        v.extend([&k.gemv, &k.gemv_q8, &k.gemm]);
        if k.integer_dot {
            v.push(&k.gemm_q8);
        }
    }
    v.extend([
        &crate::kernels::q8::QUANTIZE,
        &crate::kernels::q8::NORM_QUANTIZE,
        &crate::kernels::q8::MERGE_QUANTIZE,
        &ops::BIAS_ADD,
        &attention::PREFILL,
        &elementwise::ADD,
        &elementwise::SILU_GATE,
        &ops::GLU_PAIRS,
        &ops::COPY_ROW,
        &ops::SPLIT_QKV,
        &ops::ARGMAX,
        &ops::TOP_K,
        &ops::DRAW,
    ]);
    let c = &model.config;
    if c.glu == arch::Glu::GeluTanh {
        v.push(&elementwise::GELU_GATE);
    }
    if model.weights.layers.first().is_some_and(|l| l.post_norms.is_some()) {
        v.extend([&elementwise::RMSNORM_ADD, &crate::kernels::q8::POST_NORM]);
    }
    if c.qk_norm {
        v.push(&elementwise::RMSNORM_QK);
    }
    if c.final_softcap.is_some() {
        v.push(&elementwise::SOFTCAP);
    }
    if c.embed_scale.is_some() {
        v.push(&elementwise::SCALE);
    }
    match kv {
        KvKind::F16 => v.extend([&ops::KV_STORE, &attention::DECODE]),
        KvKind::TurboQuant => v.extend([&rope::APPLY, &turboquant::QUANTIZE, &turboquant::DEQUANTIZE, &turboquant::ATTENTION]),
    }
    v
}
