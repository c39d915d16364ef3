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

use crate::caps::{Caps, Variant};
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
    /// Element type as the shaders see it ("f32", "u32", "vec4<u32>", ...), for the MSL checks.
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
    /// Hand-written MSL for the passthrough path (Metal only).
    Msl(&'static str),
}

impl ShaderSource {
    pub fn text(&self) -> String {
        match self {
            ShaderSource::Wgsl(parts) => parts.concat(),
            ShaderSource::Msl(s) => s.to_string(),
        }
    }
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

/// A typed pipeline key. See the module docs.
pub trait PipelineKey: Hash + Eq + Clone + Debug + Send + Sync + 'static {
    fn variant(&self) -> Variant;
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

/// Pipelines by key, per context.
#[derive(Default)]
pub struct PipelineCache {
    map: Mutex<HashMap<CacheKey, Arc<Pipeline>>>,
}

impl PipelineCache {
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
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
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: wgpu::BufferSize::new(desc.params_size),
        },
        count: None,
    }];
    for (i, b) in desc.bindings.iter().enumerate() {
        e.push(wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: b.read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    e
}

impl Context {
    /// The cached pipeline for `key`, building it on first use. Shader compile or validation
    /// errors come back as [`Error::Pipeline`], never as a panic.
    pub fn pipeline<K: PipelineKey>(&self, key: &K) -> Result<Arc<Pipeline>> {
        let ck = CacheKey(Box::new(key.clone()));
        if let Some(p) = self.pipelines.map.lock().map_err(|_| Error::Pipeline("cache poisoned".into()))?.get(&ck) {
            return Ok(p.clone());
        }
        let built = Arc::new(self.build_pipeline(key)?);
        self.pipelines
            .map
            .lock()
            .map_err(|_| Error::Pipeline("cache poisoned".into()))?
            .insert(ck, built.clone());
        Ok(built)
    }

    fn build_pipeline<K: PipelineKey>(&self, key: &K) -> Result<Pipeline> {
        let desc = key.describe(self.caps());
        let label = format!("{key:?}");
        let device = &self.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(&label),
            entries: &layout_entries(&desc),
        });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let module = match &desc.source {
            ShaderSource::Wgsl(_) => {
                let text = desc.source.text();
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
            ShaderSource::Msl(text) => {
                let [x, y, z] = desc.workgroup_size;
                let d = wgpu::ShaderModuleDescriptorPassthrough {
                    label: Some(&label),
                    entry_points: vec![wgpu::PassthroughShaderEntryPoint { name: desc.entry.into(), workgroup_size: (x, y, z) }].into(),
                    msl: Some((*text).into()),
                    ..Default::default()
                };
                // SAFETY: passthrough MSL bypasses validation; the binding-convention and clang
                // checks in tests/ pin each kernel's signature to `desc`.
                unsafe { device.create_shader_module_passthrough(d) }
            }
        };
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(desc.entry),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &desc.constants, zero_initialize_workgroup_memory: false },
            cache: None,
        });
        if let Some(err) = pollster::block_on(scope.pop()) {
            return Err(Error::Pipeline(format!("{label}: {err}")));
        }
        Ok(Pipeline { label, pipeline, layout, desc })
    }
}
