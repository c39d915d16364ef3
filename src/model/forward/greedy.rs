//! Greedy decoding with the token choice on the GPU ([`Session::decode_greedy`]). Each step's
//! batch picks the token of the previous logits (`ops::argmax`), looks its embedding row up
//! (`matmul::gather_row` on [`Model::gpu_embeddings`]), runs the layers and the LM head, and
//! copies the token into a host readback. Nothing a step needs comes from the CPU, so the next
//! step is submitted before this one's token is read: two steps in flight, the tokens read
//! behind them, and the CPU's work between two steps (read a token, hand it on, record and
//! submit the next step) overlaps the GPU.

use super::*;
use std::collections::VecDeque;

/// Token slots: the steps in flight plus one (a slot is written again only after its token was
/// read).
const SLOTS: usize = 3;
const IN_FLIGHT: usize = 2;

/// Per slot: the GPU word the step's argmax writes and its gather reads, the host readback the
/// step copies it into, and (with `gpu_timing`) the step's own timer.
pub(super) struct Ring {
    toks: Vec<GpuBuffer<u32>>,
    back: Vec<HostReadback<u32>>,
    timers: Vec<Option<GpuTimer>>,
}

impl Ring {
    /// A token slot (for recording, never running, the argmax when pipelines are warmed up).
    pub(super) fn first_slot(&self) -> &GpuBuffer<u32> {
        &self.toks[0]
    }

    pub(super) fn new(ctx: &Context, timing: bool) -> Result<Ring> {
        let mut r = Ring { toks: Vec::new(), back: Vec::new(), timers: Vec::new() };
        for _ in 0..SLOTS {
            r.toks.push(ctx.alloc::<u32>(1)?);
            r.back.push(ctx.host_readback::<u32>(1)?);
            r.timers.push(if timing { ctx.gpu_timer() } else { None });
        }
        Ok(r)
    }
}

type Flight<'c> = VecDeque<(crate::batch::Submitted<'c>, usize)>;

impl Session {
    /// Greedy decoding (the highest logit, the lowest token id among equal ones, as
    /// [`crate::model::sample::argmax`]) with the token choice and the embedding lookup on the
    /// GPU, starting from the logits of the last [`Session::prefill`] or decode step: `emit`
    /// gets each chosen token in order and returns whether to go on. Stops after `max` tokens,
    /// when `emit` says so or errs, or when the cache is full. Returns the tokens emitted.
    ///
    /// Steps run ahead of `emit` (two in flight), so the CPU time between steps is hidden;
    /// afterwards the cache holds what [`Session::decode_stream`] would leave: every emitted
    /// token but the last (the steps that ran past it are forgotten). The logits of the last
    /// position are then not kept: decode a token or prefill before calling this again.
    /// Needs the embedding table on the GPU ([`Model::gpu_embeddings`], uploaded on first use).
    pub fn decode_greedy(&mut self, ctx: &Context, model: &Model, max: usize, mut emit: impl FnMut(u32) -> Result<bool>) -> Result<usize> {
        self.check_model(model)?;
        let offset = self.logits_row.ok_or_else(|| ModelError::Argument("decode_greedy needs the logits of a prefill or a decode step first".into()))?;
        if max == 0 {
            return Ok(0);
        }
        let embd = model.gpu_embeddings(ctx)?;
        let start = self.kv.pos();
        let cache = self.bind.clone();
        let mut flight = Flight::new();
        let mut emitted = 0;
        let run = self.greedy_steps(ctx, model, embd, &cache, offset, max, &mut flight, &mut emitted, &mut emit);
        // Whatever happened, let the steps in flight finish and release their readbacks.
        let mut drained = Ok(());
        for (sub, slot) in flight.drain(..) {
            let waited = Self::finish_timed(&mut self.gpu_ns, 1, self.opts.gpu_timing, sub);
            let read = self.greedy.back[slot].read_into(ctx, &mut [0u32]).map_err(ModelError::from);
            drained = drained.and(waited).and(read);
        }
        self.kv.truncate(start + emitted.saturating_sub(1));
        self.logits_row = None;
        run?;
        drained?;
        Ok(emitted)
    }

    /// The loop of [`Session::decode_greedy`]: keep `IN_FLIGHT` steps submitted, read the oldest
    /// one's token, hand it to `emit`. Steps still running when it returns are in `flight`.
    #[allow(clippy::too_many_arguments)]
    fn greedy_steps<'c>(
        &mut self,
        ctx: &'c Context,
        model: &Model,
        embd: &mm::WeightMatrix,
        cache: &'c BindCache,
        mut offset: usize,
        max: usize,
        flight: &mut Flight<'c>,
        emitted: &mut usize,
        emit: &mut impl FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        let vocab = model.config.vocab;
        let mut submitted = 0;
        loop {
            while flight.len() < IN_FLIGHT && submitted < max && self.kv.remaining() > 0 {
                let slot = submitted % SLOTS;
                let tok = &self.greedy.toks[slot];
                let mut b = match &self.greedy.timers[slot] {
                    Some(t) => ctx.timed_batch_with(t),
                    None => ctx.batch(),
                }
                .with_cache(cache);
                ops::argmax(&mut b, &self.s.logits, offset, vocab, tok)?;
                mm::gather_row(&mut b, embd, tok, &self.s.x)?;
                if let Some(s) = model.config.embed_scale {
                    elementwise::scale_inplace(&mut b, &self.s.x, model.config.hidden, s)?;
                }
                self.record_decode(&mut b, model, self.kv.pos())?;
                b.copy_to_host(tok, 1, &self.greedy.back[slot])?;
                let sub = b.submit()?;
                flight.push_back((sub, slot));
                self.greedy.back[slot].request_map()?;
                self.kv.advance(1)?;
                offset = 0;
                submitted += 1;
            }
            let Some((sub, slot)) = flight.pop_front() else { return Ok(()) };
            Self::finish_timed(&mut self.gpu_ns, 1, self.opts.gpu_timing, sub)?;
            let mut t = [0u32];
            self.greedy.back[slot].read_into(ctx, &mut t)?;
            if t[0] as usize >= vocab {
                return Err(ModelError::Argument("greedy decoding: the logits have no largest value (all NaN)".into()));
            }
            *emitted += 1;
            if !emit(t[0])? || *emitted == max {
                return Ok(());
            }
        }
    }
}
