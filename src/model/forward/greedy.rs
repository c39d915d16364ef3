//! Decoding with the token choice on the GPU: greedy ([`Session::decode_greedy`]) or sampled
//! with a top-k ([`Session::decode_sampled`]). Each step's batch picks the token of the previous
//! logits (`ops::argmax`, or `ops::top_k` and `ops::draw` with a uniform the CPU drew from the
//! sampler's seeded generator while recording), looks its embedding row up
//! (`matmul::gather_rows` on [`Model::gpu_embeddings`]), runs the layers and the LM head, and
//! copies the token into a host readback. Nothing a step needs comes from the CPU, so the next
//! step is submitted before this one's token is read: two submissions in flight (each of
//! [`SessionOptions::greedy_steps`] steps; the first ones shorter, so the GPU starts after one
//! step is recorded), the next one recorded while they run and submitted as soon as the oldest
//! is done, the tokens read behind them. The CPU's work (record a submission,
//! read the tokens, hand them on) overlaps the GPU and has the time of two submissions to do it.

use super::*;
use crate::model::sample::Sampler;
use std::collections::VecDeque;

/// Submission slots: the submissions in flight plus one (a slot is written again only after its
/// tokens were read).
const SLOTS: usize = 3;
const IN_FLIGHT: usize = 2;
/// Most steps per submission.
pub const MAX_GREEDY_STEPS: usize = 8;

/// Per slot and step of a submission (`slot * steps + step`): the GPU word the step's argmax
/// writes and its gather reads, and the host readback the step copies it into; per slot (with
/// `gpu_timing`) the submission's timer.
pub(super) struct Ring {
    toks: Vec<GpuBuffer<u32>>,
    back: Vec<HostReadback<u32>>,
    timers: Vec<Option<GpuTimer>>,
    steps: usize,
}

impl Ring {
    /// A token slot (for recording, never running, the argmax when pipelines are warmed up).
    pub(super) fn first_slot(&self) -> &GpuBuffer<u32> {
        &self.toks[0]
    }

    pub(super) fn new(ctx: &Context, timing: bool, steps: usize) -> Result<Ring> {
        if !(1..=MAX_GREEDY_STEPS).contains(&steps) {
            return Err(ModelError::Argument(format!("greedy_steps = {steps}: must be 1..={MAX_GREEDY_STEPS}")));
        }
        let mut r = Ring { toks: Vec::new(), back: Vec::new(), timers: Vec::new(), steps };
        for _ in 0..SLOTS * steps {
            r.toks.push(ctx.alloc::<u32>(1)?);
            r.back.push(ctx.host_readback::<u32>(1)?);
        }
        for _ in 0..SLOTS {
            r.timers.push(if timing { ctx.gpu_timer() } else { None });
        }
        Ok(r)
    }
}

/// Where the recording of [`Session::decode_greedy`]'s submissions stands: steps and
/// submissions recorded, the logits row the next step reads; how the steps choose.
struct Cursor<'s> {
    recorded: usize,
    batches: usize,
    offset: usize,
    choice: Choice<'s>,
}

/// A submission in flight: its slot and steps.
type Flight<'c> = VecDeque<(crate::batch::Submitted<'c>, usize, usize)>;

/// How a step chooses its token from the previous logits: the largest (`None`), or drawn by
/// the sampler from the top-k candidates.
type Choice<'s> = Option<&'s mut Sampler>;

impl Session {
    /// Greedy decoding (the highest logit, the lowest token id among equal ones, as
    /// [`crate::model::sample::argmax`]) with the token choice and the embedding lookup on the
    /// GPU, starting from the logits of the last [`Session::prefill`] or decode step: `emit`
    /// gets each chosen token in order and returns whether to go on. Stops after `max` tokens,
    /// when `emit` says so or errs, or when the cache is full. Returns the tokens emitted.
    ///
    /// Steps run ahead of `emit` (two submissions in flight, each of
    /// [`SessionOptions::greedy_steps`] steps), so the CPU time between steps is hidden;
    /// afterwards the cache holds what [`Session::decode_stream`] would leave: every emitted
    /// token but the last (the steps that ran past it are forgotten). The logits of the last
    /// position are then not kept: decode a token or prefill before calling this again.
    /// Needs the embedding table on the GPU ([`Model::gpu_embeddings`], uploaded on first use).
    pub fn decode_greedy(&mut self, ctx: &Context, model: &Model, max: usize, emit: impl FnMut(u32) -> Result<bool>) -> Result<usize> {
        self.decode_chosen(ctx, model, None, max, emit)
    }

    /// [`Session::decode_greedy`] for sampling: each token is drawn on the GPU from the exact
    /// top-k candidates of its logits ([`crate::model::ops::top_k`], then
    /// [`crate::model::ops::draw`]) as `sampler` draws from them
    /// ([`Sampler::sample_top_k`]: temperature softmax, top-p, a draw with the next uniform of
    /// its seeded generator), so the steps run ahead of `emit` as greedy ones do. The uniforms
    /// are taken from `sampler` when a step is recorded, the steps that ran past the last
    /// emitted token included. The draw is computed in f32: it gives the sampler's token but
    /// where a uniform lies within f32 rounding of the boundary between two candidates. At
    /// temperature 0 this is [`Session::decode_greedy`]. The sampler's `top_k` must be in
    /// `1..=`[`crate::model::ops::TOP_K_MAX`]; without a top-k, or to see the logits, sample
    /// on the CPU with [`Session::decode_stream`].
    pub fn decode_sampled(&mut self, ctx: &Context, model: &Model, sampler: &mut Sampler, max: usize, emit: impl FnMut(u32) -> Result<bool>) -> Result<usize> {
        if sampler.config().temperature == 0.0 {
            return self.decode_greedy(ctx, model, max, emit);
        }
        let k = sampler.config().top_k;
        if !(1..=ops::TOP_K_MAX).contains(&k) {
            return Err(ModelError::Argument(format!("sampling on the GPU needs a top-k in 1..={} (top_k = {k}); sample on the CPU with decode_stream", ops::TOP_K_MAX)));
        }
        self.decode_chosen(ctx, model, Some(sampler), max, emit)
    }

    /// [`Session::decode_greedy`] and [`Session::decode_sampled`]: the steps choose by `choice`.
    fn decode_chosen(&mut self, ctx: &Context, model: &Model, choice: Choice, max: usize, mut emit: impl FnMut(u32) -> Result<bool>) -> Result<usize> {
        self.check_model(model)?;
        let offset = self.logits_row.ok_or_else(|| ModelError::Argument("decoding needs the logits of a prefill or a decode step first".into()))?;
        if max == 0 {
            return Ok(0);
        }
        let embd = model.gpu_embeddings(ctx)?;
        let start = self.kv.pos();
        let cache = self.bind.clone();
        let mut flight = Flight::new();
        let mut emitted = 0;
        let run = self.greedy_steps(ctx, model, embd, &cache, choice, offset, max, &mut flight, &mut emitted, &mut emit);
        // Whatever happened, let the steps in flight finish and release their readbacks.
        let mut drained = Ok(());
        for (sub, slot, count) in flight.drain(..) {
            let waited = Self::finish_timed(&mut self.gpu_ns, 1, self.opts.gpu_timing, sub);
            drained = drained.and(waited);
            for j in 0..count {
                let read = self.greedy.back[slot * self.greedy.steps + j].read_into(ctx, &mut [0u32]).map_err(ModelError::from);
                drained = drained.and(read);
            }
        }
        self.kv.truncate(start + emitted.saturating_sub(1));
        self.logits_row = None;
        run?;
        drained?;
        Ok(emitted)
    }

    /// The loop of [`Session::decode_greedy`]: keep `IN_FLIGHT` submissions of up to `steps`
    /// steps in flight, read the oldest one's tokens, hand them to `emit`. Submissions still
    /// running when it returns are in `flight`.
    #[allow(clippy::too_many_arguments)]
    fn greedy_steps<'c>(
        &mut self,
        ctx: &'c Context,
        model: &Model,
        embd: &mm::WeightMatrix,
        cache: &'c BindCache,
        choice: Choice,
        offset: usize,
        max: usize,
        flight: &mut Flight<'c>,
        emitted: &mut usize,
        emit: &mut impl FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        let vocab = model.config.vocab;
        let steps = self.greedy.steps;
        let mut at = Cursor { recorded: 0, batches: 0, offset, choice };
        // The next submission, recorded while the GPU runs those in flight (its slot is neither
        // of theirs), submitted as soon as the oldest is done.
        let mut next = None;
        loop {
            while flight.len() < IN_FLIGHT {
                let Some((rec, slot, count)) = (match next.take() {
                    Some(n) => Some(n),
                    None => self.record_greedy(ctx, model, embd, cache, max, &mut at)?,
                }) else {
                    break;
                };
                flight.push_back((rec.submit()?, slot, count));
                for j in 0..count {
                    self.greedy.back[slot * steps + j].request_map()?;
                }
            }
            if next.is_none() {
                next = self.record_greedy(ctx, model, embd, cache, max, &mut at)?;
            }
            let Some((sub, slot, count)) = flight.pop_front() else { return Ok(()) };
            Self::finish_timed(&mut self.gpu_ns, 1, self.opts.gpu_timing, sub)?;
            // Every readback of the submission is read (and unmapped) before any is handed on.
            let mut toks = [0u32; MAX_GREEDY_STEPS];
            for (j, t) in toks.iter_mut().enumerate().take(count) {
                self.greedy.back[slot * steps + j].read_into(ctx, std::slice::from_mut(t))?;
            }
            for &t in &toks[..count] {
                if t as usize >= vocab {
                    let what = if at.choice.is_some() { "no finite value" } else { "no largest value (all NaN)" };
                    return Err(ModelError::Argument(format!("decoding on the GPU: the logits have {what}")));
                }
                *emitted += 1;
                if !emit(t)? || *emitted == max {
                    return Ok(());
                }
            }
        }
    }

    /// Record the next submission of [`Session::decode_greedy`] at `at` (`None` when `max`
    /// steps are recorded or the cache is full): up to `steps` steps, each choosing its token
    /// from the previous logits (row `at.offset` of them for the first step of all) by `at.choice`.
    #[allow(clippy::type_complexity)]
    fn record_greedy<'c>(
        &mut self,
        ctx: &'c Context,
        model: &Model,
        embd: &mm::WeightMatrix,
        cache: &'c BindCache,
        max: usize,
        at: &mut Cursor,
    ) -> Result<Option<(crate::batch::Recorded<'c>, usize, usize)>> {
        // The first submissions are shorter (1, 1, 2, 4, ... steps): the GPU starts after one
        // step is recorded instead of a whole submission, and the first token comes sooner.
        let ramp = 1usize << at.batches.saturating_sub(1).min(MAX_GREEDY_STEPS.trailing_zeros() as usize);
        let count = self.greedy.steps.min(ramp).min(max - at.recorded).min(self.kv.remaining());
        if count == 0 {
            return Ok(None);
        }
        let slot = at.batches % SLOTS;
        let steps = self.greedy.steps;
        let mut b = match &self.greedy.timers[slot] {
            Some(t) => ctx.timed_batch_with(t),
            None => ctx.batch(),
        }
        .with_cache(cache);
        for j in 0..count {
            let tok = &self.greedy.toks[slot * steps + j];
            match &mut at.choice {
                None => ops::argmax(&mut b, &self.s.logits, at.offset, model.config.vocab, tok)?,
                Some(sampler) => {
                    let c = *sampler.config();
                    self.top.record_candidates(&mut b, &self.s.logits, at.offset, model.config.vocab, c.top_k)?;
                    ops::draw(&mut b, self.top.out(), c.top_k, c.temperature, c.top_p, sampler.next_uniform(), tok)?;
                }
            }
            at.offset = 0;
            self.record_lookup(&mut b, model, embd, tok, 1)?;
            self.record_decode(&mut b, model, self.kv.pos())?;
            b.copy_to_host(tok, 1, &self.greedy.back[slot * steps + j])?;
            self.kv.advance(1)?;
        }
        at.recorded += count;
        at.batches += 1;
        Ok(Some((b.finish()?, slot, count)))
    }
}
