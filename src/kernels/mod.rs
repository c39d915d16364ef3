//! Kernel families. Each family is one module (plus its WGSL/MSL sources) exposing its public
//! API and the [`KernelInfo`] of each kernel (listed by [`infos`], which the probe report
//! walks). With the `testkit` feature a family also has a `cases` module whose `kernels()` list
//! of `suite::Kernel`s the test harness, the bench and the shader checks iterate over
//! (`registry`): adding a family = adding a module, its infos and one line in each list.
//! A family with a Native variant also has a `check` module, built in every build: the cases
//! its Native self-check runs (named by each Native kernel's [`KernelInfo`]), which its test
//! grid reuses.

/// A params struct, the Rust twin of its kernels' WGSL uniform struct (binding 0): `#[repr(C)]`,
/// `Pod`, and (test kit) the list of its fields, `FIELDS` (name, type, byte offset), which a unit
/// test below compares field by field with the WGSL struct as naga reflects it. Field names are
/// the WGSL's (padding included: `_p0`, `_p1`, ...). Families use it by name; code outside
/// `kernels` imports `crate::kernels::params_struct`. Each family lists its structs with the
/// pipelines that bind them in its own `params_twins`, which the crate-wide `params_twins` below
/// collects; a second test fails for any WGSL pipeline that no listed struct covers.
macro_rules! params_struct {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        struct $name {
            $($(#[$fmeta])* $field: $ty),*
        }
        #[cfg(all(test, feature = "testkit"))]
        impl $name {
            /// (name, type, byte offset) of each field, in order.
            pub(crate) const FIELDS: &'static [(&'static str, &'static str, usize)] = &[$((stringify!($field), stringify!($ty), std::mem::offset_of!($name, $field))),*];
        }
    };
}
pub(crate) use params_struct;

/// The [`ParamsTwin`] of the params struct `$params` (declared with `params_struct!`) and the
/// pipelines `$pipelines` that bind it.
#[cfg(all(test, feature = "testkit"))]
macro_rules! params_twin {
    ($params:ident, $pipelines:expr) => {
        crate::kernels::ParamsTwin {
            rust: concat!(module_path!(), "::", stringify!($params)),
            size: std::mem::size_of::<$params>(),
            fields: $params::FIELDS,
            pipelines: $pipelines,
        }
    };
}
#[cfg(all(test, feature = "testkit"))]
pub(crate) use params_twin;

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
        &q8::MERGE_QUANTIZE,
        &q8::POST_NORM,
        &turboquant::QUANTIZE,
        &turboquant::DEQUANTIZE,
        &turboquant::ATTENTION,
        &rope::TABLE,
        &rope::APPLY,
        &attention::PREFILL,
        &attention::DECODE,
        &elementwise::RMSNORM,
        &elementwise::RMSNORM_ADD,
        &elementwise::RMSNORM_QK,
        &elementwise::SILU_GATE,
        &elementwise::GELU_GATE,
        &elementwise::ADD,
        &elementwise::SOFTCAP,
        &elementwise::SCALE,
    ];
    v.extend(matmul::infos());
    v
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
    v.extend(crate::model::ops::kernels());
    v.extend(crate::timing::kernels());
    v
}

/// Every pipeline of every kernel (the model runner's glue kernels and the bench's copy, read and
/// busy kernels among them), plus the GEMMs' split-K reduce (for the offline shader checks).
#[cfg(feature = "testkit")]
pub fn all_pipelines() -> Vec<(String, crate::pipeline::PipelineDesc)> {
    let mut v: Vec<_> = registry().iter().flat_map(|k| k.pipelines()).collect();
    v.extend(crate::suite::describe_all([splitk::SplitReduce]));
    v.extend(crate::suite::describe_all(matmul::wide::shared_pipelines()));
    v
}

/// A Rust params struct and the WGSL pipelines that bind it as their uniform (binding 0).
#[cfg(all(test, feature = "testkit"))]
pub(crate) struct ParamsTwin {
    pub(crate) rust: &'static str,
    pub(crate) size: usize,
    pub(crate) fields: &'static [(&'static str, &'static str, usize)],
    pub(crate) pipelines: Vec<(String, crate::pipeline::PipelineDesc)>,
}

/// Every params struct this crate checks against its WGSL twin (see [`ParamsTwin`]).
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn params_twins() -> Vec<ParamsTwin> {
    let mut v = matmul::params_twins();
    v.push(int4::params_twin());
    v.push(q8::params_twin());
    v.push(splitk::params_twin());
    v.extend(elementwise::params_twins());
    v.extend(attention::params_twins());
    v.extend(rope::params_twins());
    v.extend(turboquant::params_twins());
    v.extend(crate::model::ops::params_twins());
    v.push(crate::timing::params_twin());
    v
}

/// The pipelines of `pipelines` whose key is one of the enum variants named in `variants` (a
/// label is its key's `Debug`, which begins with the variant's name): one params struct's share
/// of a family's pipelines.
#[cfg(all(test, feature = "testkit"))]
pub(crate) fn pipelines_of(pipelines: &[(String, crate::pipeline::PipelineDesc)], variants: &[&str]) -> Vec<(String, crate::pipeline::PipelineDesc)> {
    let variant = |label: &str| label.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default().to_string();
    pipelines.iter().filter(|(label, _)| variants.contains(&variant(label).as_str())).cloned().collect()
}

#[cfg(test)]
mod tests {
    use crate::caps::Variant;

    /// Each Rust params struct matches the WGSL struct of every pipeline that binds it, field by
    /// field: names, scalar types and byte offsets (naga's layout of the uniform), and size; a
    /// field reordered, renamed, retyped or missing on one side fails here.
    #[cfg(feature = "testkit")]
    #[test]
    fn params_structs_match_their_wgsl_twins() {
        use crate::pipeline::ShaderSource;
        use naga::{AddressSpace, ResourceBinding, Scalar, ScalarKind, TypeInner};
        let mut checked = 0;
        for twin in super::params_twins() {
            assert!(!twin.pipelines.is_empty(), "{}: no pipelines", twin.rust);
            for (label, desc) in &twin.pipelines {
                if !matches!(desc.source, ShaderSource::Wgsl(_)) {
                    continue;
                }
                let text = desc.source.text();
                let module = naga::front::wgsl::parse_str(&text).unwrap_or_else(|e| panic!("{label}: {}", e.emit_to_string(&text)));
                let (_, var) =
                    module.global_variables.iter().find(|(_, g)| g.binding == Some(ResourceBinding { group: 0, binding: 0 })).unwrap_or_else(|| panic!("{label}: no binding 0"));
                assert_eq!(var.space, AddressSpace::Uniform, "{label}: binding 0 is not a uniform");
                let TypeInner::Struct { members, span } = &module.types[var.ty].inner else { panic!("{label}: binding 0 is not a struct") };
                let wgsl: Vec<(String, &str, usize)> = members
                    .iter()
                    .map(|m| {
                        let ty = match module.types[m.ty].inner {
                            TypeInner::Scalar(Scalar { kind: ScalarKind::Uint, width: 4 }) => "u32",
                            TypeInner::Scalar(Scalar { kind: ScalarKind::Sint, width: 4 }) => "i32",
                            TypeInner::Scalar(Scalar { kind: ScalarKind::Float, width: 4 }) => "f32",
                            ref other => panic!("{label}: field {:?} of type {other:?}", m.name),
                        };
                        (m.name.clone().unwrap_or_default(), ty, m.offset as usize)
                    })
                    .collect();
                let rust: Vec<(String, &str, usize)> = twin.fields.iter().map(|&(n, t, o)| (n.to_string(), t, o)).collect();
                assert_eq!(wgsl, rust, "{label}: the WGSL params struct and {} differ", twin.rust);
                assert_eq!(*span as usize, twin.size, "{label}: WGSL size {span}, {} {}", twin.rust, twin.size);
                assert_eq!(desc.params_size as usize, twin.size, "{label}: params_size");
                checked += 1;
            }
        }
        assert!(checked > 0);
        println!("{checked} pipelines' params structs match their Rust twins");
    }

    /// Every WGSL pipeline of the registry is bound by a params struct the test above checks (Native MSL pipelines are checked by tests/msl_bindings.rs).
    #[cfg(feature = "testkit")]
    #[test]
    fn every_wgsl_pipeline_has_a_params_twin() {
        use crate::pipeline::{PipelineDesc, ShaderSource};
        use std::collections::HashSet;
        use std::hash::{DefaultHasher, Hash, Hasher};
        let id = |label: &str, desc: &PipelineDesc| {
            let mut h = DefaultHasher::new();
            (label, desc.entry, desc.source.text(), format!("{:?}", desc.constants)).hash(&mut h);
            h.finish()
        };
        let twins = super::params_twins();
        let covered: HashSet<u64> = twins.iter().flat_map(|t| &t.pipelines).map(|(label, desc)| id(label, desc)).collect();
        let pipelines: Vec<_> = super::registry().iter().flat_map(|k| k.pipelines()).collect();
        let wgsl: Vec<_> = pipelines.iter().filter(|(_, desc)| matches!(desc.source, ShaderSource::Wgsl(_))).collect();
        let uncovered: Vec<&str> = wgsl.iter().filter(|(label, desc)| !covered.contains(&id(label, desc))).map(|(label, _)| label.as_str()).collect();
        assert!(uncovered.is_empty(), "{} of {} WGSL pipelines bind a params struct no Rust twin covers: {uncovered:?}", uncovered.len(), wgsl.len());
        println!("{} WGSL pipelines, each covered by one of {} params twins", wgsl.len(), twins.len());
    }

    /// Every kernel with a Native variant has self-check cases, and only those kernels do: a
    /// Native kernel added without them would otherwise be checked by nothing at run time.
    #[test]
    fn every_native_kernel_has_self_check_cases() {
        for info in super::infos() {
            let native = info.variants.contains(&Variant::Native);
            match info.native_checks.map(|cases| cases(info)) {
                Some(cases) => {
                    assert!(native, "{}: self-check cases but no Native variant", info.name);
                    assert!(!cases.is_empty(), "{}: an empty self-check list", info.name);
                }
                None => assert!(!native, "{}: a Native variant without self-check cases", info.name),
            }
        }
    }

    #[cfg(feature = "testkit")]
    /// The probe's list (the families) and the test kit's registry name the same kernels besides
    /// the model's glue kernels and the bench's, so a family added to one and not the other fails
    /// here.
    #[test]
    fn infos_match_the_registry() {
        let glue = crate::model::ops::kernels().into_iter().chain(crate::timing::kernels()).map(|k| k.info().name);
        let mut infos: Vec<&str> = super::infos().iter().map(|i| i.name).chain(glue).collect();
        let mut registered: Vec<&str> = super::registry().iter().map(|k| k.info().name).collect();
        infos.sort_unstable();
        registered.sort_unstable();
        assert_eq!(infos, registered);
    }
}
