//! Test and bench cases of the INT4 family (see [`crate::suite`]).

use super::check::QuantCase;
use super::*;
use crate::suite::{describe_all, Case, Kernel};

pub use super::check::random_host;

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&QuantKernel]
}

struct QuantKernel;

impl Kernel for QuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &QUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let shapes = [(1, 1, 32), (3, 31, 7), (33, 1000, 32), (31, 255, 64), (5, 1000, 128), (17, 33, 33)];
        let mut v: Vec<Box<dyn Case>> = Vec::new();
        for (i, &(n, k, g)) in shapes.iter().enumerate() {
            for mode in [Int4Mode::Signed, Int4Mode::Asymmetric] {
                v.push(Box::new(QuantCase { n, k, g, mode, f16: i % 2 == 1 }));
            }
        }
        v
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![Box::new(QuantCase { n: 4096, k: 4096, g: 128, mode: Int4Mode::Signed, f16: false })]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        let keys = [false, true].into_iter().flat_map(|f16| {
            [Variant::Portable, Variant::Subgroup, Variant::Native]
                .into_iter()
                .flat_map(move |variant| [Int4Pipeline::Scales { f16, variant }, Int4Pipeline::Codes { f16, variant }])
        });
        describe_all(keys)
    }
}
