//! Typed GPU buffers of plain-old-data, one upload path and one readback path.

use crate::context::{Context, ContextId};
use crate::error::{ensure, Error, Result};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Element types kernels store tensors in (f32, f16; RoPE and attention take either).
pub trait Elem: Pod {
    const F16: bool;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}
impl Elem for f32 {
    const F16: bool = false;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}
impl Elem for half::f16 {
    const F16: bool = true;
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}

/// Physical buffers are padded to this many bytes, so kernels may load `vec4`s up to the padded end.
pub const BUFFER_ALIGN: u64 = 16;

/// A storage buffer holding `len` elements of `T` (physically padded to [`BUFFER_ALIGN`]). It
/// belongs to the context that made it ([`ContextId`]): batches and readbacks of another context
/// reject it with [`Error::ForeignBuffer`].
pub struct GpuBuffer<T: Pod> {
    buffer: wgpu::Buffer,
    len: usize,
    owner: ContextId,
    /// Byte offset of element 0 in `buffer`: 0, except for a view ([`GpuBuffer::view`]).
    offset: u64,
    /// A view: dispatches bind only its range.
    view: bool,
    _t: PhantomData<T>,
}

/// A buffer as a dispatch binds it: the wgpu buffer and the context it belongs to. Made by
/// [`GpuBuffer::raw`] (and inside the crate for a context's own scratch buffers); only
/// [`crate::Batch::dispatch`] looks inside, after checking the owner.
#[derive(Clone, Copy, Debug)]
pub struct BufRef<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) owner: ContextId,
    /// The bound range: the whole buffer (`None`), or a view's byte offset and size.
    pub(crate) range: Option<(u64, u64)>,
}

impl<'a> BufRef<'a> {
    /// The context the buffer belongs to.
    pub fn owner(&self) -> ContextId {
        self.owner
    }
    /// Size in bytes of the bound range (the whole wgpu buffer, unless a view).
    pub fn size(&self) -> u64 {
        self.range.map_or_else(|| self.buffer.size(), |(_, size)| size)
    }
    /// The binding resource of this range.
    pub(crate) fn binding(&self) -> wgpu::BindingResource<'a> {
        match self.range {
            None => self.buffer.as_entire_binding(),
            Some((offset, size)) => wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: self.buffer, offset, size: wgpu::BufferSize::new(size) }),
        }
    }
}

impl<T: Pod> std::fmt::Debug for GpuBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer<{}>[{}]", std::any::type_name::<T>(), self.len)
    }
}

fn padded_bytes<T>(len: usize) -> Result<u64> {
    let bytes = (len as u64).checked_mul(std::mem::size_of::<T>() as u64).ok_or_else(|| Error::Argument(format!("buffer of {len} elements overflows")))?;
    bytes.div_ceil(BUFFER_ALIGN).max(1).checked_mul(BUFFER_ALIGN).ok_or_else(|| Error::Argument(format!("buffer of {len} elements overflows")))
}

impl<T: Pod> GpuBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The handle kernels pass to [`crate::Batch::dispatch`]: the buffer and its owning context.
    pub fn raw(&self) -> BufRef<'_> {
        let range = self.view.then(|| (self.offset, self.binding_bytes()));
        BufRef { buffer: &self.buffer, owner: self.owner, range }
    }

    /// Bytes a dispatch binds: `len` elements rounded up to 16 (kernels may load vec4s up to
    /// the padded end), within the wgpu buffer.
    fn binding_bytes(&self) -> u64 {
        // Construction checked len * size_of::<T>() and that the padded range fits the buffer.
        padded_bytes::<T>(self.len).unwrap_or(0).min(self.buffer.size() - self.offset)
    }

    /// A buffer of `len` elements starting at element `start` of this one, sharing its memory
    /// (no copy): what a dispatch binds it writes or reads there. `start`'s byte offset must be a
    /// multiple of the device's `min_storage_buffer_offset_alignment`
    /// ([`GpuBuffer::view_aligned`] tells in advance). Only for kernels that bind buffers through
    /// [`GpuBuffer::raw`]; [`GpuBuffer::wgpu_buffer`] of a view is the whole underlying buffer.
    pub(crate) fn view(&self, ctx: &Context, start: usize, len: usize) -> Result<GpuBuffer<T>> {
        self.check_owner(ctx, "view of")?;
        let end = start.checked_add(len).ok_or_else(|| Error::Argument(format!("view {start} + {len} overflows")))?;
        ensure(len > 0 && end <= self.len, || Error::Argument(format!("view {start}..{end} of a buffer of {} elements", self.len)))?;
        ensure(self.view_aligned(ctx, start), || Error::Argument(format!("view at element {start}: offset not a multiple of the storage offset alignment")))?;
        let offset = self.offset + start as u64 * std::mem::size_of::<T>() as u64;
        // The padded view ends at most at this buffer's padded end (its start is 16-aligned).
        ensure(offset + padded_bytes::<T>(len)? <= self.buffer.size(), || Error::Argument(format!("view {start}..{end}: padded end past the buffer")))?;
        Ok(GpuBuffer { buffer: self.buffer.clone(), len, owner: self.owner, offset, view: true, _t: PhantomData })
    }

    /// Whether a view starting at element `start` is aligned for binding on `ctx`'s device.
    pub(crate) fn view_aligned(&self, ctx: &Context, start: usize) -> bool {
        let align = ctx.device.limits().min_storage_buffer_offset_alignment.max(16) as u64;
        (start as u64).checked_mul(std::mem::size_of::<T>() as u64).and_then(|b| b.checked_add(self.offset)).is_some_and(|b| b % align == 0)
    }

    /// Byte offset of element 0 in [`GpuBuffer::wgpu_buffer`] (0 unless a view).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying wgpu buffer (size = `len * size_of::<T>()` rounded up to 16 bytes; for a
    /// view, the whole buffer, element 0 at [`GpuBuffer::offset`]), for
    /// an application's own wgpu work (copies, its own passes). wgkernels' dispatches take
    /// [`GpuBuffer::raw`] instead, which carries the owner check.
    pub fn wgpu_buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// The context this buffer belongs to.
    pub fn owner(&self) -> ContextId {
        self.owner
    }

    /// Adopt an existing wgpu buffer as a buffer of `ctx` (usage must include STORAGE; COPY_SRC
    /// to read it back). Its size must cover `len` elements rounded up to 16 bytes. The buffer
    /// must have been created on `ctx.device()`: wgpu cannot tell, and a buffer of another device
    /// bound in `ctx`'s dispatches would name an unrelated resource of this one.
    pub fn from_raw(ctx: &Context, buffer: wgpu::Buffer, len: usize) -> Result<Self> {
        let need = padded_bytes::<T>(len)?;
        ensure(buffer.size() >= need, || Error::BufferTooSmall { name: "raw buffer (bytes)", needed: need, got: buffer.size() })?;
        ensure(buffer.usage().contains(wgpu::BufferUsages::STORAGE), || Error::Argument("buffer lacks STORAGE usage".into()))?;
        Ok(GpuBuffer { buffer, len, owner: ctx.id(), offset: 0, view: false, _t: PhantomData })
    }

    /// Check that this buffer holds at least `needed` elements.
    pub fn require(&self, name: &'static str, needed: usize) -> Result<()> {
        ensure(self.len >= needed, || Error::BufferTooSmall { name, needed: needed as u64, got: self.len as u64 })
    }

    /// Logical size in bytes (`len * size_of::<T>()`, without the padding).
    pub fn bytes_len(&self) -> u64 {
        // Cannot overflow: construction checked len * size_of::<T>() (padded_bytes).
        self.len as u64 * std::mem::size_of::<T>() as u64
    }

    /// [`Error::ForeignBuffer`] unless this buffer belongs to `ctx`.
    pub fn check_owner(&self, ctx: &Context, name: &'static str) -> Result<()> {
        ensure(self.owner == ctx.id(), || Error::ForeignBuffer { name })
    }
}

/// The map state of a host staging buffer ([`HostReadback`], [`HostUpload`]), set by wgpu's map
/// callback: idle (unmapped, nothing asked), asked, mapped, or failed.
struct MapState(Arc<AtomicU8>);

const MAP_IDLE: u8 = 0;
const MAP_ASKED: u8 = 1;
const MAP_DONE: u8 = 2;
const MAP_FAILED: u8 = 3;

impl MapState {
    fn new(state: u8) -> MapState {
        MapState(Arc::new(AtomicU8::new(state)))
    }

    /// Ask for `buffer` to be mapped once the work submitted so far is done.
    fn request(&self, buffer: &wgpu::Buffer, mode: wgpu::MapMode, what: &str) -> Result<()> {
        ensure(self.0.compare_exchange(MAP_IDLE, MAP_ASKED, Ordering::AcqRel, Ordering::Acquire).is_ok(), || Error::Readback(format!("{what}: map already requested")))?;
        let state = self.0.clone();
        buffer.slice(..).map_async(mode, move |r| state.store(if r.is_ok() { MAP_DONE } else { MAP_FAILED }, Ordering::Release));
        Ok(())
    }

    /// Check that `ctx` made the buffer (`owner`) and that `n` elements fit its `len`.
    fn check(ctx: &Context, owner: ContextId, len: usize, n: usize, what: &'static str) -> Result<()> {
        ensure(ctx.id() == owner, || Error::ForeignBuffer { name: what })?;
        ensure(n <= len, || Error::BufferTooSmall { name: what, needed: n as u64, got: len as u64 })
    }

    /// Wait for the requested map (polling the device if it has not completed) and take it:
    /// `Ok` when the buffer is mapped (the caller uses and unmaps it). The state is idle after.
    fn take(&self, ctx: &Context, what: &str) -> Result<()> {
        if self.0.load(Ordering::Acquire) == MAP_ASKED {
            crate::context::blocking::wait("host buffer map");
            ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Readback(e.to_string()))?;
        }
        match self.0.swap(MAP_IDLE, Ordering::AcqRel) {
            MAP_DONE => Ok(()),
            MAP_IDLE => Err(Error::Readback(format!("{what}: no map requested"))),
            // Nothing is mapped (a failed or never completed map); the next request starts afresh.
            _ => Err(Error::Readback(format!("{what}: map failed"))),
        }
    }
}

/// A host-readable buffer of `len` elements of `T`, made once and filled by batches
/// ([`crate::Batch::copy_to_host`]: the copy is part of the batch's own submission). After that
/// batch is submitted: [`HostReadback::request_map`], wait for the batch (one wait for both), then
/// [`HostReadback::read_into`]. Reusable as soon as `read_into` returned (it unmaps); submitting a
/// batch that copies into it while it is mapped is a wgpu validation error.
pub struct HostReadback<T: Pod> {
    pub(crate) buffer: wgpu::Buffer,
    len: usize,
    owner: ContextId,
    state: MapState,
    _t: PhantomData<T>,
}

impl<T: Pod> HostReadback<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn owner(&self) -> ContextId {
        self.owner
    }

    /// Ask wgpu to map the buffer once the work submitted so far is done; the next wait on that
    /// work (e.g. [`crate::batch::Submitted::wait`]) completes the map. Asking twice before a
    /// [`HostReadback::read_into`] is an error.
    pub fn request_map(&self) -> Result<()> {
        self.state.request(&self.buffer, wgpu::MapMode::Read, "host readback")
    }

    /// Copy the first `out.len()` elements into `out` and unmap. Waits for the device if the map
    /// asked for by [`HostReadback::request_map`] has not completed yet.
    pub fn read_into(&self, ctx: &Context, out: &mut [T]) -> Result<()> {
        MapState::check(ctx, self.owner, self.len, out.len(), "host readback")?;
        self.state.take(ctx, "host readback")?;
        let result = {
            let view = self.buffer.slice(..).get_mapped_range().map_err(|e| Error::Readback(e.to_string()));
            // The mapped range is only 4-byte aligned: copy bytes, not a cast slice.
            let bytes = bytemuck::cast_slice_mut::<T, u8>(out);
            view.map(|v| bytes.copy_from_slice(&v[..bytes.len()]))
        };
        self.buffer.unmap();
        result
    }
}

/// A host-writable buffer of `len` elements of `T` that batches copy from at their start
/// ([`crate::Batch::copy_from_host`]), made once: a per-step upload with no staging buffer made
/// per write (as [`Context::write`] makes inside wgpu). [`HostUpload::write`] fills it (mapped
/// at creation; later, after [`HostUpload::request_map`] following the submit of the batch that
/// read it, completed by the next wait) and unmaps it for the batch's submit.
pub struct HostUpload<T: Pod> {
    pub(crate) buffer: wgpu::Buffer,
    len: usize,
    owner: ContextId,
    state: MapState,
    _t: PhantomData<T>,
}

impl<T: Pod> HostUpload<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn owner(&self) -> ContextId {
        self.owner
    }

    /// Ask wgpu to map the buffer for writing once the work submitted so far is done (call after
    /// submitting the batch that copies from it).
    pub fn request_map(&self) -> Result<()> {
        self.state.request(&self.buffer, wgpu::MapMode::Write, "host upload")
    }

    /// Write `data` at the start and unmap. Without a map asked for since the last write, asks
    /// for one and waits for the device.
    pub fn write(&self, ctx: &Context, data: &[T]) -> Result<()> {
        MapState::check(ctx, self.owner, self.len, data.len(), "host upload")?;
        if self.state.0.load(Ordering::Acquire) == MAP_IDLE {
            self.request_map()?;
        }
        self.state.take(ctx, "host upload")?;
        let result = {
            let view = self.buffer.slice(..).get_mapped_range_mut().map_err(|e| Error::Argument(e.to_string()));
            let bytes: &[u8] = bytemuck::cast_slice(data);
            view.map(|mut v| v.slice(..bytes.len()).copy_from_slice(bytes))
        };
        self.buffer.unmap();
        result
    }
}

/// The scratch slots of [`Context::scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scratch {
    /// Split-K partial sums (`kernels::splitk`).
    SplitK,
    /// The Matrix prefill's staged f16 K and V (`kernels::attention::prefill_matrix`).
    PrefillK,
    PrefillV,
    /// The Matrix prefill's staged f16 Q (rotated, scaled, in the kernel's row order).
    PrefillQ,
}

/// Number of [`Scratch`] slots.
pub(crate) const SCRATCH_SLOTS: usize = 4;

impl Context {
    /// A [`HostReadback`] of `len` elements.
    pub fn host_readback<T: Pod>(&self, len: usize) -> Result<HostReadback<T>> {
        let buffer = self.host_buffer::<T>(len, "host readback", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, false)?;
        Ok(HostReadback { buffer, len, owner: self.id(), state: MapState::new(MAP_IDLE), _t: PhantomData })
    }

    /// A [`HostUpload`] of `len` elements (mapped, ready for its first write).
    pub fn host_upload<T: Pod>(&self, len: usize) -> Result<HostUpload<T>> {
        let buffer = self.host_buffer::<T>(len, "host upload", wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC, true)?;
        Ok(HostUpload { buffer, len, owner: self.id(), state: MapState::new(MAP_DONE), _t: PhantomData })
    }

    /// The mappable buffer of a [`HostReadback`] or [`HostUpload`] of `len` elements of `T`.
    fn host_buffer<T: Pod>(&self, len: usize, what: &str, usage: wgpu::BufferUsages, mapped: bool) -> Result<wgpu::Buffer> {
        let size = padded_bytes::<T>(len)?;
        let limit = self.caps().limits.max_buffer_size;
        ensure(size <= limit, || Error::Limit(format!("{what} of {size} bytes over max_buffer_size {limit}")))?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor { label: Some(&format!("wgkernels {what}")), size, usage, mapped_at_creation: mapped }))
    }

    fn create_storage(&self, bytes: u64, label: &str, mapped: bool) -> Result<wgpu::Buffer> {
        let limit = self.caps().limits.max_buffer_size;
        ensure(bytes <= limit, || Error::Limit(format!("buffer `{label}` of {bytes} bytes over max_buffer_size {limit}")))?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: mapped,
        }))
    }

    /// Upload a slice into a new storage buffer.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<GpuBuffer<T>> {
        let buffer = self.create_storage(padded_bytes::<T>(data.len())?, "wgkernels upload", true)?;
        {
            let src: &[u8] = bytemuck::cast_slice(data);
            let mut view = buffer.slice(..).get_mapped_range_mut().map_err(|e| Error::Argument(e.to_string()))?;
            view.slice(..src.len()).copy_from_slice(src);
        }
        buffer.unmap();
        Ok(GpuBuffer { buffer, len: data.len(), owner: self.id(), offset: 0, view: false, _t: PhantomData })
    }

    /// A new zero-filled storage buffer of `len` elements.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<GpuBuffer<T>> {
        let buffer = self.create_storage(padded_bytes::<T>(len)?, "wgkernels buffer", false)?;
        Ok(GpuBuffer { buffer, len, owner: self.id(), offset: 0, view: false, _t: PhantomData })
    }

    /// Scratch buffer `slot` ([`Scratch`]) of at least `bytes` bytes, for intermediate results that
    /// never outlive the operation recording them: one buffer per slot and context, grown to the
    /// next power of two when a call needs more, instead of a new allocation (and its zero fill)
    /// per call. Its contents are undefined, so a user must write every element it reads.
    /// Sharing a slot between operations, batches and threads is safe: wgpu orders the accesses
    /// of every dispatch that binds it (a barrier between one operation's reads and the next
    /// one's writes). An operation that needs two scratch buffers at once takes two slots.
    pub(crate) fn scratch(&self, slot: Scratch, bytes: u64) -> Result<wgpu::Buffer> {
        let mut slots = self.scratch.lock().map_err(|_| Error::Argument("scratch buffer lock poisoned".into()))?;
        let entry = &mut slots[slot as usize];
        if let Some(b) = entry.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        let limit = self.caps().limits.max_storage_buffer_binding_size.min(self.caps().limits.max_buffer_size);
        let size = bytes.max(256).next_power_of_two().min(limit).max(bytes);
        let b = self.create_storage(size, "wgkernels scratch", false)?;
        *entry = Some(b.clone());
        Ok(b)
    }

    /// Overwrite the start of `buf` with `data` (queued; ordered before the next submit).
    pub fn write<T: Pod>(&self, buf: &GpuBuffer<T>, data: &[T]) -> Result<()> {
        buf.check_owner(self, "write destination")?;
        ensure(buf.buffer.usage().contains(wgpu::BufferUsages::COPY_DST), || Error::Argument("write destination lacks COPY_DST usage".into()))?;
        buf.require("write destination", data.len())?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.len() % 4 == 0 {
            self.queue.write_buffer(&buf.buffer, buf.offset, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().div_ceil(4) * 4, 0);
            ensure(buf.offset + padded.len() as u64 <= buf.buffer.size(), || Error::Argument("write past buffer end".into()))?;
            self.queue.write_buffer(&buf.buffer, buf.offset, &padded);
        }
        Ok(())
    }

    /// Read a whole buffer back (blocking: native code; see [`Context::read_async`]).
    pub fn read<T: Pod>(&self, buf: &GpuBuffer<T>) -> Result<Vec<T>> {
        crate::context::blocking::wait("Context::read");
        let read = self.start_read(buf)?;
        self.device.poll(wgpu::PollType::Wait { submission_index: Some(read.index.clone()), timeout: None }).map_err(|e| Error::Readback(e.to_string()))?;
        pollster::block_on(read.finish())
    }

    /// Read a whole buffer back, never waiting inside: the copy is submitted and the map callback
    /// completes the future. On the web the browser runs the callback; natively the caller's
    /// executor polls the device meanwhile (see the [`crate::context`] module).
    pub async fn read_async<T: Pod>(&self, buf: &GpuBuffer<T>) -> Result<Vec<T>> {
        crate::context::blocking::guarded(async { self.start_read(buf)?.finish().await }).await
    }

    /// Copy `buf` into a new staging buffer, submit, and ask for the map.
    fn start_read<T: Pod>(&self, buf: &GpuBuffer<T>) -> Result<PendingRead<T>> {
        buf.check_owner(self, "read source")?;
        ensure(buf.buffer.usage().contains(wgpu::BufferUsages::COPY_SRC), || {
            Error::Argument("read source lacks COPY_SRC usage (GpuBuffer::from_raw of a buffer made without it)".into())
        })?;
        // The padded logical size (a multiple of 16, within the buffer: checked at construction),
        // not buffer.size(), which a from_raw buffer may leave unaligned for a copy.
        let size = padded_bytes::<T>(buf.len)?.min(buf.buffer.size() - buf.offset);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgkernels readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("wgkernels readback") });
        enc.copy_buffer_to_buffer(&buf.buffer, buf.offset, &staging, 0, size);
        let index = self.queue.submit(Some(enc.finish()));
        let (tx, mapped) = futures_intrusive::channel::shared::oneshot_channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        Ok(PendingRead { staging, index, mapped, len: buf.len, _t: PhantomData })
    }
}

/// A read-back on its way: the staging buffer, the copy's submission and the map's outcome.
struct PendingRead<T> {
    staging: wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    mapped: futures_intrusive::channel::shared::OneshotReceiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> PendingRead<T> {
    /// Await the map, copy the elements out and unmap.
    async fn finish(self) -> Result<Vec<T>> {
        match self.mapped.receive().await {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(Error::Readback(e.to_string())),
            None => return Err(Error::Readback("map callback dropped".into())),
        }
        let slice = self.staging.slice(..);
        let view = slice.get_mapped_range().map_err(|e| Error::Readback(e.to_string()))?;
        let bytes = &view[..self.len * std::mem::size_of::<T>()];
        // The mapped range is only 4-byte aligned; copy rather than cast in place.
        let out: Vec<T> = bytemuck::pod_collect_to_vec(bytes);
        drop(view);
        self.staging.unmap();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, ContextOptions};

    /// Views share their buffer's memory: a dispatch through a view reads and writes only its
    /// range, `read`/`write` of a view see the same elements; misaligned or out-of-range views
    /// are errors.
    #[test]
    fn views_bind_their_range() {
        let ctx = Context::new_blocking(ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        let align = (ctx.device().limits().min_storage_buffer_offset_alignment.max(16) / 4) as usize;
        let (n, start) = (3 * align + 5, align);
        let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let buf = ctx.upload(&data).unwrap();
        let view = buf.view(&ctx, start, align + 3).unwrap();
        assert_eq!(ctx.read(&view).unwrap(), &data[start..start + align + 3]);
        let ones = ctx.upload(&vec![1.0f32; align + 3]).unwrap();
        let mut b = ctx.batch();
        crate::pipeline::test_kernel::add_inplace(&mut b, &view, &ones, align + 3).unwrap();
        b.run().unwrap();
        let got = ctx.read(&buf).unwrap();
        for (i, (&g, &d)) in got.iter().zip(&data).enumerate() {
            let inside = (start..start + align + 3).contains(&i);
            assert_eq!(g, if inside { d + 1.0 } else { d }, "element {i}");
        }
        ctx.write(&view, &[-1.0, -2.0]).unwrap();
        assert_eq!(&ctx.read(&buf).unwrap()[start..start + 3], &[-1.0, -2.0, data[start + 2] + 1.0]);
        assert!(!buf.view_aligned(&ctx, 1));
        assert!(buf.view(&ctx, 1, 4).is_err(), "misaligned");
        assert!(buf.view(&ctx, start, n - start + 1).is_err(), "past the end");
        assert!(buf.view(&ctx, start, 0).is_err(), "empty");
        assert!(buf.view(&ctx, usize::MAX, 2).is_err(), "overflow");
    }
}
