//! Every WGSL pipeline the library can build (the test kit's pipeline list: every family, variant,
//! format and plan), written out in the WGSL specification's dialect with its entry point,
//! override values and workgroup size, for compilers other than naga. `tools/tint/compile.mjs`
//! compiles the folder with Tint (Dawn's WebGPU, the compiler Chrome uses); `.ci/run` runs both.
//! Native (MSL) pipelines are left out: a browser never selects them, and their WGSL twins are in
//! the list as the Subgroup pipelines they are.
//!
//! Output: `$WGKERNELS_WGSL_OUT` if set, else `<target>/tmp/wgsl`: one `NNNN.wgsl` per pipeline
//! and `pipelines.json`, an array of `{label, file, entry, constants, workgroup_size, sources}`
//! (`sources`: the wgsl/ files the module is assembled from, `-` for a generated part).

#[path = "common/json.rs"]
mod json;

use std::path::PathBuf;
use wgkernels::pipeline::{ShaderSource, WgslDialect};

#[test]
fn write_every_pipeline_in_the_spec_dialect() {
    let dir = std::env::var_os("WGKERNELS_WGSL_OUT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wgsl"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    // wgsl/ files by content, to name a module's parts.
    let mut files = std::collections::HashMap::new();
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/wgsl")).unwrap() {
        let path = entry.unwrap().path();
        files.insert(std::fs::read_to_string(&path).unwrap(), path.file_name().unwrap().to_string_lossy().into_owned());
    }
    let mut manifest = Vec::new();
    let (mut subgroup, mut native) = (0, 0);
    for (label, desc) in wgkernels::kernels::all_pipelines() {
        let ShaderSource::Wgsl(parts) = &desc.source else {
            native += 1;
            continue;
        };
        let text = desc.source.wgsl(WgslDialect::Spec);
        let naga = desc.source.wgsl(WgslDialect::Naga);
        // The directive is the only difference, and only where subgroup builtins are used.
        if text != naga {
            assert_eq!(text.strip_prefix("enable subgroups;\n"), Some(naga.as_str()), "{label}");
            assert!(!label.contains("Portable"), "{label}: a Portable pipeline uses subgroups");
            subgroup += 1;
        }
        let sources: Vec<String> = parts.iter().map(|p| json::string(files.get(*p).map_or("-", String::as_str))).collect();
        let file = format!("{:04}.wgsl", manifest.len());
        std::fs::write(dir.join(&file), &text).unwrap();
        let [x, y, z] = desc.workgroup_size;
        manifest.push(format!(
            "{{\"label\": {}, \"file\": {}, \"entry\": {}, \"constants\": {}, \"workgroup_size\": [{x}, {y}, {z}], \"sources\": [{}]}}",
            json::string(&label),
            json::string(&file),
            json::string(desc.entry),
            json::constants(&desc.constants),
            sources.join(", ")
        ));
    }
    assert!(subgroup > 0 && manifest.len() > subgroup);
    std::fs::write(dir.join("pipelines.json"), format!("[\n{}\n]\n", manifest.join(",\n"))).unwrap();
    println!("{} WGSL pipelines ({subgroup} with subgroups; {native} Native left out) in {}", manifest.len(), dir.display());
}
