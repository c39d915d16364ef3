//! The binding-convention check: the most likely way a Metal kernel breaks on first contact is a
//! signature that disagrees with the bind-group layout wgpu builds, so pin every MSL kernel to it.
//!
//! wgpu's Metal passthrough gives immediates `buffer(0)` when present (we use none), then every
//! buffer binding of group 0, 1, ... in ascending binding order; no sizes buffer is ever bound.
//! Our layout (src/pipeline.rs): binding 0 = params uniform, binding i = `bindings[i - 1]`. So for
//! every Native pipeline of every kernel (from the registry) the MSL kernel named by its entry point
//! must take exactly: `constant P& _ [[buffer(0)]]` with P field-for-field the twin's WGSL `Params`
//! and of `params_size` bytes, then `device const T* _ [[buffer(i)]]` (read-only) or
//! `device T* _ [[buffer(i)]]` (read-write) with T the binding's element type, and otherwise only
//! known builtins. Also: every kernel of every MSL program (msl/*.metal and the programs assembled
//! from msl/gemv/ parts, found through the registry) is used, every twin is one of its kernel's Subgroup
//! pipelines (its Portable pipeline for a kernel without a Subgroup variant: the weight-matrix
//! GEMMs), constants shared by name with the twin (override values such as ROWS, and
//! module-scope WGSL `const NAME: u32` sizes such as WG, SPLIT_MAX) agree, the TurboQuant MSL
//! codebook literals equal the f32 values codebook.rs generates, and the sizes the Rust decode plan
//! mirrors from msl/attn_decode.metal (threadgroup size, team width bound, static arrays) and its
//! entry points per head_dim agree with the file.

mod mslparse;

use mslparse::{parse, MslFile, Space};
use std::collections::BTreeSet;
use wgkernels::pipeline::{PipelineDesc, ShaderSource};
use wgkernels::Variant;

/// MSL spelling of a binding's element type.
fn msl_elem(wgsl: &str) -> Option<&'static str> {
    Some(match wgsl {
        "f32" => "float",
        "u32" => "uint",
        "i32" => "int",
        "f16" => "half",
        "vec2<f32>" => "float2",
        "vec4<f32>" => "float4",
        "vec2<u32>" => "uint2",
        "vec4<u32>" => "uint4",
        "vec4<i32>" => "int4",
        _ => return None,
    })
}

/// MSL spelling of a WGSL scalar params field type.
fn msl_field(wgsl: &str) -> Option<&'static str> {
    Some(match wgsl {
        "u32" => "uint",
        "i32" => "int",
        "f32" => "float",
        _ => return None,
    })
}

/// Builtins a kernel may take, with the type we declare them as.
const BUILTINS: &[(&str, &str)] = &[
    ("threadgroup_position_in_grid", "uint3"),
    ("threadgroups_per_grid", "uint3"),
    ("threads_per_threadgroup", "uint3"),
    ("thread_position_in_grid", "uint3"),
    ("thread_index_in_threadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"),
    ("threads_per_simdgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"),
    ("simdgroups_per_threadgroup", "uint"),
];

/// Fields of `struct Params { name: type, ... }` in WGSL.
fn wgsl_params(text: &str) -> Result<Vec<(String, String)>, String> {
    let start = text.find("struct Params {").ok_or("twin has no `struct Params`")?;
    let body = &text[start + "struct Params {".len()..];
    let body = &body[..body.find('}').ok_or("unclosed struct Params")?];
    mslparse::strip_comments(body)
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, ty) = f.split_once(':').ok_or_else(|| format!("Params field `{f}`"))?;
            let ty = msl_field(ty.trim()).ok_or_else(|| format!("Params field `{f}`: not a 32-bit scalar"))?;
            Ok((name.trim().to_string(), ty.to_string()))
        })
        .collect()
}

/// Module-scope `const NAME: u32 = <literal>;` of a WGSL text (sizes the MSL mirrors by name).
fn wgsl_u32_consts(text: &str) -> Vec<(String, u64)> {
    mslparse::strip_comments(text)
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("const ")?;
            let (name, rest) = rest.split_once(':')?;
            let (ty, value) = rest.split_once('=')?;
            if ty.trim() != "u32" {
                return None;
            }
            let v = value.trim().strip_suffix(';')?.trim().trim_end_matches('u').parse().ok()?;
            Some((name.trim().to_string(), v))
        })
        .collect()
}

/// Every check for one Native pipeline against its MSL file. Returns the problems found.
fn check_pipeline(label: &str, desc: &PipelineDesc, file: &MslFile) -> Vec<String> {
    let mut bad = Vec::new();
    let mut fail = |s: String| bad.push(format!("{label} ({}): {s}", desc.entry));
    let Some(twin) = desc.twin() else {
        fail("not a Native pipeline".into());
        return bad;
    };
    let Some(kernel) = file.kernels.iter().find(|k| k.name == desc.entry) else {
        fail(format!("no `kernel void {}` in {}", desc.entry, file.path.display()));
        return bad;
    };
    let mut seen = BTreeSet::new();
    for p in &kernel.params {
        if let Some(i) = p.buffer_index() {
            if !seen.insert(i) {
                fail(format!("buffer({i}) bound twice"));
            }
            if i == 0 {
                let ok = p.space == Space::Constant && p.indirection == "&";
                if !ok {
                    fail(format!("buffer(0) must be `constant Params& p` (the params uniform), found {:?} {}{} {}", p.space, p.ty, p.indirection, p.name));
                }
                match file.structs.get(&p.ty) {
                    None => fail(format!("params type {} is not a struct of the file", p.ty)),
                    Some(fields) => {
                        let bytes: u64 = fields.iter().map(|(t, _)| mslparse::type_size(t).unwrap_or(u64::MAX / 64)).sum();
                        if bytes != desc.params_size {
                            fail(format!("struct {} is {bytes} bytes, the params uniform is {}", p.ty, desc.params_size));
                        }
                        let msl: Vec<(String, String)> = fields.iter().map(|(t, n)| (n.clone(), t.clone())).collect();
                        match wgsl_params(&twin.source.text()) {
                            Ok(w) if w == msl => {}
                            Ok(w) => fail(format!("struct {} {msl:?} differs from the twin's Params {w:?}", p.ty)),
                            Err(e) => fail(e),
                        }
                    }
                }
                continue;
            }
            let Some(b) = desc.bindings.get(i as usize - 1) else {
                fail(format!("buffer({i}) beyond the {} storage bindings (a sizes buffer? none is bound)", desc.bindings.len()));
                continue;
            };
            let want_space = if b.read_only { Space::DeviceConst } else { Space::Device };
            if p.space != want_space || p.indirection != "*" {
                fail(format!(
                    "buffer({i}) `{}` is {:?}{}, binding `{}` is {} so it must be {want_space:?}*",
                    p.name,
                    p.space,
                    p.indirection,
                    b.name,
                    if b.read_only { "read-only" } else { "read-write" }
                ));
            }
            match msl_elem(b.elem) {
                Some(t) if t == p.ty => {}
                Some(t) => fail(format!("buffer({i}) `{}` has element type {}, binding `{}` holds {} ({t})", p.name, p.ty, b.name, b.elem)),
                None => fail(format!("binding `{}` element type {} has no MSL spelling here", b.name, b.elem)),
            }
        } else {
            match BUILTINS.iter().find(|(a, _)| *a == p.attr) {
                Some((_, ty)) if p.space == Space::Value && p.ty == *ty => {}
                Some((a, ty)) => fail(format!("builtin [[{a}]] must be a `{ty}` value, found {:?} {}", p.space, p.ty)),
                None => fail(format!("parameter `{}` has unknown attribute [[{}]]", p.name, p.attr)),
            }
        }
    }
    for i in 0..=desc.bindings.len() as u32 {
        if !seen.contains(&i) {
            fail(format!("buffer({i}) missing from the signature"));
        }
    }
    for (name, v) in &twin.constants {
        if let Some(&c) = file.constants.get(*name) {
            if c as f64 != *v {
                fail(format!("constant {name} = {c} in MSL, {v} in the twin"));
            }
        }
    }
    for (name, v) in wgsl_u32_consts(&twin.source.text()) {
        if let Some(&c) = file.constants.get(&name) {
            if c != v {
                fail(format!("constant {name} = {c} in MSL, {v} in the twin's WGSL"));
            }
        }
    }
    let threads: u32 = desc.workgroup_size.iter().product();
    if threads == 0 || threads > 1024 {
        fail(format!("workgroup size {:?} outside Metal's 1..=1024 threads", desc.workgroup_size));
    }
    bad
}

#[test]
fn every_native_pipeline_matches_its_msl_signature() {
    let files: Vec<MslFile> = mslparse::programs();
    assert!(!files.is_empty(), "no MSL programs");
    let mut used_kernels = BTreeSet::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for kernel in wgkernels::kernels::registry() {
        let pipelines = kernel.pipelines();
        let has_native = kernel.info().variants.contains(&Variant::Native);
        let natives: Vec<_> = pipelines.iter().filter(|(_, d)| d.twin().is_some()).collect();
        if has_native && natives.is_empty() {
            problems.push(format!("{} lists Native but none of its pipelines is Native", kernel.info().name));
        }
        if !has_native && !natives.is_empty() {
            problems.push(format!("{} has Native pipelines but does not list the Native variant", kernel.info().name));
        }
        for (label, desc) in natives {
            let ShaderSource::Msl { text, twin } = &desc.source else { unreachable!() };
            let Some(file) = files.iter().find(|f| f.text == *text) else {
                problems.push(format!("{label}: its MSL is not one of the programs"));
                continue;
            };
            problems.extend(check_pipeline(label, desc, file));
            // The twin must be one of this kernel's own WGSL pipelines (so the harness tests it): a
            // Subgroup pipeline, or for a kernel whose plan is the Portable one (the weight-matrix
            // GEMMs) its Portable pipeline.
            let same =
                |d: &PipelineDesc| d.source.text() == twin.source.text() && d.entry == twin.entry && d.constants == twin.constants && d.workgroup_size == twin.workgroup_size;
            let portable_plan = kernel.info().variants.first() == Some(&Variant::Portable) && !kernel.info().variants.contains(&Variant::Subgroup);
            if !pipelines.iter().any(|(l, d)| d.twin().is_none() && same(d) && (l.contains("Subgroup") || portable_plan)) {
                problems.push(format!(
                    "{label}: twin {} is not one of {}'s Subgroup pipelines (or, without a Subgroup variant, its WGSL pipelines)",
                    twin.entry,
                    kernel.info().name
                ));
            }
            used_kernels.insert((file.path.clone(), desc.entry.to_string()));
            println!("ok {label}: {} in {} (twin {} {:?})", desc.entry, file.path.file_name().unwrap_or_default().to_string_lossy(), twin.entry, twin.constants);
            checked += 1;
        }
    }
    for f in &files {
        for k in &f.kernels {
            if !used_kernels.contains(&(f.path.clone(), k.name.clone())) {
                problems.push(format!("{}: kernel {} is used by no Native pipeline", f.path.display(), k.name));
            }
        }
    }
    for p in &problems {
        println!("PROBLEM: {p}");
    }
    assert!(problems.is_empty(), "{} binding-convention problems", problems.len());
    assert!(checked > 0);
}

/// FNV-1a, 64 bits: a fingerprint of a twin's WGSL text.
fn fnv1a64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Drift check: each MSL file records the fingerprint of the exact WGSL twin text it mirrors
/// (`// twin fnv1a64 <hex>`). When a twin changes (e.g. the WGSL is tuned), this fails until the
/// change is ported to the MSL kernel and the recorded fingerprint updated: the MSL never silently
/// falls behind the algorithm the harness tests.
#[test]
fn every_msl_kernel_mirrors_the_current_twin() {
    let mut stale = Vec::new();
    for kernel in wgkernels::kernels::registry() {
        for (label, desc) in kernel.pipelines() {
            let ShaderSource::Msl { text, twin } = &desc.source else { continue };
            let mark = format!("twin fnv1a64 {:016x}", fnv1a64(&twin.source.text()));
            if !text.contains(&mark) {
                stale.push(format!("{label} ({}): its WGSL twin ({}) has fingerprint `{mark}`, not recorded in the MSL", desc.entry, twin.entry));
            }
        }
    }
    for s in &stale {
        println!("STALE: {s}");
    }
    assert!(stale.is_empty(), "{} MSL kernels do not mirror their current WGSL twin: port the WGSL change, then record the new fingerprint", stale.len());
}

/// The f32 values of `constant constexpr float NAME = v;` or `NAME[n] = {v, ...}` in MSL.
fn msl_float_consts(text: &str, name: &str) -> Option<Vec<f32>> {
    let src = mslparse::strip_comments(text);
    let at = src.find(&format!("constant constexpr float {name}"))?;
    let rest = &src[at..];
    let init = &rest[rest.find('=')? + 1..rest.find(';')?];
    let init = init.trim().trim_start_matches('{').trim_end_matches('}');
    init.split(',').map(str::trim).filter(|v| !v.is_empty()).map(|v| v.trim_end_matches('f').parse::<f32>().ok()).collect()
}

/// The TurboQuant MSL kernels carry the codebook as literals: they must be exactly the f32 values
/// src/kernels/turboquant/codebook.rs generates for the WGSL twins.
#[test]
fn turboquant_msl_codebook_matches_codebook_rs() {
    use wgkernels::kernels::turboquant::codebook;
    let centroids: Vec<f32> = (0..16u8).map(codebook::centroid).collect();
    let bounds: Vec<f32> = codebook::boundaries().iter().map(|&b| b as f32).collect();
    let files: Vec<_> = mslparse::metal_files().into_iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tq_"))).collect();
    assert!(files.len() >= 2, "msl/tq_*.metal missing: {files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let got = msl_float_consts(&text, "TQ_CENTROIDS").unwrap_or_else(|| panic!("{}: no TQ_CENTROIDS", path.display()));
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            centroids.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{}: TQ_CENTROIDS {got:?} != {centroids:?}",
            path.display()
        );
        if text.contains("TQ_B1") {
            for (i, b) in bounds.iter().enumerate() {
                let name = format!("TQ_B{}", i + 1);
                let got = msl_float_consts(&text, &name).unwrap_or_else(|| panic!("{}: no {name}", path.display()));
                assert_eq!(got.len(), 1, "{}: {name}", path.display());
                assert_eq!(got[0].to_bits(), b.to_bits(), "{}: {name} = {} != {b}", path.display(), got[0]);
            }
        }
        println!("ok {}: codebook matches", path.display());
    }
    // The parser must see a changed literal.
    let bent = "constant constexpr float TQ_B3 = 0.7995499f;";
    assert_ne!(msl_float_consts(bent, "TQ_B3").map(|v| v[0].to_bits()), Some(bounds[2].to_bits()));
}

/// The Rust side plans the Native decode (src/kernels/attention/mod.rs) for the sizes
/// msl/attn_decode.metal is compiled with (threadgroup size, team width bound, head cap, static
/// threadgroup arrays): the mirrored constants must be equal, by name.
#[test]
fn attn_decode_msl_sizes_match_the_rust_plan() {
    let path = mslparse::metal_files().into_iter().find(|p| p.ends_with("attn_decode.metal")).expect("msl/attn_decode.metal");
    let file = parse(path).unwrap_or_else(|e| panic!("{e}"));
    for (name, v) in wgkernels::kernels::attention::NATIVE_DECODE_MSL_CONSTS {
        let got = file.constants.get(name).copied();
        assert_eq!(got, Some(v as u64), "constant {name}: MSL {got:?}, Rust {v}");
        println!("ok {name} = {v}");
    }
    // Every head dim the Rust side has an entry point for is one of the file's kernels.
    for d in (2..=256).step_by(2) {
        for f16 in [false, true] {
            if let Some(entry) = wgkernels::kernels::attention::native_decode_entry(d, f16) {
                assert!(file.kernels.iter().any(|k| k.name == entry), "no kernel {entry}");
                let body = &file.text[file.text.find(&format!("kernel void {entry}(")).expect("entry")..];
                let call = &body[body.find("decode_teams<").expect("a decode_teams call")..];
                assert!(call.starts_with(&format!("decode_teams<{f16}, {d}>(")), "{entry} does not run decode_teams<{f16}, {d}>");
            }
        }
    }
}
