//! [`Context`]: the device, its queue, its [`Caps`] and the pipeline cache.
//! Tests, benches, examples and applications all go through this one setup path.
//!
//! # The async API (the web's)
//!
//! A browser's WebGPU answers on its own event loop: a thread that blocks waiting for it never
//! gets the answer. The async functions never wait inside; they await wgpu's futures and callbacks:
//!
//! - [`Context::new`] / [`Context::from_adapter`]: adapter and device requests;
//! - [`Context::batch_async`] (or [`Context::prepare`], then an ordinary [`Context::batch`]):
//!   every pipeline a batch needs is built first, each awaiting the device's error scopes, so
//!   that recording the batch never blocks (a pipeline not built there is an error, not a wait);
//! - [`crate::Batch::run_async`] / [`crate::Submitted::done`]: submit, then the queue's work-done
//!   callback;
//! - [`Context::read_async`]: a copy, then the buffer's map callback;
//! - [`Context::pipeline_async`]: one pipeline.
//!
//! On the web the browser resolves them. Natively wgpu runs callbacks when the device is polled,
//! so the caller's executor polls it between polls of the future without waiting:
//! `ctx.device().poll(wgpu::PollType::Poll)` (the crate's tests drive the async API this way on one
//! thread), or a thread that polls with `PollType::Wait` while the future is awaited elsewhere.
//!
//! The blocking helpers wait on the calling thread and are conveniences for native code:
//! [`Context::new_blocking`], [`Context::read`], [`crate::Batch::run`], [`crate::Submitted::wait`]
//! (and what waits through it: GPU timers and profiles), [`Context::pipeline`]'s first build of a
//! key, host readbacks and uploads ([`crate::buffer::HostReadback`], [`crate::buffer::HostUpload`]),
//! [`Context::finish_uploads`], [`Context::wait_idle`].

use crate::caps::{Caps, KernelInfo, Variant, VariantPolicy};
use crate::error::{Error, Result};
use crate::pipeline::PipelineCache;
use crate::tuning::Tuning;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Blocking waits and the async API (see the module docs). Each blocking wait calls
/// [`blocking::wait`] first; with the test kit's switch ([`forbid_blocking_in_async`]) on, one
/// reached while an async function of the crate is being polled on this thread panics: how the
/// tests show that none is reachable from the async API.
pub(crate) mod blocking {
    use std::future::Future;

    #[cfg(any(test, feature = "testkit"))]
    thread_local! {
        /// Async functions of the crate being polled on this thread now.
        static IN_ASYNC: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        /// The switch of [`super::forbid_blocking_in_async`] (per thread: the async tests run
        /// their executor on one thread, and other tests are not affected).
        pub(crate) static FORBID: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Called by every blocking wait of the crate before it waits: panics (switch on) inside an
    /// async function of the crate.
    pub(crate) fn wait(_what: &str) {
        #[cfg(any(test, feature = "testkit"))]
        if FORBID.with(|f| f.get()) && IN_ASYNC.with(|n| n.get()) > 0 {
            panic!("blocking wait ({_what}) reached from an async function of wgkernels");
        }
    }

    /// `f`, marked as an async function of the crate while it is polled.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn guarded<F: Future>(f: F) -> impl Future<Output = F::Output> {
        Guarded(f)
    }

    /// `f` (the marks are the test kit's).
    #[cfg(not(any(test, feature = "testkit")))]
    pub(crate) fn guarded<F: Future>(f: F) -> impl Future<Output = F::Output> {
        f
    }

    #[cfg(any(test, feature = "testkit"))]
    struct Guarded<F>(F);

    #[cfg(any(test, feature = "testkit"))]
    impl<F: Future> Future for Guarded<F> {
        type Output = F::Output;
        fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
            struct Depth;
            impl Drop for Depth {
                fn drop(&mut self) {
                    IN_ASYNC.with(|n| n.set(n.get() - 1));
                }
            }
            IN_ASYNC.with(|n| n.set(n.get() + 1));
            let _depth = Depth;
            // SAFETY: the inner future is never moved out of the pinned wrapper.
            unsafe { self.map_unchecked_mut(|g| &mut g.0) }.poll(cx)
        }
    }
}

/// Test kit switch (this thread only): make every blocking wait of the crate panic when it is
/// reached while an async function of the crate is being polled (see the `blocking` module).
#[cfg(feature = "testkit")]
pub fn forbid_blocking_in_async(on: bool) {
    blocking::FORBID.with(|f| f.set(on));
}

/// Which device a [`Context`] (and every buffer, matrix, cache and table it made) belongs to:
/// unique per device request ([`Context::new`], [`Context::from_adapter`], each
/// [`Context::from_device`] call), shared by the contexts [`Context::with_options`] makes on the
/// same device. Buffers of one id can only be recorded into batches and read back by contexts of
/// the same id ([`crate::Error::ForeignBuffer`] otherwise): wgpu resources of two devices (or two
/// wgpu instances, whose resource ids collide) must never meet in one bind group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContextId(u64);

impl ContextId {
    fn fresh() -> ContextId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ContextId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// How a context is configured.
#[derive(Clone, Debug)]
pub struct ContextOptions {
    pub policy: VariantPolicy,
    /// Keep wgpu's shader bounds checks (`WGKERNELS_BOUNDS_CHECKS=1` in [`ContextOptions::from_env`]).
    ///
    /// **Decision: off by default, unchanged.** What makes that safe is the host side: every
    /// size, offset and position is combined with checked arithmetic and compared with the
    /// buffers a dispatch binds before anything is recorded (see [`crate::error`]), foreign and
    /// aliased buffers are rejected centrally in [`crate::Batch::dispatch`], and `tests/props.rs`
    /// drives every public entry point with extreme arguments and checks the guard regions of
    /// whatever runs. The GPU harness runs every kernel both ways (`tests/harness.rs`), so a
    /// kernel that only passes with checks on is caught.
    ///
    /// **Cost: not yet measured here.** The repository holds no timing of checks on against
    /// off: the recorded GPU measurements (BENCHMARKS.md, `results/` of the H100 and H200) ran the
    /// correctness harness both ways but timed only the default. The only figure is wgpu's own
    /// report of about 25% on Metal, which this crate has not reproduced. To measure: time the
    /// same bench cases with this option on and off on one warm device (the bench's per-variant
    /// contexts must be derived from [`ContextOptions::from_env`] for the variable to apply), or
    /// compare instruction counts with `examples/shader_stats --checked`. Turn the checks on by
    /// default only if that measurement shows a small cost.
    pub bounds_checks: bool,
    pub power_preference: wgpu::PowerPreference,
    /// Launch-plan overrides (default: none; see [`Tuning`]).
    pub tuning: Tuning,
    /// A file that keeps the driver's compiled pipelines between process starts (default: none).
    /// See [`Context::save_pipeline_cache`]: where the backend has an application-managed
    /// pipeline cache (Vulkan, through wgpu's `PipelineCache`), the context loads this file when
    /// it is made and builds every pipeline through it; elsewhere the option does nothing (Metal,
    /// DX12 and GL keep their own driver caches; WebGPU in a browser caches in the browser).
    pub pipeline_cache: Option<PathBuf>,
    /// Testing aid (`testkit` feature): on Vulkan with PASSTHROUGH_SHADERS, build Native pipelines
    /// from SPIR-V of their WGSL twins (see `native.rs`). Off by default.
    #[cfg(feature = "testkit")]
    pub native_spirv_twins: bool,
    /// Testing hooks of the Native tier (`testkit` feature; see [`crate::native::NativeTesting`]).
    /// Off by default.
    #[cfg(feature = "testkit")]
    pub native_testing: crate::native::NativeTesting,
    /// Testing hook (`testkit` feature): run every dispatch, of any variant, with this instead of
    /// the GPU, as [`crate::native::NativeTesting::executor`] runs the Native ones (e.g. on
    /// another WebGPU implementation: tests/dawn.rs). Off by default.
    #[cfg(feature = "testkit")]
    pub dispatch_executor: Option<DispatchExecutor>,
}

/// The executor of [`ContextOptions::dispatch_executor`].
#[cfg(feature = "testkit")]
#[derive(Clone)]
pub struct DispatchExecutor(pub std::sync::Arc<dyn crate::native::NativeExecutor>);

#[cfg(feature = "testkit")]
impl std::fmt::Debug for DispatchExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DispatchExecutor")
    }
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            policy: VariantPolicy::Auto,
            bounds_checks: false,
            power_preference: wgpu::PowerPreference::HighPerformance,
            tuning: Tuning::default(),
            pipeline_cache: None,
            #[cfg(feature = "testkit")]
            native_spirv_twins: false,
            #[cfg(feature = "testkit")]
            native_testing: Default::default(),
            #[cfg(feature = "testkit")]
            dispatch_executor: None,
        }
    }
}

impl ContextOptions {
    /// Defaults, overridden by `WGKERNELS_VARIANT=portable|subgroup|native|matrix` (a preference),
    /// `WGKERNELS_BOUNDS_CHECKS=1` and the tuning variables of [`Tuning::from_env`]. The
    /// environment is read here only, never while kernels are recorded.
    pub fn from_env() -> Result<Self> {
        let mut o = ContextOptions { tuning: Tuning::from_env()?, ..ContextOptions::default() };
        if let Ok(v) = std::env::var("WGKERNELS_VARIANT") {
            if !v.is_empty() && v != "auto" {
                let var = Variant::parse(&v).ok_or_else(|| Error::Argument(format!("WGKERNELS_VARIANT={v}: expected portable, subgroup, native, matrix or auto")))?;
                o.policy = VariantPolicy::Prefer(var);
            }
        }
        if let Ok(v) = std::env::var("WGKERNELS_BOUNDS_CHECKS") {
            o.bounds_checks = matches!(v.as_str(), "1" | "true" | "yes");
        }
        Ok(o)
    }

    pub fn with_policy(mut self, policy: VariantPolicy) -> Self {
        self.policy = policy;
        self
    }

    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    pub fn with_bounds_checks(mut self, on: bool) -> Self {
        self.bounds_checks = on;
        self
    }

    /// Keep compiled pipelines in `path` between process starts (see
    /// [`ContextOptions::pipeline_cache`]).
    pub fn with_pipeline_cache(mut self, path: impl Into<PathBuf>) -> Self {
        self.pipeline_cache = Some(path.into());
        self
    }

    /// Testing aid: see [`ContextOptions::native_spirv_twins`].
    #[cfg(feature = "testkit")]
    pub fn with_native_spirv_twins(mut self, on: bool) -> Self {
        self.native_spirv_twins = on;
        self
    }

    /// Testing hook: see [`ContextOptions::dispatch_executor`].
    #[cfg(feature = "testkit")]
    pub fn with_dispatch_executor(mut self, executor: std::sync::Arc<dyn crate::native::NativeExecutor>) -> Self {
        self.dispatch_executor = Some(DispatchExecutor(executor));
        self
    }
}

/// Optional features this crate uses when the adapter has them (the Subgroup variant needs
/// `SUBGROUP`, f16 caches `SHADER_F16`, GPU timing the timestamp queries, the Native tier
/// `PASSTHROUGH_SHADERS`, the on-disk pipeline cache `PIPELINE_CACHE`). The Matrix variant's
/// `EXPERIMENTAL_COOPERATIVE_MATRIX` is not in this set: it needs wgpu's experimental opt-in,
/// which [`device_descriptor`] adds when the adapter offers it.
pub fn wanted_features() -> wgpu::Features {
    use wgpu::Features as F;
    F::SUBGROUP | F::SUBGROUP_BARRIER | F::SHADER_F16 | F::TIMESTAMP_QUERY | F::TIMESTAMP_QUERY_INSIDE_ENCODERS | F::PASSTHROUGH_SHADERS | F::IMMEDIATES | F::PIPELINE_CACHE
}

/// The limits to request: the adapter's own (wgpu's defaults are WebGPU's small ones, e.g.
/// 128 MiB storage bindings and 16 KiB of workgroup memory, which shrink launch plans and split
/// large weight matrices).
pub fn wanted_limits(adapter: &wgpu::Adapter) -> wgpu::Limits {
    adapter.limits()
}

/// The device descriptor that gives every kernel its fastest variant on `adapter`: its limits,
/// every feature of [`wanted_features`] it offers and, where it lists cooperative-matrix
/// configurations, `EXPERIMENTAL_COOPERATIVE_MATRIX` with wgpu's experimental opt-in. For an
/// application that creates the device itself and hands it over with
/// [`Context::from_adapter_device`] (or [`Context::from_device`]); [`Context::new`] and
/// [`Context::from_adapter`] use it.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
/// let adapter = pollster::block_on(instance.request_adapter(&Default::default()))?;
/// let (device, queue) = pollster::block_on(adapter.request_device(&wgkernels::device_descriptor(&adapter)))?;
/// let ctx = wgkernels::Context::from_adapter_device(&adapter, device, queue, Default::default())?;
/// assert!(ctx.caps().device_warning.is_none()); // nothing the adapter offers is missing
/// # Ok(()) }
/// ```
pub fn device_descriptor(adapter: &wgpu::Adapter) -> wgpu::DeviceDescriptor<'static> {
    let mut features = adapter.features() & wanted_features();
    let mut experimental = wgpu::ExperimentalFeatures::disabled();
    if adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) && !adapter.cooperative_matrix_properties().is_empty() {
        features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        // SAFETY: the opt-in acknowledges that wgpu's experimental features may have
        // implementation bugs. It only unlocks EXPERIMENTAL_COOPERATIVE_MATRIX here, which only
        // the Matrix pipelines use; those are validated by naga like any WGSL, built only for
        // configurations the adapter lists, and checked against the CPU reference by the tests.
        experimental = unsafe { wgpu::ExperimentalFeatures::enabled() };
    }
    wgpu::DeviceDescriptor {
        label: Some("wgkernels"),
        required_features: features,
        required_limits: wanted_limits(adapter),
        experimental_features: experimental,
        ..Default::default()
    }
}

/// What a device made by an application lacks that this crate would use: features of
/// [`wanted_features`] (and cooperative matrices) that `offered` has and the device was not
/// created with, and limits below `offered_limits`. `None` when nothing is missing.
fn device_gaps(offered: wgpu::Features, offered_limits: Option<&wgpu::Limits>, device: &wgpu::Device) -> Option<String> {
    let wanted = wanted_features() | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
    let missing = offered & wanted & !device.features();
    let mut gaps: Vec<String> = missing.iter_names().map(|(name, _)| name.to_string()).collect();
    if let Some(l) = offered_limits {
        let d = device.limits();
        let mut low = |name: &str, have: u64, could: u64| {
            if have < could {
                gaps.push(format!("{name} {have} (adapter: {could})"));
            }
        };
        low("max_storage_buffer_binding_size", d.max_storage_buffer_binding_size, l.max_storage_buffer_binding_size);
        low("max_buffer_size", d.max_buffer_size, l.max_buffer_size);
        low("max_compute_workgroup_storage_size", d.max_compute_workgroup_storage_size.into(), l.max_compute_workgroup_storage_size.into());
        low("max_compute_invocations_per_workgroup", d.max_compute_invocations_per_workgroup.into(), l.max_compute_invocations_per_workgroup.into());
        low("max_storage_buffers_per_shader_stage", d.max_storage_buffers_per_shader_stage.into(), l.max_storage_buffers_per_shader_stage.into());
        low("max_immediate_size", d.max_immediate_size.into(), l.max_immediate_size.into());
    }
    (!gaps.is_empty()).then(|| {
        format!(
            "the application's device lacks {}{}: kernels run slower variants or smaller plans; create the device with wgkernels::device_descriptor(&adapter)",
            gaps.join(", "),
            if offered_limits.is_some() {
                ", which the adapter offers"
            } else {
                " (which this crate uses where the adapter offers them; pass the adapter to Context::from_adapter_device to compare)"
            }
        )
    })
}

/// Device + queue + capabilities + pipeline cache. Cheap to share by reference; `Send + Sync`.
pub struct Context {
    id: ContextId,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    caps: Caps,
    options: ContextOptions,
    pub(crate) pipelines: PipelineCache,
    /// The driver's pipeline cache, loaded from and saved to [`ContextOptions::pipeline_cache`].
    disk_cache: Option<Arc<DiskCache>>,
    /// Uniform-buffer chunks recycled between batches (see `batch.rs`).
    pub(crate) param_pool: Mutex<Vec<wgpu::Buffer>>,
    /// A 16-byte storage buffer bound where a kernel's optional input is absent.
    dummy: OnceLock<wgpu::Buffer>,
    /// The scratch buffers of [`Context::scratch`] (grown on demand, reused by every batch).
    pub(crate) scratch: Mutex<[Option<wgpu::Buffer>; crate::buffer::SCRATCH_SLOTS]>,
}

impl Context {
    /// Pick the best adapter (from `WGPU_BACKEND` etc. when set) and create a device with the
    /// adapter's real limits and every optional feature in [`wanted_features`] it offers.
    pub async fn new(options: ContextOptions) -> Result<Context> {
        blocking::guarded(Self::request(options)).await
    }

    async fn request(options: ContextOptions) -> Result<Context> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if std::env::var_os("WGPU_BACKEND").is_none() {
            // Vulkan, Metal, DX12, WebGPU; GL only when asked for (WGPU_BACKEND=gl).
            desc.backends = wgpu::Backends::PRIMARY;
        }
        let instance = wgpu::Instance::new(desc);
        let adapter = match wgpu::util::initialize_adapter_from_env(&instance, None).await {
            Ok(a) => a,
            Err(_) => instance
                .request_adapter(&wgpu::RequestAdapterOptions { power_preference: options.power_preference, ..Default::default() })
                .await
                .map_err(|e| Error::NoAdapter(e.to_string()))?,
        };
        Self::from_adapter(&adapter, options).await
    }

    /// Blocking form of [`Context::new`].
    pub fn new_blocking(options: ContextOptions) -> Result<Context> {
        blocking::wait("Context::new_blocking");
        pollster::block_on(Self::new(options))
    }

    /// Create a device on a given adapter with [`device_descriptor`]: the adapter's limits,
    /// every feature of [`wanted_features`] it offers and, when it offers
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` with at least one configuration, that feature with
    /// wgpu's experimental-features opt-in (the Matrix variant).
    pub async fn from_adapter(adapter: &wgpu::Adapter, options: ContextOptions) -> Result<Context> {
        let (device, queue) = blocking::guarded(adapter.request_device(&device_descriptor(adapter))).await.map_err(|e| Error::Device(e.to_string()))?;
        Self::assemble(device, queue, &adapter.cooperative_matrix_properties(), None, options)
    }

    /// Wrap a device and queue the application already has. Each call makes a new [`ContextId`]
    /// (buffers of two such contexts are not interchangeable even on the same device: derive the
    /// second with [`Context::with_options`] instead). Only features and limits the app
    /// enabled are used (e.g. no Subgroup variant unless it requested `SUBGROUP`): a device
    /// from wgpu's default [`wgpu::DeviceDescriptor`] runs every kernel Portable with WebGPU's
    /// small limits. For full speed create the device with [`device_descriptor`]. What the
    /// device lacks of [`wanted_features`] is reported in [`Caps::device_warning`] (the probe
    /// report and [`Context::explain`] show it). The adapter's cooperative-matrix
    /// configurations are not known from a device, so the Matrix variant is reported
    /// unsupported here: [`Context::from_adapter_device`] knows them.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, options: ContextOptions) -> Result<Context> {
        let gaps = device_gaps(wanted_features(), None, &device);
        Self::assemble(device, queue, &[], gaps, options)
    }

    /// [`Context::from_device`] for a device the application created on `adapter`: the Matrix
    /// variant is available when the device enabled it, and [`Caps::device_warning`] names
    /// exactly the features and limits the adapter offers that the device was created without.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    /// let adapter = pollster::block_on(instance.request_adapter(&Default::default()))?;
    /// // wgpu's default descriptor: WebGPU's limits, no optional feature.
    /// let (device, queue) = pollster::block_on(adapter.request_device(&Default::default()))?;
    /// let ctx = wgkernels::Context::from_adapter_device(&adapter, device, queue, Default::default())?;
    /// if adapter.features().contains(wgpu::Features::SUBGROUP) {
    ///     let warning = ctx.caps().device_warning.as_deref().unwrap_or_default();
    ///     assert!(warning.contains("SUBGROUP") && wgkernels::probe_report(&ctx).contains(warning));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn from_adapter_device(adapter: &wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue, options: ContextOptions) -> Result<Context> {
        let gaps = device_gaps(adapter.features(), Some(&adapter.limits()), &device);
        Self::assemble(device, queue, &adapter.cooperative_matrix_properties(), gaps, options)
    }

    fn assemble(device: wgpu::Device, queue: wgpu::Queue, coop: &[wgpu::CooperativeMatrixProperties], gaps: Option<String>, options: ContextOptions) -> Result<Context> {
        let mut caps = Caps::from_device(&device.adapter_info(), device.features(), &device.limits(), coop);
        caps.native_twins = Self::twins(&options);
        caps.tuning = options.tuning.clone();
        caps.device_warning = gaps;
        let disk_cache = match &options.pipeline_cache {
            Some(path) => DiskCache::open(&device, path)?,
            None => None,
        };
        Ok(Context {
            id: ContextId::fresh(),
            device,
            queue,
            caps,
            options,
            pipelines: PipelineCache::default(),
            disk_cache,
            param_pool: Mutex::new(Vec::new()),
            dummy: OnceLock::new(),
            scratch: Mutex::new(Default::default()),
        })
    }

    /// A second context on the same device with other options (its own pipeline cache; the
    /// on-disk cache file, if any, is this context's: `options.pipeline_cache` is not read
    /// again). It has the same [`ContextId`]: buffers of either may be used with the other.
    pub fn with_options(&self, options: ContextOptions) -> Context {
        Context {
            disk_cache: self.disk_cache.clone(),
            id: self.id,
            device: self.device.clone(),
            queue: self.queue.clone(),
            caps: Caps { native_twins: Self::twins(&options), tuning: options.tuning.clone(), ..self.caps.clone() },
            options,
            pipelines: PipelineCache::default(),
            param_pool: Mutex::new(Vec::new()),
            dummy: OnceLock::new(),
            scratch: Mutex::new(Default::default()),
        }
    }

    /// Testing aid (`testkit` feature): a context on the same device whose capabilities are
    /// changed by `adjust` (and, through them, every plan it makes), e.g. to plan for another
    /// WebGPU implementation's subgroup sizes (tests/dawn.rs). Its own pipeline cache.
    #[cfg(feature = "testkit")]
    pub fn with_caps(&self, adjust: impl FnOnce(&mut Caps)) -> Context {
        let mut ctx = self.with_options(self.options.clone());
        adjust(&mut ctx.caps);
        ctx
    }

    fn twins(_options: &ContextOptions) -> bool {
        #[cfg(feature = "testkit")]
        return _options.native_spirv_twins;
        #[cfg(not(feature = "testkit"))]
        false
    }

    /// The wgpu pipeline cache every pipeline is built through (`None` without
    /// [`ContextOptions::pipeline_cache`] or where the backend has none).
    pub(crate) fn driver_cache(&self) -> Option<&wgpu::PipelineCache> {
        self.disk_cache.as_deref().map(|c| &c.cache)
    }

    /// Write the driver's compiled pipelines to [`ContextOptions::pipeline_cache`], so that the
    /// next process start builds them from the cache: call it once the pipelines an
    /// application needs are built (e.g. after `Session::warm_up`). Returns the bytes written;
    /// `Ok(0)` when there is nothing to save (no cache file configured, or a backend without
    /// wgpu's pipeline cache: Metal, DX12, GL and WebGPU, whose drivers or browsers cache on
    /// their own). The file is written to a temporary name and renamed over the old one.
    pub fn save_pipeline_cache(&self) -> Result<u64> {
        match &self.disk_cache {
            Some(c) => c.save(),
            None => Ok(0),
        }
    }

    /// Label and description of every pipeline this context has built.
    pub fn built_pipelines(&self) -> Vec<(String, crate::pipeline::PipelineDesc)> {
        self.pipelines.built()
    }

    /// The id buffers made by this context carry (see [`ContextId`]).
    pub fn id(&self) -> ContextId {
        self.id
    }

    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    pub fn options(&self) -> &ContextOptions {
        &self.options
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The variant `kernel` will run as in this context.
    pub fn variant_for(&self, kernel: &KernelInfo) -> Result<Variant> {
        let v = kernel.select(&self.caps, self.options.policy)?;
        self.variant_after_failures(kernel, v)
    }

    /// A 16-byte placeholder bound where a kernel's optional input is absent (never read or
    /// written by the kernel; exempt from the aliasing check of [`crate::Batch::dispatch`]).
    pub(crate) fn dummy(&self) -> crate::buffer::BufRef<'_> {
        let b = self.dummy.get_or_init(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor { label: Some("wgkernels dummy"), size: 16, usage: wgpu::BufferUsages::STORAGE, mapped_at_creation: false })
        });
        self.internal(b)
    }

    /// Whether `b` is this context's placeholder buffer.
    pub(crate) fn is_dummy(&self, b: &wgpu::Buffer) -> bool {
        self.dummy.get().is_some_and(|d| d == b)
    }

    /// A binding handle for a buffer this context created itself (scratch, placeholders).
    pub(crate) fn internal<'a>(&self, buffer: &'a wgpu::Buffer) -> crate::buffer::BufRef<'a> {
        crate::buffer::BufRef { buffer, owner: self.id, range: None }
    }

    /// Run the uploads queued so far (wgpu carries out buffer uploads with the next submission)
    /// and wait for them: after a large upload such as a model's weights, so that their copies
    /// do not land in, and count towards, the first batch that runs.
    pub fn finish_uploads(&self) -> Result<()> {
        blocking::wait("Context::finish_uploads");
        let index = self.queue.submit(std::iter::empty());
        self.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }

    /// Block until all submitted work is done.
    pub fn wait_idle(&self) -> Result<()> {
        blocking::wait("Context::wait_idle");
        self.device.poll(wgpu::PollType::wait_indefinitely()).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }
}

/// The driver's pipeline cache and the file it is kept in.
///
/// File layout: the 8 bytes `WGKPLC01`, the FNV-1a 64 hash of the data (little-endian u64), then
/// the data [`wgpu::PipelineCache::get_data`] returned. A file that is not of this shape (or
/// whose hash does not match: truncated, corrupted) is ignored and rewritten on the next save;
/// wgpu in turn checks that the data is for this adapter, driver and wgpu version, and starts
/// empty if not.
struct DiskCache {
    cache: wgpu::PipelineCache,
    path: PathBuf,
}

const CACHE_MAGIC: &[u8; 8] = b"WGKPLC01";

fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl DiskCache {
    /// The cache of `path` on `device`, `None` where wgpu has no pipeline cache for the backend
    /// or the device was made without `PIPELINE_CACHE`. A missing, unreadable or invalid file
    /// starts an empty cache; I/O errors other than "not found" are reported.
    fn open(device: &wgpu::Device, path: &Path) -> Result<Option<Arc<DiskCache>>> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) || wgpu::util::pipeline_cache_key(&device.adapter_info()).is_none() {
            return Ok(None);
        }
        let data = match std::fs::read(path) {
            Ok(bytes) => Self::payload(&bytes).map(<[u8]>::to_vec),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::Argument(format!("pipeline cache {}: {e}", path.display()))),
        };
        // SAFETY: `data` is what `PipelineCache::get_data` returned on an earlier run (the file is
        // only written by `save`, atomically, and its hash is checked above, so a truncated or
        // corrupted file is never passed on); wgpu checks that it was made for this adapter,
        // driver and wgpu version (`fallback: true`: an empty cache otherwise).
        let cache = unsafe { device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor { label: Some("wgkernels"), data: data.as_deref(), fallback: true }) };
        Ok(Some(Arc::new(DiskCache { cache, path: path.to_path_buf() })))
    }

    /// The data of a file `save` wrote, if it is one.
    fn payload(bytes: &[u8]) -> Option<&[u8]> {
        let (magic, rest) = bytes.split_first_chunk::<8>()?;
        let (hash, data) = rest.split_first_chunk::<8>()?;
        (magic == CACHE_MAGIC && u64::from_le_bytes(*hash) == fnv1a64(data)).then_some(data)
    }

    fn save(&self) -> Result<u64> {
        let Some(data) = self.cache.get_data() else { return Ok(0) };
        let io = |e: std::io::Error| Error::Argument(format!("pipeline cache {}: {e}", self.path.display()));
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut bytes = Vec::with_capacity(16 + data.len());
        bytes.extend_from_slice(CACHE_MAGIC);
        bytes.extend_from_slice(&fnv1a64(&data).to_le_bytes());
        bytes.extend_from_slice(&data);
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, &bytes).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })?;
        Ok(bytes.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_file_is_used_only_when_whole() {
        let data = b"driver data";
        let mut file = CACHE_MAGIC.to_vec();
        file.extend_from_slice(&fnv1a64(data).to_le_bytes());
        file.extend_from_slice(data);
        assert_eq!(DiskCache::payload(&file), Some(&data[..]));
        assert_eq!(DiskCache::payload(&file[..file.len() - 1]), None, "truncated");
        let mut flipped = file.clone();
        flipped[20] ^= 1;
        assert_eq!(DiskCache::payload(&flipped), None, "corrupted");
        assert_eq!(DiskCache::payload(&file[..12]), None, "shorter than the header");
        assert_eq!(DiskCache::payload(b""), None);
    }

    /// A context with a cache file builds through it and saves it (Vulkan; nothing elsewhere);
    /// the next context reads the file back, and one whose file is damaged starts empty.
    #[test]
    fn pipeline_cache_round_trips_through_its_file() {
        let dir = std::env::temp_dir().join(format!("wgkernels-pipeline-cache-{}", std::process::id()));
        let path = dir.join("pipelines.bin");
        let options = ContextOptions::default().with_pipeline_cache(&path);
        let run = |ctx: &Context| {
            let (a, b) = (ctx.upload(&[1f32, 2.0, 3.0, 4.0]).unwrap(), ctx.upload(&[0.5f32; 4]).unwrap());
            let mut batch = ctx.batch();
            crate::pipeline::test_kernel::add_inplace(&mut batch, &a, &b, 4).unwrap();
            batch.run().unwrap();
            assert_eq!(ctx.read(&a).unwrap(), [1.5, 2.5, 3.5, 4.5]);
        };
        let ctx = Context::new_blocking(options.clone()).unwrap();
        run(&ctx);
        let saved = ctx.save_pipeline_cache().unwrap();
        let vulkan = ctx.caps().backend == wgpu::Backend::Vulkan && ctx.device().features().contains(wgpu::Features::PIPELINE_CACHE);
        if vulkan {
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len() as u64, saved);
            assert!(DiskCache::payload(&bytes).is_some());
            run(&Context::new_blocking(options.clone()).unwrap());
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            let damaged = Context::new_blocking(options).unwrap();
            run(&damaged);
            assert_eq!(damaged.save_pipeline_cache().unwrap(), std::fs::metadata(&path).unwrap().len());
        } else {
            assert_eq!(saved, 0);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
