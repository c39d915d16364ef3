//! Offline shader translation with naga (no GPU needed): parse + validate each pipeline's WGSL,
//! resolve its overrides, and emit MSL (with the passthrough binding convention: params at
//! `buffer(0)`, storage binding i at `buffer(i)`) and SPIR-V. Used by the shader tests, and the
//! source of SPIR-V for exercising the passthrough plumbing on Vulkan.

use crate::pipeline::{PipelineDesc, ShaderSource};
use naga::back::msl;
use naga::valid::{Capabilities, ValidationFlags, Validator};

/// Naga's outputs for one pipeline.
pub struct Translated {
    pub msl: String,
    pub spirv: Vec<u32>,
}

/// Parse, validate, specialise and translate one WGSL pipeline. `Err` holds naga's message.
pub fn translate(desc: &PipelineDesc) -> Result<Translated, String> {
    let ShaderSource::Wgsl(_) = &desc.source else {
        return Err("not a WGSL pipeline".into());
    };
    let text = desc.source.text();
    let module = naga::front::wgsl::parse_str(&text).map_err(|e| e.emit_to_string(&text))?;
    let caps = Capabilities::SUBGROUP | Capabilities::SUBGROUP_BARRIER | Capabilities::SHADER_FLOAT16 | Capabilities::SHADER_FLOAT16_IN_FLOAT32 | Capabilities::IMMEDIATES;
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string(&text))?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, v) in &desc.constants {
        constants.insert(name.to_string(), *v);
    }
    let ep = (naga::ShaderStage::Compute, desc.entry);
    let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, Some(ep), &constants)
        .map_err(|e| format!("overrides: {e}"))?;

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

    let spv_options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let spv_pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: desc.entry.to_string() };
    let spirv = naga::back::spv::write_vec(&module, &info, &spv_options, Some(&spv_pipeline)).map_err(|e| format!("spv: {e}"))?;
    Ok(Translated { msl, spirv })
}
