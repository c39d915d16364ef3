//! Test and bench grids of the TurboQuant family (see [`crate::suite`]); the cases themselves are
//! in `check` (built in every build for the Native self-check).

use super::check::{cfg, AttnCase, DequantCase, QuantCase};
use super::*;
use crate::suite::{describe_all, guarded_f32, guarded_u32, Case, Check, Kernel, PlanAdapter, PlanCase, Prepared, Rng};

pub use super::check::{attention_reference, check_quantized, random_cache, test_vectors, ATTENTION_TOL, BOUNDARY_BAND};

/// The kernels of this family, for [`crate::kernels::registry`].
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&QuantKernel, &DequantKernel, &AttentionKernel]
}

fn all_variants() -> [Variant; 3] {
    [Variant::Portable, Variant::Subgroup, Variant::Native]
}

/// The pipelines of the given transform ops and (with `attend`) the split-K pass, every variant.
fn family_pipelines(ops: &[TransformOp], attend: bool) -> Vec<(String, PipelineDesc)> {
    // The Native tier has no QuantizeKv pipeline (it records two Quantize dispatches instead).
    let mut keys: Vec<TqPipeline> = all_variants()
        .into_iter()
        .flat_map(|variant| ops.iter().filter(move |op| variant != Variant::Native || op.msl_entry().is_some()).map(move |&op| TqPipeline::Transform { variant, op }))
        .collect();
    if attend {
        for footprint in [attention::Footprint::FULL, attention::Footprint::COMPACT] {
            keys.extend(all_variants().map(|variant| TqPipeline::Attend { variant, footprint }));
        }
    }
    describe_all(keys)
}

struct QuantKernel;

impl Kernel for QuantKernel {
    fn info(&self) -> &'static KernelInfo {
        &QUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let v = [
            QuantCase { cfg: cfg(2, 64, 40, CacheKind::Global, Some(11)), tokens: 37, pos0: 3 },
            QuantCase { cfg: cfg(3, 128, 16, CacheKind::Window, Some(12)), tokens: 21, pos0: 30 },
            QuantCase { cfg: cfg(1, 256, 8, CacheKind::Global, None), tokens: 1, pos0: 5 },
            QuantCase { cfg: cfg(2, 512, 5, CacheKind::Window, Some(13)), tokens: 3, pos0: 7 },
            QuantCase { cfg: cfg(5, 128, 9, CacheKind::Window, None), tokens: 1, pos0: 1000 },
        ];
        let pairs =
            [QuantCase { cfg: cfg(3, 64, 50, CacheKind::Global, Some(14)), tokens: 23, pos0: 9 }, QuantCase { cfg: cfg(2, 256, 6, CacheKind::Window, None), tokens: 9, pos0: 4 }];
        // A K+V case second, so that the grids which run only the first few cases reach it too.
        let mut all: Vec<Box<dyn Case>> = v.into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect();
        all.insert(1, Box::new(QuantKvCase(pairs[0])));
        all.push(Box::new(QuantKvCase(pairs[1])));
        all
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        let decode = QuantCase { cfg: cfg(8, 128, 4096, CacheKind::Global, Some(1)), tokens: 1, pos0: 100 };
        vec![Box::new(QuantCase { cfg: cfg(32, 128, 128, CacheKind::Global, Some(1)), tokens: 128, pos0: 0 }), Box::new(decode), Box::new(QuantKvCase(decode))]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        family_pipelines(&[TransformOp::Quantize, TransformOp::QuantizeKv], false)
    }
}

struct DequantKernel;
impl Kernel for DequantKernel {
    fn info(&self) -> &'static KernelInfo {
        &DEQUANTIZE
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let v = [
            DequantCase { cfg: cfg(2, 64, 33, CacheKind::Global, Some(5)), pos0: 0, count: 33 },
            DequantCase { cfg: cfg(3, 128, 10, CacheKind::Window, Some(6)), pos0: 25, count: 10 },
            DequantCase { cfg: cfg(1, 256, 7, CacheKind::Global, None), pos0: 2, count: 3 },
            DequantCase { cfg: cfg(2, 512, 4, CacheKind::Window, Some(7)), pos0: 9, count: 3 },
        ];
        v.into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        vec![]
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        family_pipelines(&[TransformOp::Dequantize], false)
    }
}

struct AttentionKernel;
impl Kernel for AttentionKernel {
    fn info(&self) -> &'static KernelInfo {
        &ATTENTION
    }
    fn test_cases(&self) -> Vec<Box<dyn Case>> {
        let v = [
            AttnCase { heads: 4, cfg: cfg(2, 64, 100, CacheKind::Global, Some(1)), kv_len: 77, window: None, sharpness: 1.0 },
            AttnCase { heads: 8, cfg: cfg(2, 128, 64, CacheKind::Window, Some(2)), kv_len: 200, window: None, sharpness: 1.0 },
            AttnCase { heads: 6, cfg: cfg(1, 128, 48, CacheKind::Window, None), kv_len: 130, window: Some(40), sharpness: 4.0 },
            AttnCase { heads: 2, cfg: cfg(2, 256, 300, CacheKind::Global, Some(3)), kv_len: 300, window: Some(129), sharpness: 1.0 },
            AttnCase { heads: 4, cfg: cfg(4, 512, 40, CacheKind::Global, Some(4)), kv_len: 33, window: None, sharpness: 2.0 },
            AttnCase { heads: 16, cfg: cfg(4, 128, 600, CacheKind::Global, Some(5)), kv_len: 555, window: None, sharpness: 1.0 },
            // 320-position splits (four keys per invocation in the K phase) and a last split of
            // 200 (two keys per invocation).
            AttnCase { heads: 16, cfg: cfg(8, 64, 8200, CacheKind::Global, Some(6)), kv_len: 8200, window: None, sharpness: 1.0 },
        ];
        v.into_iter().map(|c| Box::new(c) as Box<dyn Case>).collect()
    }
    fn bench_cases(&self) -> Vec<Box<dyn Case>> {
        [4096, 16384, 32768]
            .into_iter()
            .map(|n| Box::new(AttnCase { heads: 32, cfg: cfg(8, 128, n, CacheKind::Global, Some(9)), kv_len: n, window: None, sharpness: 1.0 }) as Box<dyn Case>)
            .collect()
    }
    fn pipelines(&self) -> Vec<(String, PipelineDesc)> {
        family_pipelines(&[TransformOp::Merge], true)
    }
    /// The compact split pass (an adapter with WebGPU's default 16 KiB of workgroup memory),
    /// every variant: four splits of 64 positions, and head dim 64 (sixteen V stripes, two rounds).
    fn plan_cases(&self) -> Vec<PlanCase> {
        let adapter = PlanAdapter { workgroup_memory: Some(16 << 10), ..PlanAdapter::default() };
        [
            AttnCase { heads: 8, cfg: cfg(2, 128, 64, CacheKind::Window, Some(2)), kv_len: 200, window: None, sharpness: 1.0 },
            AttnCase { heads: 4, cfg: cfg(2, 64, 100, CacheKind::Global, Some(1)), kv_len: 77, window: None, sharpness: 1.0 },
        ]
        .into_iter()
        .map(|c| PlanCase { adapter, ..PlanCase::new(None, crate::tuning::Tuning::default(), Box::new(c)) })
        .collect()
    }
}

/// [`quantize_kv`]: K from Gaussian and adversarial vectors, V from uniform ones, into caches of
/// the same shape with different sign seeds; both checked as [`check_quantized`].
#[derive(Clone, Copy)]
struct QuantKvCase(QuantCase);

struct QuantKvPrepared {
    case: QuantCase,
    srcs: [GpuBuffer<f32>; 2],
    host: [Vec<f32>; 2],
    caches: [TqCache; 2],
}

impl Case for QuantKvCase {
    fn name(&self) -> String {
        format!("{} k+v", self.0.name())
    }
    fn bytes(&self) -> u64 {
        2 * self.0.bytes()
    }
    fn setup(&self, ctx: &Context, rng: &mut Rng, _copies: usize) -> Result<Box<dyn Prepared>> {
        let c = self.0.cfg;
        let vcfg = TqConfig { sign_seed: c.sign_seed.map(|s| s ^ 0x5555), ..c };
        let k = test_vectors(rng, self.0.tokens, c.kv_heads, c.head_dim, true);
        let v = rng.uniform_vec(k.len(), -2.0, 2.0);
        let n = c.kv_heads * c.capacity;
        let cache = |cfg| -> Result<TqCache> { TqCache::with_buffers(ctx, cfg, guarded_u32(ctx, n * c.head_dim / 8)?, guarded_f32(ctx, n)?) };
        Ok(Box::new(QuantKvPrepared { case: self.0, srcs: [ctx.upload(&k)?, ctx.upload(&v)?], host: [k, v], caches: [cache(c)?, cache(vcfg)?] }))
    }
}

impl Prepared for QuantKvPrepared {
    fn encode(&self, b: &mut Batch, _copy: usize) -> Result<()> {
        quantize_kv(b, &self.srcs[0], &self.srcs[1], self.case.tokens, self.case.pos0, &self.caches[0], &self.caches[1])
    }
    fn check(&self, ctx: &Context) -> Result<Check> {
        let (k, v) = (
            check_quantized(ctx, &self.caches[0], &self.host[0], self.case.tokens, self.case.pos0)?.0,
            check_quantized(ctx, &self.caches[1], &self.host[1], self.case.tokens, self.case.pos0)?.0,
        );
        let note = [("K", &k.note), ("V", &v.note)].iter().filter(|(_, n)| !n.is_empty()).map(|(w, n)| format!("{w}: {n}")).collect::<Vec<_>>().join("; ");
        Ok(Check { err: k.err.max(v.err), tol: k.tol, nonfinite: k.nonfinite + v.nonfinite, guard_damage: k.guard_damage + v.guard_damage, note })
    }
}
