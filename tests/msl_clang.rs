//! Compile check of every MSL program (msl/*.metal and the GEMVs assembled from msl/gemv/ parts,
//! found through the kernel registry) without a Mac: clang, as C++17 `-fsyntax-only`, against the
//! minimal shim tests/metal_shim/metal_stdlib (see its header for what it does and does not catch).
//! Also: each kernel's static threadgroup memory is at most 32 KiB (Apple's limit), no kernel takes
//! threadgroup memory as a parameter (wgpu's passthrough sets no threadgroup memory lengths), and
//! the shim check has teeth (known-bad snippets fail).
//!
//! clang is required: if it is missing this test FAILS (CI installs it: apt-get install -y clang).
//! `WGKERNELS_CLANG` overrides the binary.

mod mslparse;

use std::path::{Path, PathBuf};
use std::process::Command;

const THREADGROUP_LIMIT: u64 = 32 << 10;

fn clang() -> String {
    let bin = std::env::var("WGKERNELS_CLANG").unwrap_or_else(|_| "clang".into());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => bin,
        _ => panic!(
            "`{bin}` not found: the MSL compile check needs clang (Debian: apt-get install -y clang; \
             CI installs it). Set WGKERNELS_CLANG to use another binary."
        ),
    }
}

fn shim_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/metal_shim"))
}

/// Compile `file` (syntax and types only); `Err` holds clang's diagnostics.
fn compile(clang: &str, file: &Path) -> Result<(), String> {
    let out = Command::new(clang)
        .args(["-x", "c++", "-std=c++17", "-fsyntax-only", "-target", "arm64-apple-macos13", "-nostdinc", "-nostdinc++"])
        .args(["-Werror", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unknown-attributes"])
        .arg("-I")
        .arg(shim_dir())
        .arg(file)
        .output()
        .map_err(|e| format!("running {clang}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn every_metal_file_compiles_against_the_shim() {
    let clang = clang();
    let dir = std::env::temp_dir().join(format!("wgk_msl_compile_{}", std::process::id()));
    let files = mslparse::programs();
    assert!(!files.is_empty(), "no MSL programs");
    let mut failed = Vec::new();
    for f in &files {
        match compile(&clang, &mslparse::on_disk(f, &dir)) {
            Ok(()) => println!("ok {}", f.path.display()),
            Err(e) => {
                println!("FAILED {}:\n{e}", f.path.display());
                failed.push(f.path.display().to_string());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failed.is_empty(), "clang rejected: {failed:?}");
}

#[test]
fn threadgroup_memory_within_apple_limit() {
    let clang = clang();
    let dir = std::env::temp_dir().join(format!("wgk_msl_tg_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for file in mslparse::programs() {
        let path = mslparse::on_disk(&file, &dir);
        let in_kernels: usize = file.kernels.iter().map(|k| k.threadgroup.len()).sum();
        assert_eq!(file.threadgroup_decls, in_kernels, "{}: threadgroup arrays outside kernel bodies", path.display());
        // Cross-check the sizes computed here with clang's sizeof, in the file's own context.
        let mut probe = format!("#include \"{}\"\n", path.display());
        for k in &file.kernels {
            assert!(
                k.params.iter().all(|p| p.space != mslparse::Space::Threadgroup),
                "{}: threadgroup memory as a kernel parameter needs a length wgpu's passthrough never sets",
                k.name
            );
            let bytes = k.threadgroup_bytes();
            println!("{} {}: {bytes} bytes of threadgroup memory", path.file_name().unwrap_or_default().to_string_lossy(), k.name);
            assert!(bytes <= THREADGROUP_LIMIT, "{}: {bytes} bytes of threadgroup memory > 32 KiB", k.name);
            for a in &k.threadgroup {
                probe += &format!("static_assert(sizeof({}[{}]) == {}, \"{}.{}\");\n", a.ty, a.count_expr, a.bytes, k.name, a.name);
            }
        }
        let probe_path = dir.join("probe.cpp");
        std::fs::write(&probe_path, probe).expect("write probe");
        if let Err(e) = compile(&clang, &probe_path) {
            panic!("{}: threadgroup size cross-check failed:\n{e}", path.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shim must reject what Metal rejects in these classes of error, or the check is hollow.
#[test]
fn the_shim_rejects_known_mistakes() {
    let clang = clang();
    let dir = std::env::temp_dir().join(format!("wgk_msl_bad_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let prelude = "#include <metal_stdlib>\nusing namespace metal;\n";
    let good = "kernel void k(device const float* a [[buffer(1)]], device float* b [[buffer(2)]], uint i [[thread_position_in_grid]]) { b[i] = simd_sum(a[i]); }\n";
    let bad = [
        ("undeclared name", "kernel void k(device float* b [[buffer(1)]], uint i [[thread_position_in_grid]]) { b[i] = simd_summ(b[i]); }\n"),
        ("not in the stdlib surface", "kernel void k(device float* b [[buffer(1)]], uint i [[thread_position_in_grid]]) { b[i] = simd_sum(float4(b[i])).x; }\n"),
        ("write through device const", "kernel void k(device const float* b [[buffer(1)]], uint i [[thread_position_in_grid]]) { b[i] = 1.0f; }\n"),
        (
            "constant passed as device",
            "static float f(device const float* x) { return x[0]; }\nkernel void k(constant float& c [[buffer(0)]], device float* b [[buffer(1)]]) { b[0] = f(&c); }\n",
        ),
        ("redefinition", "struct P { uint n; };\nstruct P { uint n; };\n"),
        ("type error", "kernel void k(device float* b [[buffer(1)]]) { uint4 v = b[0]; b[1] = v; }\n"),
    ];
    let path = dir.join("snippet.metal");
    std::fs::write(&path, format!("{prelude}{good}")).expect("write");
    if let Err(e) = compile(&clang, &path) {
        panic!("the known-good snippet failed:\n{e}");
    }
    for (what, body) in bad {
        std::fs::write(&path, format!("{prelude}{body}")).expect("write");
        assert!(compile(&clang, &path).is_err(), "the shim accepted a {what}:\n{body}");
        println!("rejected: {what}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
