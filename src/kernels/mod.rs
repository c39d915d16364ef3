//! Kernel families. Each family is one module (plus its WGSL/MSL sources) exposing its public
//! API and the [`KernelInfo`] of each kernel (listed by [`infos`], which the probe report
//! walks). With the `testkit` feature a family also has a `cases` module whose `kernels()` list
//! of `suite::Kernel`s the test harness, the bench and the shader checks iterate over
//! (`registry`): adding a family = adding a module, its infos and one line in each list.
//! A family with a Native variant also has a `check` module, built in every build: the cases
//! its Native self-check runs (listed by `native_checks`), which its test grid reuses.

pub mod attention;
pub mod elementwise;
pub mod int4;
pub mod interleave;
pub mod matmul;
pub mod q8;
pub mod rope;
pub(crate) mod splitk;
pub mod turboquant;

use crate::caps::KernelInfo;

/// The [`KernelInfo`] of every kernel of every family, in the order the probe reports them.
pub fn infos() -> Vec<&'static KernelInfo> {
    let mut v = vec![
        &int4::QUANTIZE,
        &q8::QUANTIZE,
        &q8::NORM_QUANTIZE,
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

/// The cases the Native self-check runs for a kernel ([`crate::native`]), by kernel name; `None`
/// for a kernel without a Native variant (or not of this crate). Every kernel of [`infos`] with a
/// Native variant has an entry (a unit test below checks it).
pub(crate) fn native_checks(kernel: &str) -> Option<Vec<Box<dyn crate::suite::Case>>> {
    type Cases = fn() -> Vec<Box<dyn crate::suite::Case>>;
    let table: [(&KernelInfo, Cases); 6] = [
        (&int4::QUANTIZE, int4::quantize_checks),
        (&turboquant::QUANTIZE, turboquant::quantize_checks),
        (&turboquant::DEQUANTIZE, turboquant::dequantize_checks),
        (&turboquant::ATTENTION, turboquant::attention_checks),
        (&attention::DECODE, attention::decode_checks),
        (&attention::PREFILL, attention::prefill_checks),
    ];
    table.iter().find(|(info, _)| info.name == kernel).map(|(_, cases)| cases()).or_else(|| matmul::check::gemv_checks(kernel)).or_else(|| matmul::check::gemm_checks(kernel))
}

/// Every kernel of every family, with its test and bench cases.
#[cfg(feature = "testkit")]
pub fn registry() -> Vec<&'static dyn crate::suite::Kernel> {
    let mut v = Vec::new();
    v.extend(int4::kernels());
    v.extend(matmul::kernels());
    v.extend(q8::kernels());
    v.extend(turboquant::kernels());
    v.extend(rope::kernels());
    v.extend(attention::kernels());
    v.extend(elementwise::kernels());
    v
}

/// Every pipeline of every kernel, plus the GEMMs' split-K reduce, the bench's copy, busy and
/// read kernels and the model runner's glue kernels (for the offline shader checks).
#[cfg(feature = "testkit")]
pub fn all_pipelines() -> Vec<(String, crate::pipeline::PipelineDesc)> {
    let mut v: Vec<_> = registry().iter().flat_map(|k| k.pipelines()).collect();
    v.extend(crate::suite::describe_all([splitk::SplitReduce]));
    v.extend(crate::timing::pipeline_descs(&crate::caps::Caps::nominal()));
    v.extend(crate::model::ops::pipelines());
    v
}

#[cfg(test)]
mod tests {
    use crate::caps::Variant;

    /// Every kernel with a Native variant has self-check cases, and only those kernels do: a
    /// Native kernel added without them would otherwise be checked by nothing at run time.
    #[test]
    fn every_native_kernel_has_self_check_cases() {
        for info in super::infos() {
            let native = info.variants.contains(&Variant::Native);
            match super::native_checks(info.name) {
                Some(cases) => {
                    assert!(native, "{}: self-check cases but no Native variant", info.name);
                    assert!(!cases.is_empty(), "{}: an empty self-check list", info.name);
                }
                None => assert!(!native, "{}: a Native variant without self-check cases", info.name),
            }
        }
        assert!(super::native_checks("not_a_kernel").is_none());
    }

    #[cfg(feature = "testkit")]
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
