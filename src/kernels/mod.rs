//! Kernel families. Each family is one module (plus its WGSL/MSL sources) exposing its public
//! API and the [`KernelInfo`] of each kernel (listed by [`infos`], which the probe report
//! walks). With the `testkit` feature a family also has a `cases` module whose `kernels()` list
//! of `suite::Kernel`s the test harness, the bench and the shader checks iterate over
//! (`registry`): adding a family = adding a module, its infos and one line in each list.

pub mod attention;
pub mod elementwise;
pub mod int4;
pub mod int8;
pub mod interleave;
pub mod matmul;
pub mod q4k;
pub mod q8;
pub mod rope;
pub(crate) mod splitk;
pub mod turboquant;

use crate::caps::KernelInfo;

/// The [`KernelInfo`] of every kernel of every family, in the order the probe reports them.
pub fn infos() -> Vec<&'static KernelInfo> {
    let mut v = vec![
        &int4::GEMV,
        &int4::GEMM,
        &int4::QUANTIZE,
        &int4::DEQUANTIZE,
        &int8::GEMV,
        &q4k::GEMV,
        &q4k::GEMM,
        &q4k::DEQUANTIZE,
        &q8::QUANTIZE,
        &q8::INT4_GEMV,
        &q8::Q4K_GEMV,
        &turboquant::QUANTIZE,
        &turboquant::DEQUANTIZE,
        &turboquant::ATTENTION,
        &rope::TABLE,
        &rope::APPLY,
        &attention::PREFILL,
        &attention::DECODE,
        &elementwise::RMSNORM,
        &elementwise::SILU_GATE,
        &elementwise::ADD,
    ];
    v.extend(matmul::infos());
    v
}

/// Every kernel of every family, with its test and bench cases.
#[cfg(feature = "testkit")]
pub fn registry() -> Vec<&'static dyn crate::suite::Kernel> {
    let mut v = Vec::new();
    v.extend(int4::kernels());
    v.extend(int8::kernels());
    v.extend(q4k::kernels());
    v.extend(matmul::kernels());
    v.extend(q8::kernels());
    v.extend(turboquant::kernels());
    v.extend(rope::kernels());
    v.extend(attention::kernels());
    v.extend(elementwise::kernels());
    v
}

/// Every pipeline of every kernel, plus the bench's copy, busy and read kernels and the model
/// runner's glue kernels (for the offline shader checks).
#[cfg(feature = "testkit")]
pub fn all_pipelines() -> Vec<(String, crate::pipeline::PipelineDesc)> {
    let mut v: Vec<_> = registry().iter().flat_map(|k| k.pipelines()).collect();
    v.extend(crate::timing::pipeline_descs(&crate::caps::Caps::nominal()));
    v.extend(crate::model::ops::pipelines());
    v
}

#[cfg(all(test, feature = "testkit"))]
mod tests {
    /// The probe's list and the test kit's registry name the same kernels, so a family added to
    /// one and not the other fails here.
    #[test]
    fn infos_match_the_registry() {
        let mut infos: Vec<&str> = super::infos().iter().map(|i| i.name).collect();
        let mut registered: Vec<&str> = super::registry().iter().map(|k| k.info().name).collect();
        infos.sort_unstable();
        registered.sort_unstable();
        assert_eq!(infos, registered);
    }
}
