//! Test and bench cases of the attention family (see [`crate::suite`]).

use super::*;
use crate::suite::{describe_all, Case, Kernel, PlanCase};

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
        prefill_grid().into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect()
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
                        window: None,
                        softcap: None,
                    }) as Box<dyn Case>
                })
            })
            .collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(sample_pipelines().into_iter().filter(is_prefill))
    }
    /// The sampled prefill plans ([`plan_samples`]).
    fn plan_cases(&self) -> Vec<PlanCase> {
        sample_cases(true)
    }
}

struct DecodeKernel;

impl Kernel for DecodeKernel {
    fn info(&self) -> &'static KernelInfo {
        &DECODE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        decode_grid().into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [4096, 16384, 32768]
            .iter()
            .flat_map(|&kv| {
                [(true, true), (true, false), (false, true), (false, false)].map(|(kv_f16, attend_only)| {
                    Box::new(DecodeCase {
                        pos: kv - 1,
                        shape: AttnShape::new(32, 8, 128),
                        layout: PairLayout::HalfSplit,
                        kv_f16,
                        mode: 5,
                        window: None,
                        softcap: None,
                        attend_only,
                        q8: false,
                    }) as Box<dyn Case>
                })
            })
            .collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        describe_all(sample_pipelines().into_iter().filter(|k| !is_prefill(k)))
    }
    /// The sampled decode plans ([`plan_samples`]), and the merge pass of one partial row per
    /// step (the grid runs eight).
    fn plan_cases(&self) -> Vec<PlanCase> {
        let mut v = sample_cases(false);
        let case = DecodeCase {
            pos: 299,
            shape: AttnShape::new(4, 2, 64),
            layout: PairLayout::HalfSplit,
            kv_f16: false,
            mode: 0,
            window: None,
            softcap: None,
            attend_only: true,
            q8: false,
        };
        v.push(PlanCase::new(None, crate::Tuning { decode_merge_unroll: Some(1), ..crate::Tuning::default() }, Box::new(case)));
        v
    }
}

/// The prefill's test grid.
pub(crate) fn prefill_grid() -> Vec<PrefillCase> {
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
    // Sliding windows (narrower than a key tile, so rows of one block start in different
    // tiles; wider than the keys; non-causal) and score soft-caps near the scores' size.
    // (tokens, offset, kv_len, heads, kv_heads, d, layout, f16, causal, k_rotated, window, softcap)
    let gemma = [
        (33, 20, 53, 4, 2, 64, HalfSplit, true, true, false, Some(7), Some(2.0)),
        (40, 0, 40, 8, 4, 128, Interleaved, false, true, false, Some(16), None),
        (9, 3, 30, 4, 4, 80, HalfSplit, false, false, false, Some(5), Some(0.5)),
        (20, 100, 120, 2, 1, 256, HalfSplit, true, true, true, Some(500), Some(1.0)),
    ];
    let plain = grid.iter().map(|&(t, o, kv, h, kvh, d, l, f, c, r)| (t, o, kv, h, kvh, d, l, f, c, r, None, None));
    plain
        .chain(gemma)
        .enumerate()
        .map(|(i, (tokens, offset, kv_len, h, kvh, d, layout, kv_f16, causal, k_rotated, window, softcap))| PrefillCase {
            tokens,
            offset,
            kv_len,
            shape: AttnShape::new(h, kvh, d),
            layout,
            kv_f16,
            causal,
            k_rotated,
            mode: i,
            window,
            softcap,
        })
        .collect()
}

/// The decode's test grid.
pub(crate) fn decode_grid() -> Vec<DecodeCase> {
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
    // Sliding windows (the last key alone; wider than the cache; 17 keys, under one Matrix
    // tile's worth of chunks) and score soft-caps near the scores' size.
    // (pos, heads, kv_heads, d, layout, f16, window, softcap)
    let gemma = [
        (999, 8, 2, 128, HalfSplit, true, Some(100), Some(2.0)),
        (50, 4, 4, 64, Interleaved, false, Some(64), Some(1.0)),
        (700, 16, 2, 80, Interleaved, true, Some(300), None),
        (20, 2, 1, 64, HalfSplit, false, Some(1), None),
        (257, 6, 2, 96, HalfSplit, false, Some(17), Some(0.5)),
    ];
    let plain = grid.iter().map(|&(pos, h, kvh, d, l, f)| (pos, h, kvh, d, l, f, None, None));
    plain
        .chain(gemma)
        .enumerate()
        .map(|(i, (pos, h, kvh, d, layout, kv_f16, window, softcap))| DecodeCase {
            pos,
            shape: AttnShape::new(h, kvh, d),
            layout,
            kv_f16,
            mode: i,
            window,
            softcap,
            attend_only: i % 4 == 3,
            // The output's int8 quantisation too (merged in the merge pass where d % 32 == 0).
            q8: i % 4 == 1 && (h * d) % 32 == 0,
        })
        .collect()
}

/// The plan cases of the prefill's (`prefill`) or the decode's samples.
fn sample_cases(prefill: bool) -> Vec<PlanCase> {
    plan_samples()
        .into_iter()
        .filter(|s| is_prefill(&s.key) == prefill)
        .map(|s| {
            let case: Box<dyn Case> = match s.case {
                PlanSampleCase::Decode(c) => Box::new(c),
                PlanSampleCase::Prefill(c) => Box::new(c),
            };
            PlanCase { variant: Some(s.variant), tuning: s.tuning, adapter: s.adapter, case }
        })
        .collect()
}

/// The prefill's own pipelines (its staging pass is listed with the decode's, as before).
fn is_prefill(k: &AttnPipeline) -> bool {
    matches!(k, AttnPipeline::Prefill { .. } | AttnPipeline::PrefillMatrix { .. } | AttnPipeline::PrefillNative { .. })
}
