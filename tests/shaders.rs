//! Shader checks with no GPU: every pipeline of every kernel (all variants and override
//! combinations a kernel can pick) parses and validates in naga and translates to MSL 2.4 and
//! SPIR-V 1.3 (and 1.6 as wgpu's Vulkan backend writes it); every WGSL file is used by at least one pipeline.
//!
//! Cooperative-matrix (Matrix variant) pipelines use 16x16 matrices. naga translates them to MSL
//! as `simdgroup_half16x16` etc., which Metal does not have (its simdgroup matrices are 8x8), so
//! that MSL is checked only for being produced; the Matrix variant is never selected on Metal
//! (it requires a 16x16x16 f16 -> f32 configuration, and Apple GPUs offer 8x8).

use std::collections::BTreeSet;
use wgkernels::shaders::translate;

#[test]
fn every_pipeline_translates() {
    let mut used = BTreeSet::new();
    let mut n = 0;
    for (label, desc) in wgkernels::kernels::all_pipelines() {
        if let wgkernels::pipeline::ShaderSource::Wgsl(parts) = &desc.source {
            for p in parts {
                used.insert(p.to_string());
            }
        }
        let t = translate(&desc).unwrap_or_else(|e| panic!("{label}: {e}"));
        if desc.source.text().contains("enable wgpu_cooperative_matrix;") {
            assert!(t.msl.contains("simdgroup_"), "{label}: cooperative matrices missing from the MSL");
            println!("note {label}: MSL with 16x16 simdgroup matrices (not valid Metal; Vulkan-only variant)");
        }
        assert!(t.msl.contains(&format!("kernel void {}", desc.entry)) || t.msl.contains("kernel void"), "{label}: no kernel in MSL");
        assert!(!t.msl.contains("fake"), "{label}: MSL has unmapped bindings");
        assert_eq!(t.spirv.first(), Some(&0x0723_0203), "{label}: not SPIR-V");
        // As wgpu's Vulkan backend would write it (examples/shader_stats.rs compiles this), both ways.
        for checked in [false, true] {
            let v = wgkernels::shaders::vulkan_spirv(&desc, checked).unwrap_or_else(|e| panic!("{label}: vulkan SPIR-V: {e}"));
            assert_eq!(v.first(), Some(&0x0723_0203), "{label}: not SPIR-V");
        }
        println!("ok {label}: {} lines MSL, {} words SPIR-V", t.msl.lines().count(), t.spirv.len());
        n += 1;
    }
    assert!(n > 0);
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/wgsl")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // A template (the Matrix kernels, `//@` lines) is used in expanded forms, which keep
        // its header.
        let templated = text.contains("//@") && used.iter().any(|u| u.lines().next() == text.lines().next());
        assert!(used.contains(&text) || templated, "{} is not used by any pipeline", path.display());
    }
}
