//! Test and bench cases of the attention family (see [`crate::suite`]).

use super::*;
use crate::suite::{describe_all, Case, Kernel};

pub use super::check::DecodeCase;
pub use super::prefill_case::{PrefillCase, MATRIX_TOL};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&PrefillKernel, &DecodeKernel]
}

struct PrefillKernel;

impl Kernel for PrefillKernel {
    fn info(&self) -> &'static KernelInfo {
        &PREFILL
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        use PairLayout::*;
        // (tokens, offset, kv_len, heads, kv_heads, d, layout, f16, causal, k_rotated)
        let grid = [
            (1, 0, 1, 4, 4, 64, HalfSplit, false, true, false),
            (7, 26, 33, 8, 2, 128, Interleaved, true, true, false),
            (64, 0, 64, 4, 1, 80, HalfSplit, false, true, false),
            (7, 0, 33, 8, 1, 64, Interleaved, false, false, false),
            (257, 743, 1000, 2, 2, 64, HalfSplit, true, true, false),
            (1, 4095, 4096, 8, 1, 128, Interleaved, true, true, false),
            (64, 33, 97, 4, 4, 256, HalfSplit, true, true, false),
            (33, 0, 33, 6, 3, 6, Interleaved, false, true, false),
            (7, 1000, 1007, 4, 2, 128, HalfSplit, false, true, true),
            (64, 0, 257, 8, 8, 96, Interleaved, false, false, true),
        ];
        grid.iter()
            .enumerate()
            .map(|(i, &(tokens, offset, kv_len, h, kvh, d, layout, kv_f16, causal, k_rotated))| {
                Box::new(PrefillCase { tokens, offset, kv_len, shape: AttnShape::new(h, kvh, d), layout, kv_f16, causal, k_rotated, mode: i }) as Box<dyn Case>
            })
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [512, 2048]
            .iter()
            .flat_map(|&t| {
                [false, true].map(|kv_f16| {
                    Box::new(PrefillCase {
                        tokens: t,
                        offset: 0,
                        kv_len: t,
                        shape: AttnShape::new(32, 8, 128),
                        layout: PairLayout::HalfSplit,
                        kv_f16,
                        causal: true,
                        k_rotated: false,
                        mode: 5,
                    }) as Box<dyn Case>
                })
            })
            .collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(sample_pipelines().into_iter().filter(is_prefill))
    }
}

struct DecodeKernel;

impl Kernel for DecodeKernel {
    fn info(&self) -> &'static KernelInfo {
        &DECODE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        use PairLayout::*;
        let grid = [
            (0, 4, 4, 64, HalfSplit, false),
            (32, 8, 2, 128, Interleaved, true),
            (999, 8, 1, 80, HalfSplit, false),
            (4095, 4, 1, 128, HalfSplit, true),
            (4095, 16, 2, 64, Interleaved, false),
            (100, 12, 1, 256, HalfSplit, true),
            (50, 2, 2, 6, Interleaved, true),
            (1000, 3, 3, 10, HalfSplit, false),
            // Several steps per workgroup and a partial last chunk (kv 12345 = 64 x 192 + 57 at the
            // default split), f16 and f32.
            (12344, 8, 8, 128, HalfSplit, true),
            (8190, 8, 2, 96, Interleaved, false),
            // Matrix decode: 8 heads per KV head (all 16 rows of its products), head_dim 80.
            (299, 16, 2, 80, Interleaved, true),
        ];
        grid.iter()
            .enumerate()
            .map(|(i, &(pos, h, kvh, d, layout, kv_f16))| {
                Box::new(DecodeCase { pos, shape: AttnShape::new(h, kvh, d), layout, kv_f16, mode: i, attend_only: i % 4 == 3 }) as Box<dyn Case>
            })
            .collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [4096, 16384, 32768]
            .iter()
            .flat_map(|&kv| {
                [(true, true), (true, false), (false, true), (false, false)].map(|(kv_f16, attend_only)| {
                    Box::new(DecodeCase { pos: kv - 1, shape: AttnShape::new(32, 8, 128), layout: PairLayout::HalfSplit, kv_f16, mode: 5, attend_only }) as Box<dyn Case>
                })
            })
            .collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(sample_pipelines().into_iter().filter(|k| !is_prefill(k)))
    }
}

/// The prefill's own pipelines (its staging pass is listed with the decode's, as before).
fn is_prefill(k: &AttnPipeline) -> bool {
    matches!(k, AttnPipeline::Prefill { .. } | AttnPipeline::PrefillMatrix { .. } | AttnPipeline::PrefillNative { .. })
}
