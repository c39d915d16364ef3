//! [`Context`]: the device, its queue, its [`Caps`] and the pipeline cache.
//! Tests, benches, examples and applications all go through this one setup path.

use crate::caps::{Caps, KernelInfo, Variant, VariantPolicy};
use crate::error::{Error, Result};
use crate::pipeline::PipelineCache;
use crate::tuning::Tuning;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// Optional features we use when the adapter has them.
pub fn wanted_features() -> wgpu::Features {
    use wgpu::Features as F;
    F::SUBGROUP | F::SUBGROUP_BARRIER | F::SHADER_F16 | F::TIMESTAMP_QUERY | F::TIMESTAMP_QUERY_INSIDE_ENCODERS | F::PASSTHROUGH_SHADERS | F::IMMEDIATES
}

/// Device + queue + capabilities + pipeline cache. Cheap to share by reference; `Send + Sync`.
pub struct Context {
    id: ContextId,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    caps: Caps,
    options: ContextOptions,
    pub(crate) pipelines: PipelineCache,
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
        pollster::block_on(Self::new(options))
    }

    /// Create a device on a given adapter. When the adapter offers
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` with at least one configuration, the device is created
    /// with it and with wgpu's experimental-features opt-in (the Matrix variant); otherwise
    /// neither is requested.
    pub async fn from_adapter(adapter: &wgpu::Adapter, options: ContextOptions) -> Result<Context> {
        let mut features = adapter.features() & wanted_features();
        let coop = adapter.cooperative_matrix_properties();
        let mut experimental = wgpu::ExperimentalFeatures::disabled();
        if adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) && !coop.is_empty() {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: the opt-in acknowledges that wgpu's experimental features may have
            // implementation bugs. It only unlocks EXPERIMENTAL_COOPERATIVE_MATRIX here, which only
            // the Matrix pipelines use; those are validated by naga like any WGSL, built only for
            // configurations the adapter lists, and checked against the CPU reference by the tests.
            experimental = unsafe { wgpu::ExperimentalFeatures::enabled() };
        }
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgkernels"),
                required_features: features,
                required_limits: limits,
                experimental_features: experimental,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Device(e.to_string()))?;
        Ok(Self::assemble(device, queue, &coop, options))
    }

    /// Wrap a device and queue the application already has. Each call makes a new [`ContextId`]
    /// (buffers of two such contexts are not interchangeable even on the same device: derive the
    /// second with [`Context::with_options`] instead). Only features and limits the app
    /// enabled are used (e.g. no Subgroup variant unless it requested `SUBGROUP`). The adapter's
    /// cooperative-matrix configurations are not known from a device, so the Matrix variant is
    /// reported unsupported here.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, options: ContextOptions) -> Result<Context> {
        Ok(Self::assemble(device, queue, &[], options))
    }

    fn assemble(device: wgpu::Device, queue: wgpu::Queue, coop: &[wgpu::CooperativeMatrixProperties], options: ContextOptions) -> Context {
        let mut caps = Caps::from_device(&device.adapter_info(), device.features(), &device.limits(), coop);
        caps.native_twins = Self::twins(&options);
        caps.tuning = options.tuning.clone();
        Context {
            id: ContextId::fresh(),
            device,
            queue,
            caps,
            options,
            pipelines: PipelineCache::default(),
            param_pool: Mutex::new(Vec::new()),
            dummy: OnceLock::new(),
            scratch: Mutex::new(Default::default()),
        }
    }

    /// A second context on the same device with other options (its own pipeline cache). It has
    /// the same [`ContextId`]: buffers of either may be used with the other.
    pub fn with_options(&self, options: ContextOptions) -> Context {
        Context {
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
        let index = self.queue.submit(std::iter::empty());
        self.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }

    /// Block until all submitted work is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map(|_| ()).map_err(|e| Error::Device(e.to_string()))
    }
}
