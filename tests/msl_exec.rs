//! Executes every MSL kernel (msl/*.metal and the GEMVs assembled from msl/gemv/ parts) on the CPU against the harness's CPU references.
//!
//! Each .metal file is compiled as C++17 by clang against tests/metal_rt/ (an executing stand-in
//! for Apple's <metal_stdlib>: vector types, `half`, `as_type`, simd_* functions as rendezvous of
//! 32 lanes, real threadgroup barriers, simdgroup matrices; every invocation of a threadgroup is a
//! fiber, the grid is walked threadgroup by threadgroup; see the headers there). Twice: strict
//! (`-O1`, no fast math) and fast math (`-O2 -ffast-math`, plus `-mfma` where the host has FMA, so
//! contractions happen as Metal's compiler may do them). A kernel must pass both.
//!
//! The inputs are the harness's own: every test case of every kernel with a Native variant runs on
//! a twin-mode context under `Require(Native)` whose host executor ([`NativeTesting::executor`])
//! takes each Native dispatch (pipeline description, params, bound buffers, grid) and runs the
//! MSL entry point it names instead of the GPU; the case's own check (CPU reference, error bound,
//! guard regions) decides. Every entry point of every MSL program must have run in both modes.
//! A new program needs no edit here: the programs, their kernels and the pipelines that use
//! them all come from msl/ and the kernel registry (tests/mslparse: `programs`).
//!
//! Source handling, documented: the kernel text is compiled as written, except that each
//! `threadgroup T name[N];` declaration in a kernel body gets `static` in front (one copy shared
//! by the threadgroup's fibers) and a call after it that fills it with 0xff bytes at the start of
//! each threadgroup (reads of unwritten threadgroup memory see NaN / 0xffffffff). The line numbers
//! are unchanged. A C++ wrapper per entry point (generated from the signature) passes the buffers
//! and builtins. `[[buffer(i)]]` and builtin attributes are C++ attributes clang ignores.
//!
//! The same runtime executes the MSL that naga writes from the WGSL of every other kernel (what
//! wgpu's Metal backend runs on a Mac): the `naga_msl` module (tests/naga_msl).
//!
//! clang is required (CI installs it): missing clang FAILS this test. `WGKERNELS_CLANG` overrides
//! the binary (`clang`; C++ is compiled with `-x c++`). `WGKERNELS_MSL_EXEC_KEEP=1` keeps the
//! build directory.

mod common;
mod mslparse;
mod naga_msl;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wgkernels::native::NativeExecutor;
use wgkernels::pipeline::{PipelineDesc, ShaderSource};
use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, ContextOptions, Variant, VariantPolicy};

fn clang() -> String {
    let bin = std::env::var("WGKERNELS_CLANG").unwrap_or_else(|_| "clang".into());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => bin,
        _ => panic!("`{bin}` not found: executing the MSL needs clang (Debian: apt-get install -y clang; CI installs it). Set WGKERNELS_CLANG to use another binary."),
    }
}

fn rt_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/metal_rt"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Mode {
    Strict,
    Fast,
}

impl Mode {
    fn flags(self) -> Vec<&'static str> {
        match self {
            Mode::Strict => vec!["-O1", "-fno-fast-math", "-ffp-contract=off"],
            Mode::Fast => {
                let mut v = vec!["-O2", "-ffast-math"];
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("fma") {
                    v.push("-mfma");
                }
                v
            }
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Fast => "fast-math",
        }
    }
}

fn run_clang(clang: &str, args: &[&str], extra: &[&Path]) -> Result<(), String> {
    let out = Command::new(clang).args(args).args(extra).output().map_err(|e| format!("running {clang}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("clang {}:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// The builtin a kernel parameter reads, as an expression on `mrt::Builtins t`.
fn builtin_expr(attr: &str, ty: &str) -> Result<String, String> {
    let (field, vec3) = match attr {
        "threadgroup_position_in_grid" => ("tg", true),
        "threadgroups_per_grid" => ("ntg", true),
        "threads_per_threadgroup" => ("tptg", true),
        "thread_position_in_grid" => ("tpig", true),
        "thread_position_in_threadgroup" => ("tpitg", true),
        "thread_index_in_threadgroup" => ("li", false),
        "thread_index_in_simdgroup" => ("sl", false),
        "threads_per_simdgroup" => ("ss", false),
        "simdgroup_index_in_threadgroup" => ("sid", false),
        "simdgroups_per_threadgroup" => ("nsg", false),
        _ => return Err(format!("builtin [[{attr}]] is not implemented by tests/metal_rt")),
    };
    match (vec3, ty) {
        (true, "uint3") | (false, "uint") | (false, "ushort") => Ok(format!("t.{field}")),
        (true, "uint") => Ok(format!("t.{field}.x")),
        _ => Err(format!("builtin [[{attr}]] declared as {ty}")),
    }
}

/// The kernel text with its threadgroup arrays made shared (see the module docs), and the C++
/// wrappers + entry table for its kernels.
fn translation_unit(file: &mslparse::MslFile) -> Result<(String, String), String> {
    let mut text = String::new();
    let mut rewritten = 0;
    for line in file.text.lines() {
        let t = line.trim_start();
        if t.starts_with("threadgroup ") && t.trim_end().ends_with("];") && !t.contains('(') {
            let decl = t.trim_end();
            let name = decl[..decl.find('[').ok_or("threadgroup declaration")?].split_whitespace().last().ok_or("threadgroup declaration")?;
            let indent = &line[..line.len() - t.len()];
            text += &format!("{indent}static {decl} ::mrt::poison_threadgroup({name}, sizeof {name});\n");
            rewritten += 1;
        } else {
            text += line;
            text += "\n";
        }
    }
    if rewritten != file.threadgroup_decls {
        return Err(format!("{}: rewrote {rewritten} threadgroup declarations, the parser found {}", file.path.display(), file.threadgroup_decls));
    }
    let mut wrappers = String::from("#include <metal_stdlib>\n#include \"kernel.metal\"\nnamespace mrt {\n");
    let mut table = String::new();
    for (i, k) in file.kernels.iter().enumerate() {
        let mut args = Vec::new();
        for p in &k.params {
            args.push(match p.buffer_index() {
                Some(b) => format!("::mrt::Arg{{b[{b}]}}"),
                None => builtin_expr(&p.attr, &p.ty).map_err(|e| format!("{} `{}`: {e}", k.name, p.name))?,
            });
        }
        wrappers += &format!("static void call_{i}(void* const* b, const Builtins& t) {{ (void)b; (void)t; ::{}({}); }}\n", k.name, args.join(", "));
        table += &format!("    {{\"{}\", call_{i}}},\n", k.name);
    }
    wrappers += &format!("extern const Entry entries[] = {{\n{table}}};\nextern const int entry_count = {};\n}}\n", file.kernels.len());
    Ok((text, wrappers))
}

/// Compile `file` (or any MSL text) for `mode` into an executable in `dir`.
fn build(clang: &str, dir: &Path, file: &mslparse::MslFile, mode: Mode, rt_obj: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let (text, wrappers) = translation_unit(file)?;
    std::fs::write(dir.join("kernel.metal"), text).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("main.cpp"), wrappers).map_err(|e| e.to_string())?;
    let obj = dir.join("main.o");
    let exe = dir.join("run");
    let rt = rt_dir();
    let mut args = vec!["-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", "-c", "-Werror", "-Wall", "-Wno-unknown-attributes", "-Wno-unused-function", "-Wno-unused-variable"];
    args.extend(mode.flags());
    args.extend(["-I", rt.to_str().ok_or("path")?, "-I", dir.to_str().ok_or("path")?, "-o", obj.to_str().ok_or("path")?]);
    run_clang(clang, &args, &[&dir.join("main.cpp")]).map_err(|e| format!("{} ({}): {e}", file.path.display(), mode.name()))?;
    run_clang(clang, &["-o", exe.to_str().ok_or("path")?, "-lstdc++", "-lm"], &[&obj, rt_obj])?;
    Ok(exe)
}

/// The runtime's scheduler, compiled once (no fast math: it only moves bytes and schedules).
fn build_rt(clang: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("build dir");
    let obj = dir.join("metal_rt.o");
    run_clang(clang, &["-x", "c++", "-std=c++17", "-O1", "-Wall", "-Werror", "-c", "-o", obj.to_str().expect("path")], &[&rt_dir().join("metal_rt.cpp")])
        .unwrap_or_else(|e| panic!("{e}"));
    obj
}

/// Run one entry point of a built executable over `grid` threadgroups of `tg` threads.
fn execute(exe: &Path, entry: &str, grid: [u32; 3], tg: [u32; 3], buffers: &mut [Vec<u8>]) -> Result<(), String> {
    let dir = exe.parent().ok_or("exe dir")?;
    let tag = format!("{}_{:?}", std::process::id(), std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let (inp, outp) = (dir.join(format!("in_{tag}.bin")), dir.join(format!("out_{tag}.bin")));
    let mut bytes = Vec::new();
    bytes.extend((entry.len() as u32).to_le_bytes());
    bytes.extend(entry.as_bytes());
    for v in grid.iter().chain(&tg) {
        bytes.extend(v.to_le_bytes());
    }
    bytes.extend((buffers.len() as u32).to_le_bytes());
    for b in buffers.iter() {
        bytes.extend((b.len() as u64).to_le_bytes());
        bytes.extend(b);
    }
    std::fs::write(&inp, bytes).map_err(|e| e.to_string())?;
    let out = Command::new(exe).arg(&inp).arg(&outp).output().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&inp);
    if !out.status.success() {
        return Err(format!("{entry}: {} {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    let back = std::fs::read(&outp).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&outp);
    let mut at = 0;
    for b in buffers.iter_mut() {
        let n = b.len();
        b.copy_from_slice(back.get(at..at + n).ok_or("short output")?);
        at += n;
    }
    Ok(())
}

/// The host executor: runs each Native dispatch's MSL entry point with the executable built from
/// its file, and records which entry points ran.
struct CpuExecutor {
    /// (MSL text, mode) -> executable.
    exes: Vec<(String, Mode, PathBuf)>,
    mode: Mutex<Mode>,
    /// Entry points run since the last `take`.
    ran: Mutex<BTreeSet<String>>,
}

impl CpuExecutor {
    fn take(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.ran.lock().expect("lock"))
    }
}

impl NativeExecutor for CpuExecutor {
    fn execute(&self, desc: &PipelineDesc, params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> Result<(), String> {
        let ShaderSource::Msl { text, .. } = &desc.source else { return Err("not a Native pipeline".into()) };
        let mode = *self.mode.lock().map_err(|e| e.to_string())?;
        let (_, _, exe) = self
            .exes
            .iter()
            .find(|(t, m, _)| t == text && *m == mode)
            .ok_or_else(|| format!("{}: no executable for its MSL in this mode (not one of the MSL programs, or its build failed)", desc.entry))?;
        let mut all = Vec::with_capacity(buffers.len() + 1);
        all.push(params.to_vec());
        all.extend(buffers.iter().cloned());
        execute(exe, desc.entry, workgroups, desc.workgroup_size, &mut all)?;
        for (b, new) in buffers.iter_mut().zip(all.into_iter().skip(1)) {
            *b = new;
        }
        self.ran.lock().map_err(|e| e.to_string())?.insert(desc.entry.to_string());
        Ok(())
    }
}

/// Cases moving more than this many bytes are left to the GPU harness (the CPU runs every
/// invocation as a fiber: a long KV cache costs tens of seconds). Coverage of every entry point is
/// still enforced below.
const CPU_CASE_BYTES: u64 = 3 << 20;
/// Likewise for cases whose cost is their arithmetic (attention prefill): the simdgroup-matrix
/// kernels run each 8x8 product as a rendezvous of 32 fibers (a 1.1e8-flop prefill took 35 s, the
/// grid's 1.4e7-1.7e7-flop ones 6-16 s each per mode). Every prefill entry point, K/V type and
/// layout still runs here on the small cases below.
const CPU_CASE_FLOPS: f64 = 1e7;

/// Small cases for the Native entry points a kernel's registered grid does not reach (the grid is
/// sized for the GPU variants). Keyed by kernel name; derived from the kernel's own entry-point
/// table, so a new head dim needs no edit here.
fn supplementary_cases(kernel: &str) -> Vec<Box<dyn wgkernels::suite::Case>> {
    use wgkernels::kernels::attention::{cases::DecodeCase, native_decode_entry, prefill_native::native_entries, AttnShape, PrefillCase};
    use wgkernels::kernels::rope::PairLayout;
    let mut v: Vec<Box<dyn wgkernels::suite::Case>> = Vec::new();
    if kernel == "attn_prefill" {
        // Per entry point, K/V type and pair layout: odd token counts, offsets and KV lengths, GQA groups of 3 and 4 (rows
        // spanning two or three row blocks), several key tiles (the running max and the O
        // rescale), causal or not, K rotated by the kernel or coming rotated.
        let variants = native_entries().flat_map(|(d, _)| [(false, false), (false, true), (true, false), (true, true)].map(|(f, n)| (d, f, n)));
        for (i, (d, kv_f16, neox)) in variants.enumerate() {
            let layout = if neox { PairLayout::HalfSplit } else { PairLayout::Interleaved };
            let (tokens, offset) = (9 + 2 * (i % 4), 31 + 6 * (i % 5));
            // Two KV heads (the KV-head offsets), one at head_dim 256 (the same code, at half the cost).
            let kv_heads = if d >= 256 { 1 } else { 2 };
            let shape = AttnShape::new(kv_heads * if i % 2 == 0 { 3 } else { 4 }, kv_heads, d);
            let (causal, k_rotated) = (i % 3 != 2, i % 4 == 1);
            // Every third a sliding window narrower than a key tile, every other a score soft-cap.
            let (window, softcap) = ((i % 3 == 0).then_some(5 + i % 4), (i % 2 == 1).then_some(1.5));
            v.push(Box::new(PrefillCase { tokens, offset, kv_len: offset + tokens + 3 * (i % 2), shape, layout, kv_f16, causal, k_rotated, mode: i, window, softcap }));
        }
    }
    if kernel == "attn_decode" {
        for d in (2..=256).step_by(2) {
            for kv_f16 in [false, true] {
                if native_decode_entry(d, kv_f16).is_some() {
                    let layout = if d % 4 == 0 { PairLayout::HalfSplit } else { PairLayout::Interleaved };
                    // f16 caches with a sliding window and a score soft-cap.
                    let (window, softcap) = if kv_f16 { (Some(20 + d % 5), Some(1.5)) } else { (None, None) };
                    v.push(Box::new(DecodeCase { pos: 70 + d % 7, shape: AttnShape::new(6, 2, d), layout, kv_f16, mode: 1, window, softcap, attend_only: false, q8: d % 64 == 0 }));
                }
            }
        }
    }
    v
}

fn build_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wgk_msl_exec_{}_{name}", std::process::id()))
}

fn cleanup(dir: &Path) {
    if std::env::var("WGKERNELS_MSL_EXEC_KEEP").is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn every_msl_entry_point_executes_against_the_reference() {
    let started = Instant::now();
    let clang = clang();
    let root = build_dir("kernels");
    let rt_obj = build_rt(&clang, &root);
    let files: Vec<mslparse::MslFile> = mslparse::programs();
    assert!(!files.is_empty(), "no MSL programs");
    let all_entries: BTreeMap<String, String> =
        files.iter().flat_map(|f| f.kernels.iter().map(|k| (k.name.clone(), f.path.file_name().unwrap_or_default().to_string_lossy().into_owned()))).collect();
    let base = common::context();
    if base.caps().backend != wgkernels::wgpu::Backend::Vulkan || !base.caps().passthrough {
        // The cases need a device for their buffers and twin mode to select Native; CI (lavapipe) has both.
        panic!("this test needs a Vulkan adapter with PASSTHROUGH_SHADERS (lavapipe has it), found {} ({:?})", base.caps().adapter_name, base.caps().backend);
    }
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)");
    // (entry point, mode) -> cases passed / failed
    let mut table: BTreeMap<(String, Mode), (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    let t = Instant::now();
    let mut exes = Vec::new();
    for mode in [Mode::Strict, Mode::Fast] {
        for f in &files {
            let dir = root.join(format!("{}_{}", f.path.file_stem().unwrap_or_default().to_string_lossy(), mode.name()));
            match build(&clang, &dir, f, mode, &rt_obj) {
                Ok(exe) => exes.push((f.text.clone(), mode, exe)),
                Err(e) => failures.push(format!("BUILD {e}")),
            }
        }
    }
    println!("built {} executables in {:.1} s", exes.len(), t.elapsed().as_secs_f64());
    let exec = Arc::new(CpuExecutor { exes, mode: Mutex::new(Mode::Strict), ran: Mutex::new(BTreeSet::new()) });
    let opts = ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Native)).with_native_spirv_twins(true).with_native_executor(exec.clone());
    let ctx = base.with_options(opts);
    for mode in [Mode::Strict, Mode::Fast] {
        *exec.mode.lock().expect("lock") = mode;
        let mut rng = Rng::new(seed);
        let mut covered = BTreeSet::new();
        for kernel in kernels::registry() {
            let info = kernel.info();
            if !info.variants.contains(&Variant::Native) {
                continue;
            }
            let mut cases = kernel.test_cases();
            // Entry points the registered grid does not reach get small cases of their own.
            cases.extend(supplementary_cases(info.name));
            for case in cases {
                if case.bytes() > CPU_CASE_BYTES {
                    println!("{:<9} {:<16} {:<40} not run here: moves {} bytes (> {CPU_CASE_BYTES}); the GPU harness runs it", mode.name(), info.name, case.name(), case.bytes());
                    continue;
                }
                if let Some(flops) = case.flop_count().filter(|&f| f > CPU_CASE_FLOPS) {
                    println!("{:<9} {:<16} {:<40} not run here: {flops:.3e} flops (> {CPU_CASE_FLOPS:.0e}); the GPU harness runs it", mode.name(), info.name, case.name());
                    continue;
                }
                exec.take();
                let t = Instant::now();
                let result = run_case(&ctx, case.as_ref(), &mut rng);
                let ran: Vec<String> = exec.take().into_iter().collect();
                covered.extend(ran.iter().cloned());
                // Attribute the case to each entry point it ran (or to the kernel when none ran).
                let key = |e: &str| (e.to_string(), mode);
                let entries = if ran.is_empty() { vec![format!("({})", info.name)] } else { ran };
                let ok = matches!(&result, Ok(c) if c.passed());
                for e in &entries {
                    let slot = table.entry(key(e)).or_default();
                    if ok {
                        slot.0 += 1
                    } else {
                        slot.1 += 1
                    }
                }
                let summary = match &result {
                    Ok(c) => c.summary(),
                    Err(e) => e.to_string(),
                };
                println!("{:<9} {:<16} {:<40} {} {summary} ({:.2} s)", mode.name(), info.name, case.name(), if ok { "PASS" } else { "FAIL" }, t.elapsed().as_secs_f64());
                if !ok {
                    failures.push(format!("{} {} {}: {summary}", mode.name(), info.name, case.name()));
                }
            }
        }
        for (entry, file) in &all_entries {
            if !covered.contains(entry) {
                failures.push(format!("{}: entry point {entry} ({file}) never executed", mode.name()));
            }
        }
    }
    println!("\nentry point                      file                  strict      fast-math");
    for (entry, file) in &all_entries {
        let cell = |m| table.get(&(entry.clone(), m)).map(|(p, f)| if *f == 0 { format!("pass {p}") } else { format!("FAIL {f}/{}", p + f) }).unwrap_or("not run".into());
        println!("{entry:<32} {file:<21} {:<11} {}", cell(Mode::Strict), cell(Mode::Fast));
    }
    println!("(cases counted under every entry point they ran; wall {:.1} s)", started.elapsed().as_secs_f64());
    for f in &failures {
        println!("FAILED: {f}");
    }
    cleanup(&root);
    assert!(failures.is_empty(), "{} MSL execution failures (seed {seed})", failures.len());
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
fn bytes_of_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn params(n: u32, mode: u32) -> Vec<u8> {
    [n, mode, 0, 0].iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The runtime's own semantics (tests/metal_rt/selftest.metal), both build modes: simd functions
/// over a full and a partial simdgroup, shuffles from inactive lanes, threadgroup memory across a
/// barrier, builtins, vector constructors, half, 8x8 simdgroup matrices; and the mistakes it must
/// refuse (divergent simd operations, a barrier that some threads exited before, reading past a
/// buffer).
#[test]
fn the_runtime_implements_metal_semantics_and_refuses_mistakes() {
    let clang = clang();
    let root = build_dir("selftest");
    let rt_obj = build_rt(&clang, &root);
    let file = mslparse::parse(rt_dir().join("selftest.metal")).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(Rng::fresh_seed());
    for mode in [Mode::Strict, Mode::Fast] {
        let exe = build(&clang, &root.join(mode.name()), &file, mode, &rt_obj).unwrap_or_else(|e| panic!("{e}"));
        let close = |a: f32, b: f32, what: &str| assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{}: {what}: {a} vs {b}", mode.name());

        // rt_simd: 2 threadgroups of 40 (a full simdgroup of 32 and a partial one of 8).
        let x: Vec<f32> = rng.uniform_vec(80, -4.0, 4.0);
        let mut bufs = vec![params(80, 0), bytes_of_f32(&x), vec![0u8; 80 * 12 * 4]];
        execute(&exe, "rt_simd", [2, 1, 1], [40, 1, 1], &mut bufs).unwrap_or_else(|e| panic!("{e}"));
        let out = u32s(&bufs[2]);
        for g in 0..80usize {
            let (t, li) = (g / 40, g % 40);
            let (sid, sl) = (li / 32, li % 32);
            let lanes: Vec<usize> = (0..40).filter(|&l| l / 32 == sid).collect();
            let width = lanes.len();
            let v = |l: usize| x[t * 40 + l];
            let o = &out[g * 12..g * 12 + 12];
            let f = |i: usize| f32::from_bits(o[i]);
            close(f(0), lanes.iter().map(|&l| v(l)).sum(), "simd_sum");
            assert_eq!(o[1], lanes.iter().map(|&l| l as u32).sum::<u32>(), "simd_sum(uint)");
            assert_eq!(o[2], lanes.iter().filter(|&&l| l < li).map(|&l| l as u32 + 1).sum::<u32>(), "simd_prefix_exclusive_sum");
            assert_eq!(o[3], v(sid * 32 + (sl ^ 5)).to_bits(), "simd_shuffle_xor");
            let down = if sl + 3 >= 32 {
                v(li).to_bits()
            } else if sl + 3 < width {
                v(sid * 32 + sl + 3).to_bits()
            } else {
                0xffff_ffff
            };
            assert_eq!(o[4], down, "simd_shuffle_down lane {li}");
            assert_eq!(o[5], v(sid * 32 + 2).to_bits(), "simd_broadcast");
            assert_eq!(f(6), lanes.iter().map(|&l| v(l)).fold(f32::INFINITY, f32::min), "simd_min");
            assert_eq!(f(7), lanes.iter().map(|&l| v(l)).fold(f32::NEG_INFINITY, f32::max), "simd_max");
            assert_eq!(f(8), 2.0 * v((li + 1) % 40), "threadgroup memory across the barrier");
            assert_eq!(o[9], ((sid as u32) << 16) | (2 << 8) | 32, "builtins");
            close(f(10), v(li) + 7.0, "vector constructors, dot, half");
            assert_eq!(f(11), width as f32, "simd_sum(float4)");
        }

        // rt_matrix: (16x8)(8x16) + 1 and its transpose from transposed loads.
        let a = rng.uniform_vec(128, -1.0, 1.0);
        let b = rng.uniform_vec(128, -1.0, 1.0);
        let mut bufs = vec![params(0, 0), bytes_of_f32(&a), bytes_of_f32(&b), bytes_of_f32(&[f32::NAN; 512])];
        execute(&exe, "rt_matrix", [1, 1, 1], [128, 1, 1], &mut bufs).unwrap_or_else(|e| panic!("{e}"));
        let c = f32s(&bufs[3]);
        for i in 0..16 {
            for j in 0..16 {
                let ab: f32 = (0..8).map(|k| a[i * 8 + k] * b[k * 16 + j]).sum();
                close(c[i * 16 + j], ab + 1.0, "simdgroup_multiply_accumulate");
                close(c[256 + j * 16 + i], ab, "transposed simdgroup_load / simdgroup_store");
            }
        }

        // rt_naga: the constructs of naga's MSL, exact results.
        let mut bufs = vec![params(0, 0), bytes_of_f32(&[3.0]), vec![0u8; 14 * 4]];
        execute(&exe, "rt_naga", [1, 1, 1], [1, 1, 1], &mut bufs).unwrap_or_else(|e| panic!("{e}"));
        let want = [
            4294967296.0f32.to_bits(),
            2 + 70 + 1000 * 100,
            half::f16::from_f32(1.0 / 3.0).to_f32().to_bits(),
            f32::INFINITY.to_bits(),
            1 | (20 << 8) | (3 << 16) | (40 << 24),
            1 | 4 | 8,
            (-126i32) as u32,
            0.75f32.to_bits(),
            4,
            0.125f32.to_bits(),
            5 | (7 << 8) | (7 << 16) | (6 << 24),
            12 | (15 << 8) | (6 << 16),
            f32::INFINITY.to_bits(),
            1.5f32.to_bits(),
        ];
        assert_eq!(u32s(&bufs[2]), want, "{}: rt_naga", mode.name());

        // Mistakes: each must fail the dispatch, with the reason.
        for (m, want) in [(1, "divergent"), (2, "exited"), (3, "signal")] {
            let mut bufs = vec![params(32, m), bytes_of_f32(&[1.0; 32]), vec![0u8; 128]];
            match execute(&exe, "rt_bad", [1, 1, 1], [32, 1, 1], &mut bufs) {
                Ok(()) => panic!("{}: rt_bad mode {m} ran", mode.name()),
                Err(e) => {
                    println!("{} refused mode {m}: {e}", mode.name());
                    assert!(e.contains(want), "{e}");
                }
            }
        }
    }
    cleanup(&root);
}

/// A context whose Native kernels run the MSL program `file` (msl/`file`, or `<kernel>.metal` for a
/// program assembled from parts) with `from` replaced by `to` (once), compiled
/// strict and executed on the CPU in place of the real file (built under `root`/`tag`), and its
/// executor (which records what ran).
#[allow(clippy::too_many_arguments)]
fn mutant_context(base: &wgkernels::Context, clang: &str, root: &Path, rt_obj: &Path, file: &str, tag: &str, from: &str, to: &str) -> (wgkernels::Context, Arc<CpuExecutor>) {
    let program = mslparse::programs().into_iter().find(|p| p.path.ends_with(file)).unwrap_or_else(|| panic!("no MSL program {file}"));
    let original = program.text;
    assert!(original.contains(from), "mutation source `{from}` not in {file}");
    let mutant_path = root.join(tag).join(file);
    std::fs::create_dir_all(mutant_path.parent().expect("dir")).expect("mkdir");
    std::fs::write(&mutant_path, original.replacen(from, to, 1)).expect("write");
    let mutant = mslparse::parse(mutant_path).unwrap_or_else(|e| panic!("{e}"));
    let exe = build(clang, &root.join(format!("build_{tag}")), &mutant, Mode::Strict, rt_obj).unwrap_or_else(|e| panic!("{e}"));
    let exec = Arc::new(CpuExecutor { exes: vec![(original, Mode::Strict, exe)], mode: Mutex::new(Mode::Strict), ran: Mutex::new(BTreeSet::new()) });
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Native)).with_native_spirv_twins(true).with_native_executor(exec.clone()));
    (ctx, exec)
}

/// Each mutation (MSL file, kernel, text, replacement) built strict and executed in place of the
/// real file must fail the harness's own check of `kernel` on at least one of its test cases that
/// `keep` selects, and must have run.
fn mutants_fail(tag: &str, mutations: &[(&str, &str, &str, &str)], keep: fn(&str) -> bool) {
    let clang = clang();
    let root = build_dir(tag);
    let rt_obj = build_rt(&clang, &root);
    let base = common::context();
    let registry = kernels::registry();
    for (i, (file, name, from, to)) in mutations.iter().enumerate() {
        let kernel = registry.iter().find(|k| k.info().name == *name).unwrap_or_else(|| panic!("{name}"));
        let (ctx, exec) = mutant_context(&base, &clang, &root, &rt_obj, file, &format!("m{i}"), from, to);
        let mut rng = Rng::new(Rng::fresh_seed());
        let mut failed = 0;
        for case in kernel.test_cases().into_iter().filter(|c| keep(&c.name())) {
            let c = run_case(&ctx, case.as_ref(), &mut rng).unwrap_or_else(|e| panic!("{e}"));
            println!("mutant {i} {name} {}: {}", case.name(), c.summary());
            failed += usize::from(!c.passed());
        }
        assert!(exec.take().iter().any(|e| e.starts_with(name)), "mutant {i} never ran");
        assert!(failed > 0, "mutant {i} ({to}) passed every case");
    }
    cleanup(&root);
}

/// The same for the simdgroup-matrix GEMM (msl/mm_gemm_quant.metal): two subtle mutations, one in
/// a format's dequantiser (the high scale bits of Q4_K sub-blocks 4..7 shifted one place short)
/// and one in the split-K output index (every split writes the first partial tile), each fail the
/// harness's own check of mm_gemm_q4_k.
#[test]
fn a_wrong_msl_gemm_fails_the_check() {
    let mutations = [
        ("mm_gemm_quant.metal", "mm_gemm_q4_k", "(ubyte(hd.w, i) & 15u) | ((ubyte(hd.y, i) >> 6) << 4)", "(ubyte(hd.w, i) & 15u) | ((ubyte(hd.y, i) >> 6) << 3)"),
        ("mm_gemm_quant.metal", "mm_gemm_q4_k", "y[(split * p.m + row) * p.ldy + p.y_off + col]", "y[row * p.ldy + p.y_off + col]"),
    ];
    mutants_fail("mutant_gemm", &mutations, |c| c.contains("m=2 n=33") || c.contains("m=33 n=31"));
}

/// The same for the simdgroup-matrix prefill (msl/attn_prefill.metal): three subtle mutations,
/// the O rescale skipped when a row's max grows, the causal limit one key too far, and the second
/// lane pair of a row left out of its max, each fail the harness's own check of a small causal
/// grouped-query prefill over several key tiles.
#[test]
fn a_wrong_msl_prefill_fails_the_check() {
    use wgkernels::kernels::attention::{AttnShape, PrefillCase};
    use wgkernels::kernels::rope::PairLayout;
    let clang = clang();
    let root = build_dir("mutant_prefill");
    let rt_obj = build_rt(&clang, &root);
    let mutations = [
        ("        if (rescale) {", "        if (rescale && false) {"),
        ("lim = min(kend, p.offset + t_r + 1u);", "lim = min(kend, p.offset + t_r + 2u);"),
        ("mt = max(mt, simd_shuffle_xor(mt, 2));", "mt = max(mt, simd_shuffle_xor(mt, 1));"),
    ];
    let base = common::context();
    let case = PrefillCase {
        tokens: 13,
        offset: 70,
        kv_len: 83,
        shape: AttnShape::new(6, 2, 64),
        layout: PairLayout::Interleaved,
        kv_f16: false,
        causal: true,
        k_rotated: false,
        mode: 0,
        window: None,
        softcap: None,
    };
    for (i, (from, to)) in mutations.iter().enumerate() {
        let (ctx, exec) = mutant_context(&base, &clang, &root, &rt_obj, "attn_prefill.metal", &format!("m{i}"), from, to);
        let mut rng = Rng::new(Rng::fresh_seed());
        let c = run_case(&ctx, &case, &mut rng).unwrap_or_else(|e| panic!("{e}"));
        println!("mutant {i} {}: {}", wgkernels::suite::Case::name(&case), c.summary());
        assert!(exec.take().contains("attn_prefill_d64"), "mutant {i} never ran");
        assert!(!c.passed(), "mutant {i} ({to}) passed");
    }
    cleanup(&root);
}

/// The same for the weight-matrix family's Native f32-activation GEMVs: subtle mutations - the
/// high scale bits of Q4_K sub-blocks 4..7 shifted one place short, the mins of sub-blocks 4..7
/// paired with the x sums of 0..3, the chunk's output offset dropped, INT4's scale read from the
/// next block - and one wrong decode per format on the shared driver (Q5_K's fifth bit worth 8,
/// BF16's halves of a word swapped, F32's weights of an item swapped, Q5_0's codes offset by 15,
/// Q4_1's head read from the next block, Q5_1's fifth bit of a weight moved, Q4_0's odd blocks
/// scaled by the even block's d, Q3_K's scale high bits shifted, Q2_K's mins of a block's second
/// half read from its first, INT8's scale read from the next block) - each fail the harness's own check of the format's GEMV (odd row
/// counts, both entry points, a 3-chunk matrix).
#[test]
fn a_wrong_msl_format_gemv_fails_the_check() {
    let mutations = [
        ("mm_gemv_q4_k.metal", "mm_gemv_q4_k", "| ((w.hd.y >> 2) & 0x30303030u)", "| ((w.hd.y >> 3) & 0x30303030u)"),
        ("mm_gemv_q4_k.metal", "mm_gemv_q4_k", "field(m47, 8u * j, 63u) * x.sx[4u + j]", "field(m47, 8u * j, 63u) * x.sx[j]"),
        ("mm_gemv_q4_k.metal", "mm_gemv_q4_k", "const uint o = p.y_off + r0;", "const uint o = r0;"),
        ("mm_gemv_int4.metal", "mm_gemv_int4", "r.dw = wq[base + p.k4 / 8u + item / 4u][item % 4u];", "r.dw = wq[base + p.k4 / 8u + item / 4u][(item + 1u) % 4u];"),
        ("mm_gemv_q5_k.metal", "mm_gemv_q5_k", "(((hw >> j) & 0x01010101u) << 4)", "(((hw >> j) & 0x01010101u) << 3)"),
        ("mm_gemv_bf16.metal", "mm_gemv_bf16", "as_type<float>(b << 16), as_type<float>(b & 0xffff0000u)", "as_type<float>(b & 0xffff0000u), as_type<float>(b << 16)"),
        ("mm_gemv_f32.metal", "mm_gemv_f32", "r.w = as_type<float4>(wq[base + item]);", "r.w = as_type<float4>(wq[base + item].yxzw);"),
        ("mm_gemv_q5_0.metal", "mm_gemv_q5_0", "- float4(16.0f)", "- float4(15.0f)"),
        ("mm_gemv_q4_1.metal", "mm_gemv_q4_1", "[item % 4u]", "[(item + 1u) % 4u]"),
        ("mm_gemv_q5_1.metal", "mm_gemv_q5_1", "((t & 4u) << 14)", "((t & 4u) << 13)"),
        ("mm_gemv_q4_0.metal", "mm_gemv_q4_0", "r.hi = item & 1u;", "r.hi = 0u;"),
        ("mm_gemv_q3_k.metal", "mm_gemv_q3_k", "(hd.z >> (2u * g)) & 0x03030303u", "(hd.z >> (2u * g + 1u)) & 0x03030303u"),
        ("mm_gemv_q2_k.metal", "mm_gemv_q2_k", "fmt_pick(w.sc.z, w.sc.w, w.o, 4u)", "fmt_pick(w.sc.x, w.sc.y, w.o, 4u)"),
        ("mm_gemv_int8.metal", "mm_gemv_int8", "r.d = wq[base + p.k4 / 4u + b / 4u][b % 4u];", "r.d = wq[base + p.k4 / 4u + b / 4u][(b + 1u) % 4u];"),
    ];
    mutants_fail("mutant_mm_gemv", &mutations, |c| c.starts_with("n=33 ") || c.contains("chunks=3") || c.starts_with("n=2049 "));
}

/// The same for the int8-activation GEMVs (msl/mm_gemv_q8.metal), one mutation per format and
/// epilogue: Q4_K's mins of sub-blocks 4..7 paired with the code sums of 0..3, Q6_K's second-half
/// scale read as the first's, Q8_0's second-half codes read from the first half, Q4_0's high
/// nibbles of blocks 4..7 offset by 7 instead of 8, the residual add turned into a store, and the
/// SwiGLU's sigmoid of -g: each fails the harness's own check of the format's int8 GEMV (odd row
/// counts, both row counts per threadgroup, every epilogue). Likewise the F16 GEMV
/// (msl/gemv/fmt_f16.metal) with the words of an item's second half swapped.
#[test]
fn a_wrong_msl_q8_gemv_fails_the_check() {
    let mutations = [
        ("mm_gemv_q8.metal", "mm_gemv_q8_q4_k", "dot(bytes4(m47, 0u, 63u, 0.0f), x.s47)", "dot(bytes4(m47, 0u, 63u, 0.0f), x.s03)"),
        ("mm_gemv_q8.metal", "mm_gemv_q8_q6_k", "i8(sw, sh + 8u) * db", "i8(sw, sh) * db"),
        ("mm_gemv_q8.metal", "mm_gemv_q8_q8_0", "r.b[j] = wq[v + 2u * j + 1u][u];", "r.b[j] = wq[v + 2u * j][u];"),
        ("mm_gemv_q8.metal", "mm_gemv_q8_q4_0", "bytes4(w.w[4u + j], 4u, 15u, 8.0f)", "bytes4(w.w[4u + j], 4u, 15u, 7.0f)"),
        ("mm_gemv_q8.metal", "mm_gemv_q8_q4_k", "y[o + r] += tot[r];", "y[o + r] = tot[r];"),
        ("mm_gemv_q8.metal", "mm_gemv_q8_q6_k", "0.044715f * g * g * g) : -g;", "0.044715f * g * g * g) : g;"),
        ("mm_gemv_f16.metal", "mm_gemv_f16", "dot(fmt_halves(w.w.z, w.w.w), x.b)", "dot(fmt_halves(w.w.w, w.w.z), x.b)"),
    ];
    mutants_fail("mutant_q8_gemv", &mutations, |c| c.starts_with("n=33 ") || c.contains(" acc") || c.contains(" swiglu"));
}
