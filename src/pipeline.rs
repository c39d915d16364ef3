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
}

impl<K: PipelineKey> DynKey for K {
    fn as_any(&self) -> &dyn Any {
        self
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

/// The bind-group layout every pipeline of a [`PipelineDesc`] uses.
pub fn layout_entries(desc: &PipelineDesc) -> Vec<wgpu::BindGroupLayoutEntry> {
    let mut e = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Uniform, has_dynamic_offset: false, min_binding_size: wgpu::BufferSize::new(desc.params_size) },
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
        let built = Arc::new(self.build_desc(format!("{key:?}"), key.describe(self.caps()))?);
        *slot = Some(built.clone());
        Ok(built)
    }

    /// [`Context::pipeline`] without blocking: the device's error scopes are awaited. (Two
    /// concurrent first uses of one key may both build; the first stored is kept.)
    pub async fn pipeline_async<K: PipelineKey>(&self, key: &K) -> Result<Arc<Pipeline>> {
        let slot = self.slot(key)?;
        if let Some(p) = &*slot.lock().map_err(poisoned)? {
            return Ok(p.clone());
        }
        let built = Arc::new(self.build_desc_async(format!("{key:?}"), key.describe(self.caps())).await?);
        let mut stored = slot.lock().map_err(poisoned)?;
        Ok(stored.get_or_insert(built).clone())
    }

    /// The cache slot of `key` (made empty on first use).
    fn slot<K: PipelineKey>(&self, key: &K) -> Result<Slot> {
        Ok(self.pipelines.map.lock().map_err(poisoned)?.entry(CacheKey(Box::new(key.clone()))).or_default().clone())
    }

    /// Blocking form of [`Context::build_desc_async`] (native code).
    pub(crate) fn build_desc(&self, label: String, desc: PipelineDesc) -> Result<Pipeline> {
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

    /// Drive `f` on this thread alone: poll it, and between polls let the device make progress
    /// without waiting (`PollType::Poll`). Never blocks.
    fn drive<F: Future>(ctx: &Context, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for _ in 0..10_000 {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            ctx.device.poll(wgpu::PollType::Poll).expect("device poll");
        }
        panic!("the future did not complete");
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
}
