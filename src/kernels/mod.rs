//! Kernel families. Each family is one module (plus its WGSL/MSL sources) exposing its public
//! API and a `kernels()` list of [`crate::suite::Kernel`]s. Adding a family = adding a module and
//! one line in [`registry`]; the harness, the bench and the probe pick it up from there.

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

use crate::suite::Kernel;
use std::sync::OnceLock;

/// An environment switch that turns an optimisation off when set to `0` (to compare against the
/// code path it replaced), read once per process at first use: kernels consult it on every
/// dispatch, so the environment is not read on that path.
pub(crate) struct OffSwitch {
    name: &'static str,
    off: OnceLock<bool>,
}

impl OffSwitch {
    pub(crate) const fn new(name: &'static str) -> OffSwitch {
        OffSwitch { name, off: OnceLock::new() }
    }

    /// Whether `name` is set to `0`.
    pub(crate) fn is_off(&self) -> bool {
        *self.off.get_or_init(|| std::env::var(self.name).is_ok_and(|v| v == "0"))
    }
}

/// Every kernel of every family.
pub fn registry() -> Vec<&'static dyn Kernel> {
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

/// Every pipeline of every kernel, plus the bench's copy, busy and read kernels (for the offline shader checks).
pub fn all_pipelines() -> Vec<(String, crate::pipeline::PipelineDesc)> {
    let mut v: Vec<_> = registry().iter().flat_map(|k| k.pipelines()).collect();
    v.extend(crate::timing::pipeline_descs(&crate::caps::Caps::nominal()));
    v
}
