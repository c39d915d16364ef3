//! Record many kernel dispatches into one compute pass and one submit (or, for long batches, a
//! few submits that let the GPU start while the rest is recorded: [`Batch::submit_early`]).
//!
//! A decode step is a few hundred dispatches; per dispatch we create one bind group and copy the
//! kernel's small parameter struct into a shared uniform arena (uploaded once, at submit). The
//! parameter block is bound with a dynamic offset: a bind group names the arena's chunk, not
//! the block's place in it.
//!
//! Creating the bind group is most of the CPU cost of a dispatch (measured on lavapipe: ~2.1 of
//! ~2.7 µs). A step that is recorded again and again (a decode loop) can keep its bind groups: give
//! the batch a [`BindCache`] ([`Batch::with_cache`]), which stores each distinct parameter block
//! once in its own uniform arena and reuses the bind group of every (layout, uniform chunk,
//! buffers) combination it has seen, so a step whose parameters change (a decode step's position)
//! makes new parameter blocks but no new bind groups. It holds references to the buffers it has
//! bound (they stay alive until the cache is cleared or dropped). Past its capacity it drops,
//! between batches, what the last few batches did not use and reuses those parameter slots.

use crate::buffer::{BufRef, GpuBuffer, HostReadback, HostUpload};
use crate::context::{Context, ContextId};
use crate::error::{ensure, Error, Result};
use crate::pipeline::{Pipeline, PipelineKey};
use bytemuck::Pod;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

const CHUNK: u64 = 64 * 1024;
/// Compute passes a timer times (one per part of a batch split with [`Batch::submit_early`]).
const TIMED_PASSES: u32 = 64;

/// A recording of dispatches. Create with [`Context::batch`], finish with [`Batch::submit`] or
/// [`Batch::run`].
pub struct Batch<'c> {
    ctx: &'c Context,
    encoder: wgpu::CommandEncoder,
    pass: Option<wgpu::ComputePass<'static>>,
    chunks: Vec<(wgpu::Buffer, Vec<u8>)>,
    align: u64,
    dispatches: usize,
    timer: Option<GpuTimer>,
    /// Copies into host-readable buffers, recorded after the pass ([`Batch::copy_to_host`]).
    copies: Vec<(wgpu::Buffer, u64, wgpu::Buffer, u64)>,
    cache: Option<CacheUse<'c>>,
    profile: Option<Profile>,
    /// A probing batch of [`Context::prepare`]: dispatches note their pipelines, record nothing.
    probe: bool,
    /// [`Batch::submit_early`]: the dispatch count at which the current part is submitted, and
    /// its length.
    split: Option<(usize, usize)>,
    /// Compute passes begun (outside profiling): the timer's pass `i` writes queries `2i, 2i + 1`.
    passes: u32,
    /// Parameter buffers of parts already submitted.
    spent: Vec<wgpu::Buffer>,
}

/// The per-dispatch timestamps of a profiled batch ([`Context::profiled_batch`]): two queries
/// per dispatch, and the pipeline label of each.
struct Profile {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    labels: Vec<String>,
    capacity: usize,
}

/// The timestamp queries of a timed batch and the buffers their results go through: made per
/// batch by [`Context::timed_batch`], or once ([`Context::gpu_timer`]) and shared by the batches
/// of a loop ([`Context::timed_batch_with`]), which then create nothing per batch. A batch using
/// it must be waited for ([`Submitted::gpu_ns`]) before the next batch using it is submitted.
#[derive(Clone)]
pub struct GpuTimer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

/// A submitted batch. `gpu_ns` reads the pass duration when the batch was timed.
/// A finished, not yet submitted batch ([`Batch::finish`]).
pub struct Recorded<'c> {
    ctx: &'c Context,
    commands: Option<wgpu::CommandBuffer>,
    /// The batch's parameter buffers: back to the context's pool once submitted (or dropped),
    /// so no other batch writes them before this one is on the queue.
    params: Vec<wgpu::Buffer>,
    timer: Option<(wgpu::Buffer, u32)>,
    profile: Option<(wgpu::Buffer, Vec<String>)>,
}

impl<'c> Recorded<'c> {
    /// Submit the batch.
    pub fn submit(mut self) -> Result<Submitted<'c>> {
        let commands = self.commands.take().ok_or_else(|| Error::Device("batch already submitted".into()))?;
        let index = self.ctx.queue.submit(Some(commands));
        // Later uploads into the parameter buffers are ordered after this batch's reads by the queue.
        Ok(Submitted { ctx: self.ctx, index, timer: self.timer.take(), profile: self.profile.take() })
    }
}

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        if let Ok(mut pool) = self.ctx.param_pool.lock() {
            pool.append(&mut self.params);
        }
    }
}

pub struct Submitted<'c> {
    ctx: &'c Context,
    pub index: wgpu::SubmissionIndex,
    /// The timer's read buffer and how many passes it timed.
    timer: Option<(wgpu::Buffer, u32)>,
    profile: Option<(wgpu::Buffer, Vec<String>)>,
}

impl Context {
    /// Start recording.
    pub fn batch(&self) -> Batch<'_> {
        Batch::new(self, false)
    }

    /// Start recording a batch whose single compute pass is timed with timestamp queries
    /// (if the adapter has them; otherwise [`Submitted::gpu_ns`] returns `None`).
    pub fn timed_batch(&self) -> Batch<'_> {
        Batch::new(self, true)
    }

    /// A reusable timer for [`Context::timed_batch_with`]; `None` without timestamp queries.
    pub fn gpu_timer(&self) -> Option<GpuTimer> {
        self.caps().timestamps.then(|| {
            let count = 2 * TIMED_PASSES;
            let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("wgkernels timer"), ty: wgpu::QueryType::Timestamp, count });
            let buffer = |label, usage| self.device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size: 8 * count as u64, usage, mapped_at_creation: false });
            let resolve = buffer("wgkernels timer resolve", wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
            let read = buffer("wgkernels timer read", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
            GpuTimer { queries, resolve, read }
        })
    }

    /// Start recording a batch that times every dispatch on its own (each in its own compute
    /// pass, with timestamps at its start and end; [`Submitted::profile`] reads them): where a
    /// batch's GPU time goes, per kernel. The extra passes and timestamps cost some GPU time, so
    /// the sum is a little above the batch's time unprofiled. Holds up to `max_dispatches`
    /// (at most 2048: a query set has at most 4096 queries); more is an error when recorded.
    /// [`Error::Limit`] without timestamp queries.
    pub fn profiled_batch(&self, max_dispatches: usize) -> Result<Batch<'_>> {
        ensure(self.caps().timestamps, || Error::Limit("profiling needs timestamp queries, which this adapter lacks".into()))?;
        let count = max_dispatches.checked_mul(2).filter(|&n| n > 0 && n <= wgpu::QUERY_SET_MAX_QUERIES as usize);
        let count = count.ok_or_else(|| Error::Argument(format!("profiled batch of {max_dispatches} dispatches: 1 to 2048")))?;
        let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("wgkernels profile"), ty: wgpu::QueryType::Timestamp, count: count as u32 });
        let buffer = |label, usage| self.device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size: 8 * count as u64, usage, mapped_at_creation: false });
        let resolve = buffer("wgkernels profile resolve", wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buffer("wgkernels profile read", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        let mut b = Batch::new(self, false);
        b.profile = Some(Profile { queries, resolve, read, labels: Vec::new(), capacity: max_dispatches });
        Ok(b)
    }

    /// [`Context::timed_batch`] with a timer made once ([`Context::gpu_timer`]).
    pub fn timed_batch_with(&self, timer: &GpuTimer) -> Batch<'_> {
        let mut b = Batch::new(self, false);
        b.timer = Some(timer.clone());
        b
    }

    /// Split `count` workgroups into a 2-D grid within the per-dimension limit. Kernels rebuild
    /// the linear index as `id.x + id.y * num.x` and ignore ids `>= count`.
    pub fn grid(&self, count: u64) -> Result<[u32; 3]> {
        let max = self.caps().limits.max_compute_workgroups_per_dimension.max(1) as u64;
        let x = count.clamp(1, max);
        let y = count.div_ceil(x);
        ensure(y <= max, || Error::Limit(format!("{count} workgroups exceed {max}x{max}")))?;
        Ok([x as u32, y as u32, 1])
    }
}

impl<'c> Batch<'c> {
    fn new(ctx: &'c Context, timed: bool) -> Self {
        let encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("wgkernels batch") });
        let timer = if timed { ctx.gpu_timer() } else { None };
        let align = ctx.caps().limits.min_uniform_buffer_offset_alignment.max(16) as u64;
        Batch {
            ctx,
            encoder,
            pass: None,
            chunks: Vec::new(),
            align,
            dispatches: 0,
            timer,
            copies: Vec::new(),
            cache: None,
            profile: None,
            probe: false,
            split: None,
            passes: 0,
            spent: Vec::new(),
        }
    }

    /// The probing batch of [`Context::prepare`] (never submitted).
    pub(crate) fn probe(ctx: &'c Context) -> Self {
        Batch { probe: true, ..Batch::new(ctx, false) }
    }

    /// Copy `src[0..len]` (written with [`HostUpload::write`] before this batch is submitted)
    /// into `dst`, ahead of the batch's dispatches: recorded before the first one (else an error).
    pub fn copy_from_host<T: Pod>(&mut self, src: &HostUpload<T>, len: usize, dst: &GpuBuffer<T>) -> Result<()> {
        ensure(self.dispatches == 0, || Error::Argument("copies from the host are recorded before a batch's first dispatch".into()))?;
        ensure(src.owner() == self.ctx.id(), || Error::ForeignBuffer { name: "copy source" })?;
        dst.check_owner(self.ctx, "copy destination")?;
        ensure(src.len() >= len, || Error::BufferTooSmall { name: "copy source", needed: len as u64, got: src.len() as u64 })?;
        dst.require("copy destination", len)?;
        ensure(dst.wgpu_buffer().usage().contains(wgpu::BufferUsages::COPY_DST), || Error::Argument("copy destination lacks COPY_DST usage".into()))?;
        let bytes = (len as u64 * std::mem::size_of::<T>() as u64).div_ceil(4) * 4;
        ensure(dst.offset() + bytes <= dst.wgpu_buffer().size(), || Error::Argument("copy past the destination's end".into()))?;
        if bytes > 0 {
            self.encoder.copy_buffer_to_buffer(&src.buffer, 0, dst.wgpu_buffer(), dst.offset(), bytes);
        }
        Ok(())
    }

    /// Copy `src[0..len]` into `dst` at the end of this batch (after its dispatches, in the same
    /// submission), so the host reads it after waiting for the batch ([`HostReadback::read_into`])
    /// with no submit or wait of its own.
    pub fn copy_to_host<T: Pod>(&mut self, src: &GpuBuffer<T>, len: usize, dst: &HostReadback<T>) -> Result<()> {
        src.check_owner(self.ctx, "copy source")?;
        ensure(dst.owner() == self.ctx.id(), || Error::ForeignBuffer { name: "copy destination" })?;
        src.require("copy source", len)?;
        ensure(dst.len() >= len, || Error::BufferTooSmall { name: "copy destination", needed: len as u64, got: dst.len() as u64 })?;
        ensure(src.wgpu_buffer().usage().contains(wgpu::BufferUsages::COPY_SRC), || Error::Argument("copy source lacks COPY_SRC usage".into()))?;
        // Whole 4-byte words (the copy alignment), within both padded buffers.
        let bytes = (len as u64 * std::mem::size_of::<T>() as u64).div_ceil(4) * 4;
        if bytes > 0 {
            self.copies.push((src.wgpu_buffer().clone(), src.offset(), dst.buffer.clone(), bytes));
        }
        Ok(())
    }

    pub fn context(&self) -> &'c Context {
        self.ctx
    }

    /// Reuse bind groups and parameter blocks from `cache` (see [`BindCache`]). A cache belongs
    /// to the first context that records with it; dispatches of a batch of another context
    /// through it fail with [`Error::ForeignBuffer`] (wgpu ids of two devices may be equal, so a
    /// shared cache could hand one context's bind group to the other).
    pub fn with_cache(mut self, cache: &'c BindCache) -> Self {
        self.cache = Some(CacheUse::new(cache));
        self
    }

    /// Submit the first `first` dispatches as soon as they are recorded, then parts twice as
    /// long as the one before (`first`, `2 first`, `4 first`, ..., the rest at
    /// [`Batch::submit`]): the GPU starts on a long batch (a prompt chunk: hundreds of
    /// dispatches) while the rest is recorded, and the batch is a few submissions, not many
    /// (each costs the GPU some idle time). The queue runs the parts in order, so the results
    /// are those of one submission, and waiting for the last waits for all. Copies to the host
    /// stay at the end of the last part. A dispatch that fails to record leaves the parts before
    /// it submitted. Timed batches time each part's pass and add them up (excluding any GPU
    /// idle time between parts); profiled batches are never split. `first` of 0 means never.
    pub fn submit_early(mut self, first: usize) -> Self {
        self.split = (first > 0).then_some((first, first));
        self
    }

    /// Dispatches recorded so far.
    pub fn len(&self) -> usize {
        self.dispatches
    }

    pub fn is_empty(&self) -> bool {
        self.dispatches == 0
    }

    fn param_slot(&mut self, bytes: &[u8]) -> Result<(usize, u64)> {
        let size = (bytes.len() as u64).max(16);
        let fits = |data: &Vec<u8>| (data.len() as u64).div_ceil(self.align) * self.align + size <= CHUNK;
        if !self.chunks.last().is_some_and(|(_, d)| fits(d)) {
            let buf = self.ctx.param_pool.lock().ok().and_then(|mut p| p.pop()).unwrap_or_else(|| {
                self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgkernels params"),
                    size: CHUNK,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            });
            self.chunks.push((buf, Vec::with_capacity(4096)));
        }
        let idx = self.chunks.len() - 1;
        let data = &mut self.chunks[idx].1;
        let off = (data.len() as u64).div_ceil(self.align) * self.align;
        data.resize(off as usize, 0);
        data.extend_from_slice(bytes);
        data.resize((off + size) as usize, 0);
        Ok((idx, off))
    }

    /// Record one dispatch of the pipeline `key` with `params` at binding 0 and `buffers` at
    /// bindings 1.. (in the order the key's [`crate::pipeline::PipelineDesc::bindings`] lists).
    /// Validates, before anything is recorded: binding counts and sizes against the device limits;
    /// that every buffer belongs to this batch's context ([`Error::ForeignBuffer`]); that no
    /// writable binding shares its buffer with another binding ([`Error::Aliased`]; bindings are
    /// whole buffers, so any two bindings of one buffer overlap).
    pub fn dispatch<K: PipelineKey, P: Pod>(&mut self, key: &K, params: &P, buffers: &[BufRef], workgroups: [u32; 3]) -> Result<()> {
        if self.probe {
            return self.ctx.note_pipeline(key);
        }
        let pipe = self.ctx.pipeline(key)?;
        let desc = &pipe.desc;
        ensure(std::mem::size_of::<P>() as u64 == desc.params_size, || {
            Error::Argument(format!("{}: params are {} bytes, layout says {}", pipe.label, std::mem::size_of::<P>(), desc.params_size))
        })?;
        ensure(buffers.len() == desc.bindings.len(), || Error::Argument(format!("{}: {} buffers for {} bindings", pipe.label, buffers.len(), desc.bindings.len())))?;
        for (b, spec) in buffers.iter().zip(desc.bindings) {
            ensure(b.owner == self.ctx.id(), || Error::ForeignBuffer { name: spec.name })?;
        }
        for (i, (a, sa)) in buffers.iter().zip(desc.bindings).enumerate() {
            for (b, sb) in buffers[i + 1..].iter().zip(&desc.bindings[i + 1..]) {
                let written = !sa.read_only || !sb.read_only;
                ensure(!(written && a.buffer == b.buffer && !self.ctx.is_dummy(a.buffer)), || Error::Aliased { first: sa.name, second: sb.name })?;
            }
        }
        let limits = &self.ctx.caps().limits;
        ensure(buffers.len() as u32 <= limits.max_storage_buffers_per_shader_stage, || {
            Error::Limit(format!("{} storage buffers > {}", buffers.len(), limits.max_storage_buffers_per_shader_stage))
        })?;
        for (b, spec) in buffers.iter().zip(desc.bindings) {
            ensure(b.size() <= limits.max_storage_buffer_binding_size, || Error::BindingTooLarge {
                name: spec.name,
                bytes: b.size(),
                limit: limits.max_storage_buffer_binding_size,
            })?;
        }
        for w in workgroups {
            ensure(w <= limits.max_compute_workgroups_per_dimension, || Error::Limit(format!("{w} workgroups > {} per dimension", limits.max_compute_workgroups_per_dimension)))?;
        }
        if workgroups.contains(&0) {
            return Ok(());
        }
        if desc.twin().is_some() {
            self.ctx.pipelines.native_dispatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        #[cfg(feature = "testkit")]
        {
            let native = if desc.twin().is_some() { self.ctx.options().native_testing.executor.clone() } else { None };
            if let Some(exec) = native.or_else(|| self.ctx.options().dispatch_executor.as_ref().map(|d| d.0.clone())) {
                ensure(buffers.iter().all(|b| b.range.is_none()), || Error::Argument(format!("{}: a testing executor takes whole buffers, not views", pipe.label)))?;
                self.flush()?;
                let raw: Vec<&wgpu::Buffer> = buffers.iter().map(|b| b.buffer).collect();
                return self.ctx.execute_on_host(exec.as_ref(), &pipe, bytemuck::bytes_of(params), &raw, workgroups);
            }
        }
        let (bg, offset) = match &self.cache {
            Some(c) => c.0.bind_group(self.ctx, &pipe, bytemuck::bytes_of(params), buffers, self.align)?,
            None => self.fresh_bind_group(&pipe, bytemuck::bytes_of(params), buffers)?,
        };
        if let Some(p) = &mut self.profile {
            let i = p.labels.len();
            ensure(i < p.capacity, || Error::Limit(format!("a profiled batch of {} dispatches is full", p.capacity)))?;
            drop(self.pass.take());
            let at = |k: usize| Some(u32::try_from(k).expect("below QUERY_SET_MAX_QUERIES"));
            let tw = wgpu::ComputePassTimestampWrites { query_set: &p.queries, beginning_of_pass_write_index: at(2 * i), end_of_pass_write_index: at(2 * i + 1) };
            let pass = self.encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(&pipe.label), timestamp_writes: Some(tw) });
            self.pass = Some(pass.forget_lifetime());
            p.labels.push(pipe.label.clone());
        } else if self.pass.is_none() {
            // Each pass its own timer pair (the parts of a split batch; a pass begun again after
            // a testing executor's flush); past the last pair, the last is written again.
            let i = self.passes.min(TIMED_PASSES - 1);
            let tw = self.timer.as_ref().map(|t| wgpu::ComputePassTimestampWrites {
                query_set: &t.queries,
                beginning_of_pass_write_index: Some(2 * i),
                end_of_pass_write_index: Some(2 * i + 1),
            });
            let pass = self.encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("wgkernels"), timestamp_writes: tw });
            self.pass = Some(pass.forget_lifetime());
            self.passes = i + 1;
        }
        let pass = self.pass.as_mut().expect("pass was just created");
        pass.set_pipeline(&pipe.pipeline);
        pass.set_bind_group(0, &bg, &[offset]);
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
        self.dispatches += 1;
        if let Some((at, len)) = self.split.filter(|&(at, _)| at == self.dispatches) {
            if self.profile.is_none() && self.passes < TIMED_PASSES {
                self.submit_part();
            }
            self.split = len.checked_mul(2).and_then(|l| Some((at.checked_add(l)?, l)));
        }
        Ok(())
    }

    /// Close the pass, queue the parameter uploads, submit what is recorded and go on in a
    /// fresh encoder ([`Batch::submit_early`]).
    fn submit_part(&mut self) {
        drop(self.pass.take());
        self.upload_params();
        self.spent.extend(self.chunks.drain(..).map(|(b, _)| b));
        let fresh = self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("wgkernels batch") });
        self.ctx.queue.submit(Some(std::mem::replace(&mut self.encoder, fresh).finish()));
    }

    /// Queue the uploads of this batch's parameter blocks and of the bind cache's new ones
    /// (ordered by the queue before the next submission).
    fn upload_params(&self) {
        for (buf, data) in &self.chunks {
            self.ctx.queue.write_buffer(buf, 0, data);
        }
        if let Some(c) = &self.cache {
            c.0.flush(self.ctx);
        }
    }

    /// A bind group for one dispatch and the offset of its parameters in this batch's arena.
    fn fresh_bind_group(&mut self, pipe: &Pipeline, params: &[u8], buffers: &[BufRef]) -> Result<(wgpu::BindGroup, u32)> {
        let (chunk, off) = self.param_slot(params)?;
        let group = new_bind_group(self.ctx, pipe, &self.chunks[chunk].0, buffers);
        Ok((group, chunk_offset(off)))
    }

    /// Submit what is recorded so far and wait for it, then go on recording in a fresh encoder
    /// (for the host executor of Native dispatches, a testing hook: see `native.rs`).
    #[cfg(feature = "testkit")]
    pub(crate) fn flush(&mut self) -> Result<()> {
        crate::context::blocking::wait("a testing executor's flush");
        drop(self.pass.take());
        self.upload_params();
        let fresh = self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("wgkernels batch") });
        let index = self.ctx.queue.submit(Some(std::mem::replace(&mut self.encoder, fresh).finish()));
        self.ctx.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }

    /// Close the pass, upload the parameters and submit.
    pub fn submit(self) -> Result<Submitted<'c>> {
        self.finish()?.submit()
    }

    /// Close the pass, queue the parameter uploads and finish the command buffer without
    /// submitting it: the CPU work of a batch, done ahead (e.g. the next decode step, recorded
    /// while the GPU runs the current one). [`Recorded::submit`] submits it. Buffers written with
    /// [`Context::write`] before that submit are seen by the batch.
    pub fn finish(mut self) -> Result<Recorded<'c>> {
        drop(self.pass.take());
        let mut timer = None;
        if let Some(t) = &self.timer {
            if self.passes > 0 {
                let n = 2 * self.passes;
                self.encoder.resolve_query_set(&t.queries, 0..n, &t.resolve, 0);
                self.encoder.copy_buffer_to_buffer(&t.resolve, 0, &t.read, 0, 8 * n as u64);
                timer = Some((t.read.clone(), self.passes));
            }
        }
        let mut profile = None;
        if let Some(p) = self.profile.take() {
            let n = p.labels.len() as u32 * 2;
            if n > 0 {
                self.encoder.resolve_query_set(&p.queries, 0..n, &p.resolve, 0);
                self.encoder.copy_buffer_to_buffer(&p.resolve, 0, &p.read, 0, 8 * n as u64);
            }
            profile = Some((p.read, p.labels));
        }
        for (src, offset, dst, bytes) in &self.copies {
            self.encoder.copy_buffer_to_buffer(src, *offset, dst, 0, *bytes);
        }
        self.upload_params();
        let commands = self.encoder.finish();
        let mut params = std::mem::take(&mut self.spent);
        params.extend(self.chunks.drain(..).map(|(b, _)| b));
        Ok(Recorded { ctx: self.ctx, commands: Some(commands), params, timer, profile })
    }

    /// Submit and wait for completion (blocking: native code; see [`Batch::run_async`]).
    pub fn run(self) -> Result<()> {
        self.submit()?.wait()
    }

    /// Submit and await completion without blocking ([`Submitted::done`]). Record the batch with
    /// [`Context::batch_async`] (or after [`Context::prepare`]) so that recording did not block
    /// either.
    pub async fn run_async(self) -> Result<()> {
        crate::context::blocking::guarded(async move { self.submit()?.done().await }).await
    }
}

impl Submitted<'_> {
    /// Completion of the batch (and of everything submitted before it), awaited: wgpu's
    /// work-done callback completes it, never a wait inside. On the web the browser runs the
    /// callback; natively the device must be polled meanwhile (see [`crate::context`] on the
    /// async API).
    pub async fn done(&self) -> Result<()> {
        crate::context::blocking::guarded(async {
            let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
            self.ctx.queue.on_submitted_work_done(move || {
                let _ = tx.send(());
            });
            rx.receive().await.ok_or_else(|| Error::Device("the work-done callback was dropped (device lost?)".into()))
        })
        .await
    }

    /// Wait for the batch (blocking: native code; see [`Submitted::done`]).
    pub fn wait(&self) -> Result<()> {
        crate::context::blocking::wait("Submitted::wait");
        self.ctx.device.poll(wgpu::PollType::Wait { submission_index: Some(self.index.clone()), timeout: None }).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }

    /// GPU time of the timed pass (the sum of its parts' passes, [`Batch::submit_early`]) in
    /// nanoseconds (waits for the batch: one wait, which also
    /// completes the maps asked for before it, e.g. [`HostReadback::request_map`]). `None` if
    /// the batch was not timed, was empty, or the adapter has no timestamp queries.
    pub fn gpu_ns(self) -> Result<Option<f64>> {
        let Some((read, passes)) = &self.timer else {
            self.wait()?;
            return Ok(None);
        };
        let t = self.read_ticks(read, 2 * *passes as usize)?;
        let ticks: u64 = t.chunks_exact(2).map(|p| p[1].saturating_sub(p[0])).sum();
        let ticks = ticks as f64;
        Ok(Some(ticks * self.ctx.queue.get_timestamp_period() as f64))
    }

    /// The GPU time of each dispatch of a profiled batch ([`Context::profiled_batch`]) in
    /// nanoseconds, with its pipeline's label, in recording order (waits for the batch). `None`
    /// if the batch was not profiled.
    pub fn profile(self) -> Result<Option<Vec<(String, f64)>>> {
        let Some((read, labels)) = &self.profile else {
            self.wait()?;
            return Ok(None);
        };
        if labels.is_empty() {
            self.wait()?;
            return Ok(Some(Vec::new()));
        }
        let t = self.read_ticks(read, 2 * labels.len())?;
        let period = self.ctx.queue.get_timestamp_period() as f64;
        Ok(Some(labels.iter().zip(t.chunks_exact(2)).map(|(l, p)| (l.clone(), p[1].saturating_sub(p[0]) as f64 * period)).collect()))
    }

    /// Wait for the batch, then read `n` timestamps from `read`.
    fn read_ticks(&self, read: &wgpu::Buffer, n: usize) -> Result<Vec<u64>> {
        let slice = read.slice(..8 * n as u64);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        self.wait()?;
        let view = match slice.get_mapped_range() {
            Ok(v) => v,
            Err(_) => {
                // The map callback had not run yet: wait for it.
                crate::context::blocking::wait("timestamp read-back");
                self.ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Device(e.to_string()))?;
                slice.get_mapped_range().map_err(|e| Error::Readback(e.to_string()))?
            }
        };
        let t = bytemuck::pod_collect_to_vec(&view[..]);
        drop(view);
        read.unmap();
        Ok(t)
    }
}

/// Bind groups and parameter blocks kept across batches (see the module docs). Share one per
/// context among the batches of a loop: `ctx.batch().with_cache(&cache)`. Thread-safe.
pub struct BindCache {
    inner: Mutex<CacheInner>,
    capacity: usize,
}

/// A uniform chunk of a [`BindCache`]: buffer, host mirror, dirty byte range not yet uploaded.
type CacheChunk = (wgpu::Buffer, Vec<u8>, Option<(usize, usize)>);

#[derive(Default)]
struct CacheInner {
    /// The context whose bind groups and uniform chunks this cache holds (set at first use).
    owner: Option<ContextId>,
    /// Uniform chunks: buffer, host mirror, dirty byte range not yet uploaded.
    chunks: Vec<CacheChunk>,
    /// Parameter bytes -> their slot.
    slots: HashMap<Vec<u8>, Slot>,
    /// Slots of evicted parameter blocks, by the bytes they span: (chunk, offset).
    free: HashMap<u64, Vec<(usize, u64)>>,
    /// Hash of (layout, uniform chunk, buffers) -> entries with that hash.
    groups: HashMap<u64, Vec<CachedGroup>>,
    len: usize,
    /// Parameter blocks past which (and past the capacity) the next batch makes room: twice
    /// what the last eviction kept.
    slot_mark: usize,
    /// Batches recording with this cache now (it is only cleared when none is).
    active: usize,
    /// Batches begun with this cache: what an entry last used was begun at is its age.
    epoch: u64,
    /// [`BindCache::clear`] was called while a batch was recording: clear when the next begins.
    clear_pending: bool,
}

/// Where a parameter block lives in the cache's uniform chunks, and the batch that last used it.
#[derive(Clone, Copy)]
struct Slot {
    at: (usize, u64),
    used: u64,
}

struct CachedGroup {
    layout: wgpu::BindGroupLayout,
    /// The uniform chunk at binding 0.
    chunk: usize,
    used: u64,
    /// Each binding's buffer and range ([`BufRef::range`]).
    buffers: Vec<(wgpu::Buffer, Option<(u64, u64)>)>,
    group: wgpu::BindGroup,
}

/// A batch's use of a cache (counted, so the cache is never cleared under a recording batch).
struct CacheUse<'c>(&'c BindCache);

impl<'c> CacheUse<'c> {
    fn new(cache: &'c BindCache) -> Self {
        if let Ok(mut g) = cache.inner.lock() {
            g.epoch += 1;
            if g.active == 0 && g.clear_pending {
                g.clear();
            } else if g.active == 0 && g.full(cache.capacity) {
                g.evict(cache.capacity);
            }
            g.active += 1;
        }
        CacheUse(cache)
    }
}

impl Drop for CacheUse<'_> {
    fn drop(&mut self) {
        if let Ok(mut g) = self.0.inner.lock() {
            g.active = g.active.saturating_sub(1);
        }
    }
}

/// Uniform chunks a cache may grow to (4 MiB) before it starts over.
const MAX_CACHE_CHUNKS: usize = 64;
/// Entries the last this many batches used survive an eviction.
const KEEP_BATCHES: u64 = 4;

impl CacheInner {
    /// Whether to make room before the next batch: more than `capacity` bind groups, more
    /// parameter blocks than `capacity` and twice those the last eviction kept, or too many chunks.
    fn full(&self, capacity: usize) -> bool {
        self.len > capacity || self.slots.len() > capacity.max(self.slot_mark) || self.chunks.len() > MAX_CACHE_CHUNKS
    }

    /// Make room (between batches): drop the bind groups and parameter blocks that none of the
    /// last [`KEEP_BATCHES`] batches used (a loop's changing parameters, e.g. a decode step's
    /// position, while the steady ones stay), their slots free for new blocks; everything when
    /// that leaves more than half of `capacity` bind groups or the chunks over their limit. A
    /// bind group names a uniform chunk, not a slot in it (the parameters' offset is dynamic), so
    /// a loop whose parameters change makes no new bind groups, only new parameter blocks.
    fn evict(&mut self, capacity: usize) {
        let keep = self.epoch.saturating_sub(KEEP_BATCHES);
        let mut len = 0;
        self.groups.retain(|_, v| {
            v.retain(|c| c.used >= keep);
            len += v.len();
            !v.is_empty()
        });
        self.len = len;
        let free = &mut self.free;
        self.slots.retain(|params, s| {
            let live = s.used >= keep;
            if !live {
                free.entry(slot_span(params.len())).or_default().push(s.at);
            }
            live
        });
        self.slot_mark = 2 * self.slots.len();
        if self.len > capacity / 2 || self.chunks.len() > MAX_CACHE_CHUNKS {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.groups.clear();
        self.len = 0;
        self.slot_mark = 0;
        self.clear_pending = false;
        self.chunks.truncate(MAX_CACHE_CHUNKS);
        for (_, data, dirty) in &mut self.chunks {
            data.clear();
            *dirty = None;
        }
    }
}

impl Default for BindCache {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl BindCache {
    /// A cache that makes room (between batches) once it holds more than `capacity` bind
    /// groups, or more than `capacity` parameter blocks and twice as many as it kept the last
    /// time: it drops those the last few batches did not use, or everything when the recent bind
    /// groups alone fill more than half of `capacity`.
    pub fn new(capacity: usize) -> Self {
        BindCache { inner: Mutex::new(CacheInner::default()), capacity: capacity.max(1) }
    }

    /// Bind groups held now.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.len).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every bind group (and the buffer references they hold). Takes effect at once when no
    /// batch is recording with the cache, else when the next batch starts.
    pub fn clear(&self) {
        if let Ok(mut g) = self.inner.lock() {
            if g.active == 0 {
                g.clear();
            } else {
                g.clear_pending = true;
            }
        }
    }

    /// The bind group of a dispatch (made once per layout, uniform chunk and buffers) and the
    /// offset of its parameter block (stored once per distinct block) in that chunk.
    fn bind_group(&self, ctx: &Context, pipe: &Pipeline, params: &[u8], buffers: &[BufRef], align: u64) -> Result<(wgpu::BindGroup, u32)> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Every key below (layouts, buffers, uniform chunks) is only unique within one device.
        match g.owner {
            None => g.owner = Some(ctx.id()),
            Some(o) => ensure(o == ctx.id(), || Error::ForeignBuffer { name: "BindCache" })?,
        }
        let epoch = g.epoch;
        let (chunk, off) = match g.slots.get_mut(params) {
            Some(s) => {
                s.used = epoch;
                s.at
            }
            None => {
                let at = g.new_slot(ctx, params, align);
                g.slots.insert(params.to_vec(), Slot { at, used: epoch });
                at
            }
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        pipe.layout.hash(&mut h);
        chunk.hash(&mut h);
        for b in buffers {
            b.buffer.hash(&mut h);
            b.range.hash(&mut h);
        }
        let key = h.finish();
        if let Some(hit) = g.groups.get_mut(&key).and_then(|v| {
            v.iter_mut().find(|c| {
                c.layout == pipe.layout && c.chunk == chunk && c.buffers.len() == buffers.len() && c.buffers.iter().zip(buffers).all(|(a, b)| a.0 == *b.buffer && a.1 == b.range)
            })
        }) {
            hit.used = epoch;
            return Ok((hit.group.clone(), chunk_offset(off)));
        }
        let group = new_bind_group(ctx, pipe, &g.chunks[chunk].0, buffers);
        let cached = CachedGroup { layout: pipe.layout.clone(), chunk, used: epoch, buffers: buffers.iter().map(|b| (b.buffer.clone(), b.range)).collect(), group: group.clone() };
        g.groups.entry(key).or_default().push(cached);
        g.len += 1;
        Ok((group, chunk_offset(off)))
    }

    /// Upload the parameter blocks added since the last flush (queued before the next submit).
    fn flush(&self, ctx: &Context) {
        let Ok(mut g) = self.inner.lock() else { return };
        // Only the owner's queue may write the owner's chunks (another context's batch holding
        // this cache recorded nothing through it: bind_group refused).
        if g.owner != Some(ctx.id()) {
            return;
        }
        let queue = &ctx.queue;
        for (buf, data, dirty) in &mut g.chunks {
            if let Some((lo, hi)) = dirty.take() {
                queue.write_buffer(buf, lo as u64, &data[lo..hi]);
            }
        }
    }
}

/// A bind group of `pipe`'s layout: the parameter block's uniform chunk `params` at binding 0
/// (its offset given at dispatch), `buffers` after it.
fn new_bind_group(ctx: &Context, pipe: &Pipeline, params: &wgpu::Buffer, buffers: &[BufRef]) -> wgpu::BindGroup {
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: params, offset: 0, size: wgpu::BufferSize::new(pipe.desc.params_size) }),
    }];
    for (i, b) in buffers.iter().enumerate() {
        entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.binding() });
    }
    ctx.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &pipe.layout, entries: &entries })
}

/// A parameter block's offset in its uniform chunk, as a dynamic offset.
fn chunk_offset(off: u64) -> u32 {
    const _: () = assert!(CHUNK <= u32::MAX as u64);
    off as u32
}

/// Bytes a parameter block of `len` bytes takes in a cache chunk (padded to 16).
fn slot_span(len: usize) -> u64 {
    (len as u64).max(16).div_ceil(16) * 16
}

impl CacheInner {
    /// Store `params` in a free slot of its span, else a fresh aligned one (padded to 16 bytes).
    fn new_slot(&mut self, ctx: &Context, params: &[u8], align: u64) -> (usize, u64) {
        let size = slot_span(params.len());
        let (idx, off) = match self.free.get_mut(&size).and_then(|f| f.pop()) {
            Some(at) => at,
            None => {
                let fits = |data: &Vec<u8>| (data.len() as u64).div_ceil(align) * align + size <= CHUNK;
                let idx = match self.chunks.iter().position(|(_, d, _)| fits(d)) {
                    Some(i) => i,
                    None => {
                        let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some("wgkernels cached params"),
                            size: CHUNK,
                            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        });
                        self.chunks.push((buf, Vec::with_capacity(CHUNK as usize), None));
                        self.chunks.len() - 1
                    }
                };
                let data = &mut self.chunks[idx].1;
                let off = (data.len() as u64).div_ceil(align) * align;
                data.resize((off + size) as usize, 0);
                (idx, off)
            }
        };
        let (_, data, dirty) = &mut self.chunks[idx];
        let (lo, hi) = (off as usize, (off + size) as usize);
        data[lo..lo + params.len()].copy_from_slice(params);
        data[lo + params.len()..hi].fill(0);
        *dirty = Some(dirty.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        (idx, off)
    }
}
