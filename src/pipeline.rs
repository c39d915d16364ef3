//! Typed pipeline keys -> cached compute pipelines.
//!
//! A kernel module describes each pipeline with a small key type (an enum or struct deriving
//! `Hash + Eq + Debug`) implementing [`PipelineKey`]. The key alone determines the shader
//! source, entry point, override constants and binding layout, so the label, the cache entry and
//! the bind-group layout are all derived from it in one place.
//!
//! Binding convention (shared with the MSL kernels): group 0, binding 0 is the kernel's
//! parameter struct (uniform); bindings 1.. are storage buffers in the order [`PipelineDesc::bindings`]
//! lists them. On Metal passthrough this maps to `[[buffer(0)]]`, `[[buffer(1)]]`, ...

use crate::caps::Caps;
use crate::context::Context;
use crate::error::{Error, Result};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// One storage binding of a kernel (binding index = position + 1; binding 0 is the params uniform).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageBinding {
    pub name: &'static str,
    pub read_only: bool,
    /// Element type as the shaders see it (`"f32"`, `"u32"`, `"vec4<u32>"`, ...), for the MSL checks.
    pub elem: &'static str,
}

impl StorageBinding {
    pub const fn read(name: &'static str, elem: &'static str) -> Self {
        StorageBinding { name, read_only: true, elem }
    }
    pub const fn write(name: &'static str, elem: &'static str) -> Self {
        StorageBinding { name, read_only: false, elem }
    }
}

/// Where the shader code comes from.
#[derive(Clone, Debug)]
pub enum ShaderSource {
    /// WGSL, as the concatenation of these parts (shared helpers + the kernel body).
    Wgsl(Vec<&'static str>),
    /// Hand-written MSL for the passthrough path (the Native variant), with its WGSL twin: the
    /// pipeline of the same algorithm with the same params, bindings and workgroup size, whose
    /// entry point is renamed to the MSL kernel's when it stands in for it (SPIR-V passthrough on
    /// Vulkan in the tests, naga's MSL in the shader checks). Build with [`PipelineDesc::native`].
    Msl { text: &'static str, twin: Box<PipelineDesc> },
}

impl ShaderSource {
    /// The source as written: WGSL for naga (a WGSL pipeline's parts joined), or the MSL text.
    pub fn text(&self) -> String {
        match self {
            ShaderSource::Wgsl(parts) => parts.concat(),
            ShaderSource::Msl { text, .. } => text.to_string(),
        }
    }

    /// The module as the WGSL front end `dialect` takes it (the MSL text unchanged).
    pub fn wgsl(&self, dialect: WgslDialect) -> String {
        let text = self.text();
        match self {
            ShaderSource::Wgsl(_) if dialect == WgslDialect::Spec && uses_subgroups(&text) => format!("enable subgroups;\n{text}"),
            _ => text,
        }
    }
}

/// The WGSL front end a module is written for. The kernels are written in naga's dialect, which
/// lets subgroup builtins be used without a directive and rejects `enable subgroups;` (naga 30);
/// the WGSL specification, and so Tint (Chrome's WebGPU) and WebKit, requires the directive.
/// [`ShaderSource::wgsl`] adds it, here and nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgslDialect {
    /// naga: every wgpu backend but the browser's.
    Naga,
    /// The WGSL specification: the browser's own WebGPU compiles the module.
    Spec,
}

impl WgslDialect {
    /// The dialect of the compiler behind `backend`.
    pub fn of_backend(backend: wgpu::Backend) -> WgslDialect {
        if backend == wgpu::Backend::BrowserWebGpu {
            WgslDialect::Spec
        } else {
            WgslDialect::Naga
        }
    }
}

/// Whether WGSL code (comments aside) names a subgroup builtin value or function: every one has
/// `subgroup` in its name (`subgroupAdd`, `subgroup_size`, `num_subgroups`, ...), and no other
/// identifier of the kernels does.
fn uses_subgroups(text: &str) -> bool {
    text.lines().any(|line| line.split("//").next().is_some_and(|code| code.contains("subgroup")))
}

/// Everything needed to build one compute pipeline.
#[derive(Clone, Debug)]
pub struct PipelineDesc {
    pub source: ShaderSource,
    pub entry: &'static str,
    /// WGSL `override` values (ignored by MSL, which takes sizes from the params struct).
    pub constants: Vec<(&'static str, f64)>,
    /// Threads per workgroup; must equal the WGSL `@workgroup_size` after overrides (the
    /// passthrough path needs it explicitly).
    pub workgroup_size: [u32; 3],
    /// Size in bytes of the params uniform at binding 0.
    pub params_size: u64,
    pub bindings: &'static [StorageBinding],
}

impl PipelineDesc {
    /// The Native (MSL passthrough) pipeline `entry` of `msl`, standing for the WGSL `twin`: it
    /// takes the twin's params size, bindings and workgroup size (the MSL kernel must declare the
    /// same, which tests/msl_bindings.rs checks); override constants do not apply to MSL.
    pub fn native(msl: &'static str, entry: &'static str, twin: PipelineDesc) -> PipelineDesc {
        PipelineDesc {
            entry,
            constants: vec![],
            workgroup_size: twin.workgroup_size,
            params_size: twin.params_size,
            bindings: twin.bindings,
            source: ShaderSource::Msl { text: msl, twin: Box::new(twin) },
        }
    }

    /// The WGSL twin of a Native pipeline (`None` for WGSL pipelines).
    pub fn twin(&self) -> Option<&PipelineDesc> {
        match &self.source {
            ShaderSource::Msl { twin, .. } => Some(twin),
            ShaderSource::Wgsl(_) => None,
        }
    }
}

/// A typed pipeline key. See the module docs.
pub trait PipelineKey: Hash + Eq + Clone + Debug + Send + Sync + 'static {
    fn describe(&self, caps: &Caps) -> PipelineDesc;
}

/// A built pipeline and its bind-group layout.
pub struct Pipeline {
    pub(crate) label: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
    pub(crate) desc: PipelineDesc,
}

impl Pipeline {
    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn desc(&self) -> &PipelineDesc {
        &self.desc
    }
}

trait DynKey: Send + Sync + Debug {
    fn as_any(&self) -> &dyn Any;
    fn dyn_eq(&self, other: &dyn DynKey) -> bool;
    fn dyn_hash(&self, h: &mut dyn Hasher);
    fn dyn_clone(&self) -> Box<dyn DynKey>;
    fn dyn_describe(&self, caps: &Caps) -> PipelineDesc;
}

impl<K: PipelineKey> DynKey for K {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn dyn_clone(&self) -> Box<dyn DynKey> {
        Box::new(self.clone())
    }
    fn dyn_describe(&self, caps: &Caps) -> PipelineDesc {
        self.describe(caps)
    }
    fn dyn_eq(&self, other: &dyn DynKey) -> bool {
        other.as_any().downcast_ref::<K>() == Some(self)
    }
    fn dyn_hash(&self, mut h: &mut dyn Hasher) {
        TypeId::of::<K>().hash(&mut h);
        self.hash(&mut h);
    }
}

struct CacheKey(Box<dyn DynKey>);
impl PartialEq for CacheKey {
    fn eq(&self, o: &Self) -> bool {
        self.0.dyn_eq(&*o.0)
    }
}
impl Eq for CacheKey {}
impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.dyn_hash(h)
    }
}

/// One pipeline's slot: empty until built. Its lock is held while the pipeline is built, so two
/// threads that need the same pipeline build it once (the second waits), while different
/// pipelines build in parallel (see [`Context::pipeline`]).
type Slot = Arc<Mutex<Option<Arc<Pipeline>>>>;

/// Pipelines by key, per context.
#[derive(Default)]
pub struct PipelineCache {
    map: Mutex<HashMap<CacheKey, Slot>>,
    /// Kernels whose Native pipeline failed to build, with the reason (see `native.rs`).
    pub(crate) native_failures: Mutex<HashMap<&'static str, String>>,
    /// Native self-check outcomes per kernel (see `native.rs`).
    pub(crate) native_checks: Mutex<HashMap<&'static str, crate::native::SelfCheck>>,
    /// Native dispatches recorded so far (a self-check case must record at least one).
    pub(crate) native_dispatches: std::sync::atomic::AtomicU64,
}

impl PipelineCache {
    /// Label and description of every pipeline built so far (for tools that inspect what the
    /// driver made of them, e.g. examples/shader_stats.rs).
    pub fn built(&self) -> Vec<(String, PipelineDesc)> {
        let slots: Vec<Slot> = self.map.lock().map(|m| m.values().cloned().collect()).unwrap_or_default();
        let mut v: Vec<_> = slots.iter().filter_map(|s| s.lock().ok().and_then(|p| p.as_ref().map(|p| (p.label.clone(), p.desc.clone())))).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
    pub fn len(&self) -> usize {
        self.built().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The bind-group layout every pipeline of a [`PipelineDesc`] uses: the parameter block at
/// binding 0 (a uniform whose offset is given at dispatch, so one bind group serves every
/// parameter block of a uniform chunk), the storage buffers after it.
pub fn layout_entries(desc: &PipelineDesc) -> Vec<wgpu::BindGroupLayoutEntry> {
    let mut e = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Uniform, has_dynamic_offset: true, min_binding_size: wgpu::BufferSize::new(desc.params_size) },
        count: None,
    }];
    for (i, b) in desc.bindings.iter().enumerate() {
        e.push(wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only: b.read_only }, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        });
    }
    e
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> Error {
    Error::Pipeline("cache poisoned".into())
}

/// What [`Context::pipeline`] does on this thread with a key it has not built: build it (blocking
/// on the device's verdict), or, while [`Context::prepare`] records, note it and fail, or, while
/// [`Context::batch_async`] records its prepared batch, fail.
enum Unbuilt {
    Build,
    Collect(Vec<Box<dyn DynKey>>),
    Refuse,
}

thread_local! {
    static UNBUILT: std::cell::RefCell<Unbuilt> = const { std::cell::RefCell::new(Unbuilt::Build) };
}

/// Sets this thread's [`Unbuilt`] mode until dropped (then back to building).
struct UnbuiltMode;

impl UnbuiltMode {
    fn set(mode: Unbuilt) -> UnbuiltMode {
        UNBUILT.with(|m| *m.borrow_mut() = mode);
        UnbuiltMode
    }

    /// The keys noted so far.
    fn collected(&self) -> Vec<Box<dyn DynKey>> {
        UNBUILT.with(|m| match &mut *m.borrow_mut() {
            Unbuilt::Collect(keys) => std::mem::take(keys),
            _ => Vec::new(),
        })
    }
}

impl Drop for UnbuiltMode {
    fn drop(&mut self) {
        UNBUILT.with(|m| *m.borrow_mut() = Unbuilt::Build);
    }
}

/// The error for an unbuilt `key` on this thread, if it must not be built here (noting it while
/// collecting).
fn refuse_unbuilt(key: &dyn DynKey) -> Option<Error> {
    UNBUILT.with(|m| match &mut *m.borrow_mut() {
        Unbuilt::Build => None,
        Unbuilt::Collect(keys) => {
            keys.push(key.dyn_clone());
            Some(Error::Pipeline(format!("{key:?}: not built yet (noted by Context::prepare)")))
        }
        Unbuilt::Refuse => Some(Error::Pipeline(format!("{key:?}: not built, and building it here would block: record the batch with Context::prepare first"))),
    })
}

/// [`Context::prepare`] gives up after this many recordings (each builds at least one pipeline).
const PREPARE_ROUNDS: usize = 256;

impl Context {
    /// The cached pipeline for `key`, building it on first use (through the driver's pipeline
    /// cache when [`crate::ContextOptions::pipeline_cache`] is set). Several threads may call
    /// this at once: different pipelines build in parallel, one pipeline is built once. Shader
    /// compile or validation errors come back as [`Error::Pipeline`], never as a panic (and
    /// are not cached: the next call tries again). A first use blocks until the device has
    /// checked the pipeline: native code only; on the web, build pipelines ahead with
    /// [`Context::pipeline_async`] (a cached pipeline never blocks).
    pub fn pipeline<K: PipelineKey>(&self, key: &K) -> Result<Arc<Pipeline>> {
        let slot = self.slot(key)?;
        let mut slot = slot.lock().map_err(poisoned)?;
        if let Some(p) = &*slot {
            return Ok(p.clone());
        }
        if let Some(e) = refuse_unbuilt(key) {
            return Err(e);
        }
        let built = Arc::new(self.build_desc(format!("{key:?}"), key.describe(self.caps()))?);
        *slot = Some(built.clone());
        Ok(built)
    }

    /// [`Context::pipeline`] without blocking: the device's error scopes are awaited. (Two
    /// concurrent first uses of one key may both build; the first stored is kept.)
    pub async fn pipeline_async<K: PipelineKey>(&self, key: &K) -> Result<Arc<Pipeline>> {
        crate::context::blocking::guarded(self.pipeline_dyn_async(key)).await
    }

    async fn pipeline_dyn_async(&self, key: &dyn DynKey) -> Result<Arc<Pipeline>> {
        let slot = self.slot(key)?;
        if let Some(p) = &*slot.lock().map_err(poisoned)? {
            return Ok(p.clone());
        }
        let built = Arc::new(self.build_desc_async(format!("{key:?}"), key.dyn_describe(self.caps())).await?);
        let mut stored = slot.lock().map_err(poisoned)?;
        Ok(stored.get_or_insert(built).clone())
    }

    /// Build, awaiting each, every pipeline that `record` needs, so that recording it afterwards
    /// never blocks (the async form of a first [`Context::pipeline`]): `record` is run on a
    /// probing batch that records nothing (its dispatches only note their pipelines; a kernel that
    /// asks for a pipeline itself gets an error, which ends that recording), the pipelines noted
    /// are built, and this repeats until a recording needs none that is not built. Returns what
    /// the last recording returned (its argument errors). `record` must record the same
    /// dispatches each time it is called. [`Context::batch_async`] prepares and records in one.
    pub async fn prepare<'c>(&'c self, mut record: impl FnMut(&mut crate::Batch<'c>) -> Result<()>) -> Result<()> {
        crate::context::blocking::guarded(async move {
            for _ in 0..PREPARE_ROUNDS {
                let (result, missing) = {
                    let mode = UnbuiltMode::set(Unbuilt::Collect(Vec::new()));
                    let mut probe = crate::Batch::probe(self);
                    let result = record(&mut probe);
                    (result, mode.collected())
                };
                if missing.is_empty() {
                    return result;
                }
                for key in missing {
                    self.pipeline_dyn_async(key.as_ref()).await?;
                }
            }
            Err(Error::Pipeline(format!("Context::prepare: the recording still needed new pipelines after {PREPARE_ROUNDS} rounds")))
        })
        .await
    }

    /// A batch recorded by `record` without blocking: [`Context::prepare`] builds its pipelines
    /// (awaited), then `record` records the batch, where a pipeline it did not prepare is an
    /// error rather than a blocking build. Submit it with [`crate::Batch::run_async`] (or
    /// [`crate::Batch::submit`], which does not wait).
    pub async fn batch_async<'c>(&'c self, mut record: impl FnMut(&mut crate::Batch<'c>) -> Result<()>) -> Result<crate::Batch<'c>> {
        crate::context::blocking::guarded(async move {
            self.prepare(&mut record).await?;
            let _mode = UnbuiltMode::set(Unbuilt::Refuse);
            let mut batch = self.batch();
            record(&mut batch)?;
            Ok(batch)
        })
        .await
    }

    /// Whether `key`'s pipeline is built; while [`Context::prepare`] records, an unbuilt one is
    /// noted.
    pub(crate) fn note_pipeline<K: PipelineKey>(&self, key: &K) -> Result<()> {
        let built = self.slot(key)?.lock().map_err(poisoned)?.is_some();
        if !built {
            refuse_unbuilt(key);
        }
        Ok(())
    }

    /// The cache slot of `key` (made empty on first use).
    fn slot(&self, key: &dyn DynKey) -> Result<Slot> {
        Ok(self.pipelines.map.lock().map_err(poisoned)?.entry(CacheKey(key.dyn_clone())).or_default().clone())
    }

    /// Blocking form of [`Context::build_desc_async`] (native code).
    pub(crate) fn build_desc(&self, label: String, desc: PipelineDesc) -> Result<Pipeline> {
        crate::context::blocking::wait("pipeline build");
        pollster::block_on(self.build_desc_async(label, desc))
    }

    /// Build one pipeline from its description (uncached). Errors of any kind come back as
    /// [`Error::Pipeline`]: validation errors, and internal ones too, which is how wgpu reports a
    /// passthrough MSL that the Metal compiler rejects (`CreateShaderModuleError::Generation`).
    pub(crate) async fn build_desc_async(&self, label: String, desc: PipelineDesc) -> Result<Pipeline> {
        let device = &self.device;
        let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(&label), entries: &layout_entries(&desc) });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: Some(&label), bind_group_layouts: &[Some(&layout)], immediate_size: 0 });
        let module = match &desc.source {
            ShaderSource::Wgsl(_) => {
                let text = desc.source.wgsl(WgslDialect::of_backend(self.caps().backend));
                let d = wgpu::ShaderModuleDescriptor { label: Some(&label), source: wgpu::ShaderSource::Wgsl(text.into()) };
                if self.options().bounds_checks {
                    device.create_shader_module(d)
                } else {
                    // SAFETY: every kernel validates its shapes and buffer lengths on the host
                    // before dispatch and guards every index against those validated sizes; the
                    // test suite runs all kernels with and without runtime checks.
                    unsafe { device.create_shader_module_trusted(d, wgpu::ShaderRuntimeChecks::unchecked()) }
                }
            }
            ShaderSource::Msl { .. } => self.passthrough_module(&label, &desc)?,
        };
        // Override constants are WGSL's; a passthrough module has none (its twin's are resolved
        // before translation).
        let constants: &[(&str, f64)] = if desc.twin().is_some() { &[] } else { &desc.constants };
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(desc.entry),
            compilation_options: wgpu::PipelineCompilationOptions { constants, zero_initialize_workgroup_memory: false },
            cache: self.driver_cache(),
        });
        // Both, innermost first: a rejected passthrough module shows up as an internal error and
        // the pipeline built on it as a validation error.
        let errors: Vec<String> = [validation.pop().await, internal.pop().await].into_iter().flatten().map(|e| e.to_string()).collect();
        if !errors.is_empty() {
            return Err(Error::Pipeline(format!("{label}: {}", errors.join("; "))));
        }
        Ok(Pipeline { label, pipeline, layout, desc })
    }
}

/// A one-line kernel for the core's own unit tests (`a[i] += b[i]`, `i < n`), so that they need no
/// kernel family.
#[cfg(test)]
pub(crate) mod test_kernel {
    use super::*;
    use crate::batch::Batch;
    use crate::buffer::GpuBuffer;

    #[derive(Clone, Debug, Hash, PartialEq, Eq)]
    struct AddInplace;

    const BINDINGS: &[StorageBinding] = &[StorageBinding::write("a", "f32"), StorageBinding::read("b", "f32")];

    impl PipelineKey for AddInplace {
        fn describe(&self, _caps: &Caps) -> PipelineDesc {
            let wgsl = "struct P { n: u32, p0: u32, p1: u32, p2: u32, }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.n) { a[id.x] += b[id.x]; }
}";
            PipelineDesc { source: ShaderSource::Wgsl(vec![wgsl]), entry: "main", constants: vec![], workgroup_size: [64, 1, 1], params_size: 16, bindings: BINDINGS }
        }
    }

    /// `a[i] += b[i]` for `i < n` (n < 64 * 65535).
    pub(crate) fn add_inplace(batch: &mut Batch, a: &GpuBuffer<f32>, b: &GpuBuffer<f32>, n: usize) -> Result<()> {
        a.require("a", n)?;
        b.require("b", n)?;
        batch.dispatch(&AddInplace, &[n as u32, 0, 0, 0], &[a.raw(), b.raw()], [(n as u32).div_ceil(64), 1, 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::Poll;

    /// A one-kernel key: a valid module, or one naga rejects.
    #[derive(Clone, Debug, Hash, PartialEq, Eq)]
    struct Probe(bool);

    impl PipelineKey for Probe {
        fn describe(&self, _caps: &Caps) -> PipelineDesc {
            let body = if self.0 { "@compute @workgroup_size(1) fn main() {}" } else { "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }" };
            PipelineDesc { source: ShaderSource::Wgsl(vec![body]), entry: "main", constants: vec![], workgroup_size: [1, 1, 1], params_size: 16, bindings: &[] }
        }
    }

    /// Drive `f` on this thread alone: poll it, and between polls let the device (if any) make
    /// progress without waiting (`PollType::Poll`). Never blocks.
    fn drive_on<F: Future>(ctx: Option<&Context>, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(120) {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            if let Some(ctx) = ctx {
                ctx.device.poll(wgpu::PollType::Poll).expect("device poll");
            }
            std::thread::yield_now();
        }
        panic!("the future did not complete");
    }

    fn drive<F: Future>(ctx: &Context, f: F) -> F::Output {
        drive_on(Some(ctx), f)
    }

    #[test]
    fn pipelines_build_on_a_single_threaded_executor() {
        let ctx = Context::new_blocking(crate::ContextOptions::default()).expect("a GPU adapter (lavapipe on CI)");
        let built = drive(&ctx, ctx.pipeline_async(&Probe(true))).expect("a valid module builds");
        // Cached: the blocking form returns the same pipeline without building again.
        assert!(Arc::ptr_eq(&built, &ctx.pipeline(&Probe(true)).unwrap()));
        let err = drive(&ctx, ctx.pipeline_async(&Probe(false))).err().expect("an invalid module is an error");
        assert!(matches!(err, Error::Pipeline(_)), "{err}");
    }

    /// The async API end to end on one thread with no blocking wait: creating the context,
    /// building a batch's pipelines (one asked for by the recording itself, as some kernels do),
    /// running the batch and reading back. The switch makes any blocking wait reached from an
    /// async function panic; that it is armed is checked at the end.
    #[test]
    fn async_api_never_blocks() {
        use crate::context::blocking;
        blocking::FORBID.with(|f| f.set(true));
        let ctx = drive_on(None, Context::new(crate::ContextOptions::default())).expect("a GPU adapter (lavapipe on CI)");
        // Outside the async API an unbuilt pipeline may be refused instead of built.
        let refused = {
            let _mode = UnbuiltMode::set(Unbuilt::Refuse);
            ctx.pipeline(&Probe(true)).err().expect("refused")
        };
        assert!(matches!(refused, Error::Pipeline(_)) && ctx.built_pipelines().is_empty(), "{refused}");
        let n = 1000;
        let start: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (a, half) = (ctx.upload(&start).unwrap(), ctx.upload(&vec![0.5f32; n]).unwrap());
        let batch = drive(
            &ctx,
            ctx.batch_async(|b| {
                b.context().pipeline(&Probe(true))?;
                b.dispatch(&Probe(true), &[0u32; 4], &[], [1, 1, 1])?;
                super::test_kernel::add_inplace(b, &a, &half, n)
            }),
        )
        .expect("prepared and recorded");
        assert_eq!(batch.len(), 2);
        assert_eq!(ctx.built_pipelines().len(), 2, "both pipelines built by prepare");
        drive(&ctx, batch.run_async()).expect("ran");
        let got = drive(&ctx, ctx.read_async(&a)).expect("read back");
        assert_eq!(got, start.iter().map(|v| v + 0.5).collect::<Vec<_>>());
        // A pipeline that fails to build is an error of the preparation, and nothing runs.
        let err = drive(&ctx, ctx.batch_async(|b| b.dispatch(&Probe(false), &[0u32; 4], &[], [1, 1, 1]))).err().expect("an invalid module is an error");
        assert!(matches!(err, Error::Pipeline(_)), "{err}");
        // The switch is armed: a blocking wait inside an async function of the crate panics ...
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drive(&ctx, blocking::guarded(async { ctx.read(&a) }))));
        assert!(caught.is_err(), "a blocking read inside the async API must panic with the switch on");
        // ... while the blocking helpers still work outside it.
        assert_eq!(ctx.read(&a).unwrap(), got);
        blocking::FORBID.with(|f| f.set(false));
    }
}
