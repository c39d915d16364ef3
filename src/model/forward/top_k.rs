//! Sampled decoding that reads back only the top-k candidates of each step's logits
//! ([`Session::decode_stream_top_k`]): the step's batch ends with [`ops::top_k`] over the logits
//! and a copy of its `k` `(logit, id)` pairs (8 bytes each) into a host readback, instead of the
//! whole `[vocab]` row.

use super::*;

/// The top-k's scratch, its output, the host readback of the output and the candidates last
/// read.
pub(super) struct TopK {
    scratch: [GpuBuffer<u32>; 2],
    out: GpuBuffer<u32>,
    pub(super) back: HostReadback<u32>,
    words: Vec<u32>,
    pub(super) cands: Vec<(f32, u32)>,
}

impl TopK {
    /// Buffers for every `k` up to [`ops::TOP_K_MAX`] over a `vocab` row.
    pub(super) fn new(ctx: &Context, vocab: usize) -> Result<TopK> {
        let len = ops::top_k_scratch_len(vocab, ops::TOP_K_MAX)?.max(1);
        let words = 2 * ops::TOP_K_MAX;
        Ok(TopK {
            scratch: [ctx.alloc::<u32>(len)?, ctx.alloc::<u32>(len)?],
            out: ctx.alloc::<u32>(words)?,
            back: ctx.host_readback::<u32>(words)?,
            words: vec![0; words],
            cands: Vec::with_capacity(ops::TOP_K_MAX),
        })
    }

    /// GPU bytes of the scratch and the output.
    pub(super) fn bytes(&self) -> u64 {
        4 * (2 * self.scratch[0].len() + self.out.len()) as u64
    }

    /// Record the top-k of `logits[offset..offset + vocab]` into the output.
    pub(super) fn record_candidates(&self, b: &mut Batch, logits: &GpuBuffer<f32>, offset: usize, vocab: usize, k: usize) -> Result<()> {
        Ok(ops::top_k(b, logits, offset, vocab, k, [&self.scratch[0], &self.scratch[1]], &self.out)?)
    }

    /// The output: `2 k` words of candidates in rank order.
    pub(super) fn out(&self) -> &GpuBuffer<u32> {
        &self.out
    }

    /// Record the top-k of `logits[..vocab]` and the copy of its output into the readback.
    pub(super) fn record(&self, b: &mut Batch, logits: &GpuBuffer<f32>, vocab: usize, k: usize) -> Result<()> {
        self.record_candidates(b, logits, 0, vocab, k)?;
        b.copy_to_host(&self.out, 2 * k, &self.back)?;
        Ok(())
    }

    /// Read the `k` candidates of the last step (mapped by its wait) into `cands`.
    pub(super) fn read(&mut self, ctx: &Context, k: usize) -> Result<()> {
        self.back.read_into(ctx, &mut self.words[..2 * k])?;
        self.cands.clear();
        ops::top_k_candidates(&self.words[..2 * k], &mut self.cands);
        Ok(())
    }
}

impl Session {
    /// [`Session::decode_stream`] for sampling with a top-k: each step's batch ends with the
    /// exact top-k of its logits on the GPU ([`ops::top_k`]: the `k` largest finite logits, the
    /// lowest id first among equal ones, the set [`crate::model::Sampler`] keeps on the CPU) and
    /// reads back only those `k` `(logit, id)` pairs, which `next` gets in rank order (larger
    /// logit first; fewer than `k` where the row has fewer finite logits), e.g. for
    /// [`crate::model::Sampler::sample_top_k`] (whose draw [`Session::decode_sampled`] makes on
    /// the GPU, so that the steps need not wait for the CPU). `1 <= k <=` [`ops::TOP_K_MAX`]; for a larger
    /// top-k, no top-k, or to see the logits, use [`Session::decode_stream`]. The logits of the
    /// last step stay on the GPU (for [`Session::decode_greedy`]); [`Session::logits`] is not
    /// updated.
    pub fn decode_stream_top_k(&mut self, ctx: &Context, model: &Model, first: u32, k: usize, mut next: impl FnMut(&[(f32, u32)]) -> Result<Option<u32>>) -> Result<usize> {
        if !(1..=ops::TOP_K_MAX).contains(&k) {
            return Err(ModelError::Argument(format!("top-k of k = {k} on the GPU (1..={})", ops::TOP_K_MAX)));
        }
        self.stream(ctx, model, first, Some(k), |s| next(&s.top.cands))
    }
}
