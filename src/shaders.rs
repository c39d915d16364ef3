//! Offline shader translation with naga (no GPU needed): parse + validate each pipeline's WGSL,
//! resolve its overrides, check its workgroup size against the description, and emit MSL (with the
//! passthrough binding convention: params at `buffer(0)`, storage binding i at `buffer(i)`) and
//! SPIR-V. Used by the shader tests, and the source of SPIR-V for exercising the passthrough
//! plumbing on Vulkan ([`twin_spirv`]).
//!
//! A Native (MSL) pipeline is translated through its WGSL twin, with the twin's entry point
//! renamed to the MSL kernel's, after checking that the two descriptions agree on params size,
//! bindings and workgroup size.

use crate::pipeline::{PipelineDesc, ShaderSource};
use naga::back::msl;
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};

/// Naga's outputs for one pipeline.
pub struct Translated {
    pub msl: String,
    pub spirv: Vec<u32>,
}

/// Parse, validate and specialise a WGSL pipeline for `desc.entry`, renamed to `entry`.
fn specialise(desc: &PipelineDesc, entry: &str) -> Result<(naga::Module, ModuleInfo), String> {
    let ShaderSource::Wgsl(_) = &desc.source else {
        return Err("not a WGSL pipeline".into());
    };
    let text = desc.source.text();
    let module = naga::front::wgsl::parse_str(&text).map_err(|e| e.emit_to_string(&text))?;
    let caps = Capabilities::SUBGROUP
        | Capabilities::SUBGROUP_BARRIER
        | Capabilities::SHADER_FLOAT16
        | Capabilities::SHADER_FLOAT16_IN_FLOAT32
        | Capabilities::IMMEDIATES
        | Capabilities::COOPERATIVE_MATRIX;
    let info = Validator::new(ValidationFlags::all(), caps).validate(&module).map_err(|e| e.emit_to_string(&text))?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, v) in &desc.constants {
        constants.insert(name.to_string(), *v);
    }
    let ep = (naga::ShaderStage::Compute, desc.entry);
    let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, Some(ep), &constants).map_err(|e| format!("overrides: {e}"))?;
    let mut module = module.into_owned();
    let found = module.entry_points.iter_mut().find(|e| e.name == desc.entry).ok_or_else(|| format!("no entry point {}", desc.entry))?;
    if found.workgroup_size != desc.workgroup_size {
        return Err(format!("{}: @workgroup_size {:?} after overrides, description says {:?}", desc.entry, found.workgroup_size, desc.workgroup_size));
    }
    found.name = entry.to_string();
    Ok((module, info.into_owned()))
}

/// The WGSL to translate for `desc` (itself, or a Native pipeline's twin) after checking that a
/// twin agrees with its Native description.
fn wgsl_of(desc: &PipelineDesc) -> Result<&PipelineDesc, String> {
    let Some(twin) = desc.twin() else {
        return Ok(desc);
    };
    if twin.twin().is_some() {
        return Err("a twin must be WGSL".into());
    }
    if (twin.params_size, twin.bindings, twin.workgroup_size) != (desc.params_size, desc.bindings, desc.workgroup_size) {
        return Err(format!(
            "{} and its twin {} disagree: params {} vs {} bytes, bindings {:?} vs {:?}, workgroup {:?} vs {:?}",
            desc.entry, twin.entry, desc.params_size, twin.params_size, desc.bindings, twin.bindings, desc.workgroup_size, twin.workgroup_size
        ));
    }
    Ok(twin)
}

fn spirv_of(module: &naga::Module, info: &ModuleInfo, entry: &str) -> Result<Vec<u32>, String> {
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.to_string() };
    naga::back::spv::write_vec(module, info, &options, Some(&pipeline)).map_err(|e| format!("spv: {e}"))
}

/// SPIR-V of a WGSL pipeline (a Native one: its twin) as wgpu 30's Vulkan backend writes it for
/// this crate's default modules (`create_shader_module_trusted`: no bounds checks, no loop
/// bounding, no integer-division checks, workgroup memory not zeroed) or, with `checked`, for
/// `ContextOptions::bounds_checks` (Restrict bounds, loop bounding, division checks). SPIR-V 1.6,
/// every capability allowed. What tools compile to look at the driver's code.
pub fn vulkan_spirv(desc: &PipelineDesc, checked: bool) -> Result<Vec<u32>, String> {
    spirv_as_wgpu(desc, checked, (1, 6))
}

/// [`vulkan_spirv`] at SPIR-V version `lang`.
fn spirv_as_wgpu(desc: &PipelineDesc, checked: bool, lang: (u8, u8)) -> Result<Vec<u32>, String> {
    use naga::back::spv;
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
    let (module, info) = specialise(wgsl_of(desc)?, desc.entry)?;
    let policy = if checked { BoundsCheckPolicy::Restrict } else { BoundsCheckPolicy::Unchecked };
    let options = spv::Options {
        lang_version: lang,
        flags: spv::WriterFlags::empty(),
        bounds_check_policies: BoundsCheckPolicies { index: policy, buffer: policy, image_load: policy, binding_array: BoundsCheckPolicy::Unchecked },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: checked,
        emit_int_div_checks: checked,
        // Group g, binding b as descriptor set g, binding b (wgpu maps them the same way here).
        fake_missing_bindings: true,
        ..Default::default()
    };
    let pipeline = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: desc.entry.to_string() };
    spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| format!("spv: {e}"))
}

/// SPIR-V of a Native pipeline's WGSL twin, entry point named `desc.entry`: what the passthrough
/// path is fed on Vulkan to exercise the Native plumbing (see `native.rs`). Written with the
/// options wgpu's Vulkan backend uses for the twin's own WGSL pipeline ([`vulkan_spirv`]; SPIR-V
/// 1.3), `checked` as `ContextOptions::bounds_checks`, so the driver compiles the same code. In
/// particular workgroup memory is not zeroed: naga's default zero-initialisation polyfill (one
/// invocation stores a null constant over every workgroup array) took lavapipe 250 s to compile
/// for one prefill twin (head_dim 128, 16 x 32 tiles) against 0.12 s without it.
pub fn twin_spirv(desc: &PipelineDesc, checked: bool) -> Result<Vec<u32>, String> {
    if desc.twin().is_none() {
        return Err(format!("{} is not a Native pipeline", desc.entry));
    }
    spirv_as_wgpu(desc, checked, (1, 3))
}

/// The MSL wgpu 30's Metal backend writes for a WGSL pipeline (a Native one: its twin) built by
/// this crate: `wgpu_hal::metal::Device::load_shader`'s naga options for MSL version `lang` (what
/// `adapter.rs` picks from the OS: 2.2 on macOS 10.15 up to 4.0 on macOS 26), bounds-check policies
/// `Restrict` with `checked` (`ContextOptions::bounds_checks`: `create_shader_module`) else
/// `Unchecked` (`create_shader_module_trusted(.., ShaderRuntimeChecks::unchecked())`), loop bounding
/// and integer-division checks likewise, workgroup memory not zeroed (this crate's
/// `PipelineCompilationOptions`), `fake_missing_bindings` off, and the resource map
/// `create_pipeline_layout` makes for the crate's one bind group with no immediates: binding `i`
/// at `[[buffer(i)]]` (params uniform 0, storage buffers mutable unless read-only), the sizes
/// buffer after them (a storage binding makes wgpu reserve it). docs/METAL_CPU_EXECUTION.md.
pub fn metal_msl(desc: &PipelineDesc, checked: bool, lang: (u8, u8)) -> Result<MetalMsl, String> {
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
    let (module, info) = specialise(wgsl_of(desc)?, desc.entry)?;
    let mut resources = msl::BindingMap::default();
    for binding in 0..=desc.bindings.len() as u32 {
        let mutable = binding > 0 && !desc.bindings[binding as usize - 1].read_only;
        resources.insert(naga::ResourceBinding { group: 0, binding }, msl::BindTarget { buffer: Some(binding as u8), mutable, ..Default::default() });
    }
    let sizes_buffer = (!desc.bindings.is_empty()).then_some(desc.bindings.len() as u8 + 1);
    let mut map = msl::EntryPointResourceMap::default();
    map.insert(desc.entry.to_string(), msl::EntryPointResources { resources, immediates_buffer: None, sizes_buffer });
    let policy = if checked { BoundsCheckPolicy::Restrict } else { BoundsCheckPolicy::Unchecked };
    let options = msl::Options {
        lang_version: lang,
        fake_missing_bindings: false,
        per_entry_point_map: map,
        bounds_check_policies: BoundsCheckPolicies { index: policy, buffer: policy, image_load: policy, binding_array: BoundsCheckPolicy::Unchecked },
        zero_initialize_workgroup_memory: false,
        force_loop_bounding: checked,
        emit_int_div_checks: checked,
        mesh_shader_primitive_indices_clamp: checked,
        ray_query_initialization_tracking: checked,
        // Task shaders only (`task_shader_dispatch_tracking`); none here.
        task_dispatch_limits: None,
        inline_samplers: Vec::new(),
        spirv_cross_compatibility: false,
    };
    let pipeline_options = msl::PipelineOptions { entry_point: Some((naga::ShaderStage::Compute, desc.entry.to_string())), vertex_pulling_transform: true, ..Default::default() };
    let (text, _) = msl::write_string(&module, &info, &options, &pipeline_options).map_err(|e| format!("msl: {e}"))?;
    // What `load_shader` collects as `sized_bindings` (and `make_sizes_buffer_update` fills).
    let sized_bindings = module
        .global_variables
        .iter()
        .filter(|(_, v)| matches!(v.space, naga::AddressSpace::Storage { .. } | naga::AddressSpace::Uniform) && module.types[v.ty].inner.needs_host_buffer_byte_size(&module.types))
        .filter_map(|(_, v)| v.binding.map(|b| b.binding))
        .collect();
    let workgroup_bytes = workgroup_bytes_of(&module, &info, desc.entry)?;
    Ok(MetalMsl { text, sized_bindings, workgroup_bytes })
}

/// [`metal_msl`]'s output: the MSL, the bindings whose byte sizes wgpu's Metal backend puts in
/// the sizes buffer (`_mslBufferSizes`), in order (one `uint` each), and the workgroup memory the
/// entry point uses ([`workgroup_bytes`]).
pub struct MetalMsl {
    pub text: String,
    pub sized_bindings: Vec<u32>,
    pub workgroup_bytes: u64,
}

/// Threadgroup memory of an Apple GPU as wgpu 30's Metal backend reports it
/// (`max_compute_workgroup_storage_size`: `maxTotalThreadgroupMemoryAllocation`, 32 KiB on every
/// Apple GPU family wgpu 30 knows; docs/METAL.md has the limit table and its source).
pub const APPLE_THREADGROUP_MEMORY: u32 = 32 << 10;

/// The subgroup sizes wgpu 30's Metal backend reports (`subgroup_min_size`, `subgroup_max_size`);
/// Apple GPUs' simdgroups have 32 lanes.
pub const APPLE_SUBGROUP_SIZES: (u32, u32) = (4, 64);

/// Bytes of workgroup memory `desc`'s WGSL (a Native pipeline's twin) declares for its entry
/// point after overrides: naga's layout of each `var<workgroup>` the entry point uses, rounded up
/// to 16 bytes as Metal allocates threadgroup memory.
pub fn workgroup_bytes(desc: &PipelineDesc) -> Result<u64, String> {
    let (module, info) = specialise(wgsl_of(desc)?, desc.entry)?;
    workgroup_bytes_of(&module, &info, desc.entry)
}

fn workgroup_bytes_of(module: &naga::Module, info: &ModuleInfo, entry: &str) -> Result<u64, String> {
    let ep = module.entry_points.iter().position(|e| e.name == entry).ok_or_else(|| format!("no entry point {entry}"))?;
    let uses = info.get_entry_point(ep);
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).map_err(|e| format!("layout: {e}"))?;
    Ok(module
        .global_variables
        .iter()
        .filter(|(h, v)| v.space == naga::AddressSpace::WorkGroup && !uses[*h].is_empty())
        .map(|(_, v)| u64::from(layouter[v.ty].size).div_ceil(16) * 16)
        .sum())
}

/// Parse, validate, specialise and translate one pipeline (a Native one through its twin).
/// `Err` holds naga's message.
pub fn translate(desc: &PipelineDesc) -> Result<Translated, String> {
    let (module, info) = specialise(wgsl_of(desc)?, desc.entry)?;
    let mut resources = msl::BindingMap::default();
    for binding in 0..=desc.bindings.len() as u32 {
        let target = msl::BindTarget { buffer: Some(binding as u8), mutable: binding > 0 && !desc.bindings[binding as usize - 1].read_only, ..Default::default() };
        resources.insert(naga::ResourceBinding { group: 0, binding }, target);
    }
    let mut map = msl::EntryPointResourceMap::default();
    map.insert(desc.entry.to_string(), msl::EntryPointResources { resources, immediates_buffer: None, sizes_buffer: Some(desc.bindings.len() as u8 + 1) });
    let options = msl::Options { lang_version: (2, 4), per_entry_point_map: map, fake_missing_bindings: false, ..Default::default() };
    let pipeline_options = msl::PipelineOptions { entry_point: Some((naga::ShaderStage::Compute, desc.entry.to_string())), ..Default::default() };
    let (msl, _) = msl::write_string(&module, &info, &options, &pipeline_options).map_err(|e| format!("msl: {e}"))?;
    let spirv = spirv_of(&module, &info, desc.entry)?;
    Ok(Translated { msl, spirv })
}
