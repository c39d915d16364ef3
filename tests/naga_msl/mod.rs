//! The MSL that naga writes from our WGSL inside wgpu's Metal backend, executed on the CPU runtime
//! (tests/metal_rt) against the harness's own cases: what a Mac runs for every kernel that is not
//! Native.
//!
//! * **Which MSL.** For every pipeline of the test kit's list ([`kernels::all_pipelines`]) that can
//!   run on Metal, [`wgkernels::shaders::metal_msl`] writes the MSL with the naga options of
//!   wgpu-hal 30's Metal backend (docs/METAL_CPU_EXECUTION.md lists them and their sources). Native
//!   pipelines run the hand-written MSL on a Mac (the test above executes it); the Matrix variant's
//!   16x16 cooperative matrices become `simdgroup_half16x16`, which Metal lacks (its simdgroup
//!   matrices are 8x8): not Metal-eligible; nor is a pipeline whose workgroup memory
//!   ([`wgkernels::shaders::workgroup_bytes`]) exceeds Apple's
//!   ([`wgkernels::shaders::APPLE_THREADGROUP_MEMORY`]): a Mac never plans it (printed with its
//!   size). The MSL language version wgpu picks depends on the OS
//!   (2.2 on macOS 10.15 to 4.0 on macOS 26 for an Apple7+/Mac2 GPU); every eligible pipeline's MSL
//!   is checked to be the same at both ends (but its first comment line), and 4.0's is executed.
//! * **Building.** Identical modules are built once; each module goes into its own C++ namespace,
//!   many modules per translation unit (compiled in parallel), strict and
//!   fast-math as the test above. A wrapper per module passes the buffers (`[[buffer(i)]]` =
//!   binding i, the sizes buffer after them, filled as wgpu fills it), the builtins and the
//!   threadgroup variables (one static copy per module, filled with 0xff bytes at the start of
//!   each threadgroup: wgpu asks for no zero-initialisation, so nothing may read them unwritten).
//! * **Source rewrites** (documented, mechanical): `static_cast<T>(` becomes `::mrt::cast<T>(`
//!   (MSL converts vectors component-wise; C++ refuses `static_cast` between vector types), and a
//!   floating-point literal without suffix gets `f` (naga writes f32 literals bare, which Metal,
//!   having no double, reads as float; C++ would compute in double), `1.5h` becomes
//!   `half(1.5f)`. Nothing else is touched.
//! * **Running.** Every kernel x variant (Portable, Subgroup) runs under `Require(variant)` on a
//!   context whose dispatch executor ([`ContextOptions::with_dispatch_executor`]) takes every
//!   dispatch, writes the MSL of its pipeline as wgpu would, finds its module and executes it; the
//!   case's own check (f64 CPU reference, error bound, guard regions) decides. The context plans
//!   as a Mac: the subgroup sizes wgpu's Metal backend reports (4..64; the runtime's simdgroups
//!   have 32 lanes) and Apple's threadgroup memory. Cases over `CASE_BYTES` or `CASE_FLOPS` are
//!   left to the GPU harness, at most `MAX_CASES` per kernel x variant run, plus the families'
//!   plan cases ([`Kernel::plan_cases`]); every kernel x variant must run at least one case in
//!   both modes, and a case that dispatches a pipeline outside the test kit's list fails (the
//!   list and the plan cases come from one table per family).
//! * **Bounds-checked.** The grid's chosen cases run once more, strict only, on contexts with
//!   `ContextOptions::bounds_checks`: each dispatch executes its pipeline's checked module
//!   (`Restrict` indexing, loop bounding, division checks), built from the pipelines the
//!   discovery saw those cases dispatch; every such module must run and every case pass. The
//!   checked MSL of the whole list is compiled (syntax) as well.

use super::{build_dir, build_rt, builtin_expr, cleanup, execute, rt_dir, run_clang, Mode};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;
use wgkernels::native::NativeExecutor;
use wgkernels::pipeline::PipelineDesc;
use wgkernels::shaders::{metal_msl, APPLE_SUBGROUP_SIZES, APPLE_THREADGROUP_MEMORY};
use wgkernels::suite::{run_case, Case, Check, Kernel, PlanAdapter, Rng};
use wgkernels::{kernels, Context, ContextOptions, Tuning, Variant, VariantPolicy};

/// The oldest and newest MSL versions wgpu 30's Metal backend picks on an Apple7+/Mac2 GPU (by OS
/// version: 2.2 on macOS 10.15, the first with `MTLGPUFamily::Mac2`, to 4.0 on macOS 26); naga's
/// output is checked to be the same at both ends.
const LANGS: [(u8, u8); 2] = [(2, 2), (4, 0)];
/// The version executed (macOS 26).
const LANG: (u8, u8) = (4, 0);
/// Cases moving more bytes than this, or doing more flops, are left to the GPU harness.
const CASE_BYTES: u64 = 1 << 20;
const CASE_FLOPS: f64 = 4e6;
/// Cases per kernel x variant (the first ones of the kernel's list that fit the two limits).
const MAX_CASES: usize = 3;

/// The MSL without its first line (`// language: metalX.Y`).
fn body(msl: &str) -> &str {
    msl.split_once('\n').map_or(msl, |(_, rest)| rest)
}

/// One distinct naga module.
pub struct Module {
    /// naga's MSL (version `LANG`).
    msl: String,
    /// Labels of the pipelines that translate to it.
    labels: Vec<String>,
}

/// What happens to one pipeline on Metal: its naga module, or why a Mac does not run it through
/// naga.
type Placement = Result<usize, String>;

/// The pipelines met so far (the test kit's list, then those the cases use), by module.
#[derive(Default)]
pub struct Catalogue {
    pub modules: Vec<Module>,
    by_body: HashMap<String, usize>,
    /// (label, module) of every Metal-eligible pipeline of the test kit's list.
    pub eligible: Vec<(String, usize)>,
    /// (label, why not) of the pipelines a Mac does not run through naga.
    pub not_eligible: Vec<(String, String)>,
    /// Modules of pipelines the cases use that the test kit's list lacks, with their labels.
    pub outside: BTreeMap<usize, String>,
}

/// Pipelines only the Matrix variant dispatches (their labels' key names), which is not
/// Metal-eligible: the test kit's check pipelines of the Matrix GEMM's staging and weight runs,
/// which run the staging functions and run wrapper only the Matrix GEMM composes
/// (src/kernels/matmul/matrix.rs), the Matrix prefill's staging pass
/// (src/kernels/attention/prefill_matrix.rs) and the two-pass Matrix GEMM's first passes
/// (src/kernels/matmul/wide.rs).
const MATRIX_ONLY: [(&str, &str); 5] = [
    ("StageCheck", "Matrix GEMM check: tests the staging code only the Matrix GEMM composes, and Matrix does not run on Metal"),
    ("RunCheck", "Matrix GEMM check: tests the weight-run wrapper only the Matrix GEMM composes, and Matrix does not run on Metal"),
    ("PrefillStage", "Matrix prefill's staging pass: only the Matrix prefill dispatches it, and Matrix does not run on Metal"),
    ("Widen", "two-pass Matrix GEMM's first pass over the weights: only that GEMM dispatches it, and Matrix does not run on Metal"),
    ("WidenX", "two-pass Matrix GEMM's first pass over x: only that GEMM dispatches it, and Matrix does not run on Metal"),
];

/// naga's MSL of one WGSL pipeline (labelled `label`) for each version of `langs` (`checked`: as
/// with `ContextOptions::bounds_checks`), checked to be the same for all but the version comment;
/// the `LANG` text, or why a Mac does not run the pipeline through naga (`Ok(Err(why))`), or
/// errors.
fn translate(label: &str, desc: &PipelineDesc, checked: bool, langs: &[(u8, u8)]) -> Result<Result<String, String>, String> {
    let key = label.split(|c: char| !c.is_alphanumeric()).next();
    if let Some((_, why)) = MATRIX_ONLY.iter().find(|(k, _)| key == Some(*k)) {
        return Ok(Err(why.to_string()));
    }
    if desc.twin().is_some() {
        return Ok(Err("Native: a Mac runs the hand-written MSL (executed by every_msl_entry_point_executes_against_the_reference)".into()));
    }
    let msl = metal_msl(desc, checked, LANG).map_err(|e| format!("MSL {}.{}: {e}", LANG.0, LANG.1))?;
    let main = msl.text;
    // Cooperative matrices (the Matrix variant): naga writes them as simdgroup matrices of their
    // own size; Metal has only 8x8 ones.
    let sizes: BTreeSet<&str> = main
        .match_indices("simdgroup_")
        .filter_map(|(at, _)| main[at..].split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next())
        .filter(|t| t.ends_with("x16") || t.ends_with("x32"))
        .collect();
    if !sizes.is_empty() {
        return Ok(Err(format!("Matrix: naga writes its cooperative matrices as {}, which Metal lacks (its simdgroup matrices are 8x8; no Apple GPU reports the 16x16x16 configuration the variant needs)", sizes.into_iter().collect::<Vec<_>>().join(" / "))));
    }
    // Workgroup memory over Apple's: a Mac never plans it (and wgpu 30 would not refuse it, but
    // Metal's pipeline creation would).
    if msl.workgroup_bytes > u64::from(APPLE_THREADGROUP_MEMORY) {
        return Ok(Err(format!(
            "{} bytes of workgroup memory, above Apple's {APPLE_THREADGROUP_MEMORY} (max_compute_workgroup_storage_size), so a Mac never builds it",
            msl.workgroup_bytes
        )));
    }
    for &lang in langs.iter().filter(|&&l| l != LANG) {
        let other = metal_msl(desc, checked, lang).map_err(|e| format!("MSL {}.{}: {e}", lang.0, lang.1))?.text;
        if body(&other) != body(&main) {
            return Err(format!("naga's MSL {}.{} differs from {}.{} (only the {}.{} text is executed)", lang.0, lang.1, LANG.0, LANG.1, LANG.0, LANG.1));
        }
    }
    Ok(Ok(main))
}

impl Catalogue {
    /// Place one translated pipeline.
    fn place(&mut self, label: String, msl: Result<String, String>, listed: bool) -> Placement {
        let msl = match msl {
            Ok(m) => m,
            Err(why) => {
                self.not_eligible.push((label, why.clone()));
                return Err(why);
            }
        };
        let next = self.modules.len();
        let i = *self.by_body.entry(body(&msl).to_string()).or_insert(next);
        if i == next {
            self.modules.push(Module { msl, labels: Vec::new() });
        }
        self.modules[i].labels.push(label.clone());
        if listed {
            self.eligible.push((label, i));
        } else {
            self.outside.entry(i).or_insert(label);
        }
        Ok(i)
    }

    /// Every pipeline of the test kit's list, translated for every version of `LANGS` (on all
    /// cores).
    pub fn of_pipeline_list(checked: bool) -> Result<Catalogue, Vec<String>> {
        let list = kernels::all_pipelines();
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
        let per = list.len().div_ceil(workers).max(1);
        let translated: Vec<Result<Result<String, String>, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = list.chunks(per).map(|chunk| s.spawn(move || chunk.iter().map(|(l, d)| translate(l, d, checked, &LANGS)).collect::<Vec<_>>())).collect();
            handles.into_iter().flat_map(|h| h.join().expect("translation thread")).collect()
        });
        let mut c = Catalogue::default();
        let mut errors = Vec::new();
        for ((label, _), t) in list.into_iter().zip(translated) {
            match t {
                Ok(msl) => {
                    let _ = c.place(label, msl, true);
                }
                Err(e) => errors.push(format!("{label}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(errors)
        }
    }

    /// The module of `desc` (translated as wgpu would on macOS 26), added if the test kit's list
    /// lacks it.
    fn module_of(&mut self, desc: &PipelineDesc, checked: bool) -> Result<usize, String> {
        let msl = metal_msl(desc, checked, LANG)?;
        if let Some(&i) = self.by_body.get(body(&msl.text)) {
            return Ok(i);
        }
        let t = translate(desc.entry, desc, checked, &[LANG])?;
        self.place(format!("{} (used by a case; not in the test kit's pipeline list)", desc.entry), t, false)
    }

    /// Give the modules that the test kit's list lacks their pipelines' labels (from the
    /// contexts' built pipelines).
    fn name_outside(&mut self, built: Vec<(String, PipelineDesc)>) {
        for (label, desc) in built {
            let Ok(i) = self.module_of(&desc, false) else { continue };
            if let Some(name) = self.outside.get_mut(&i) {
                let label = format!("{label} (not in the test kit's pipeline list)");
                for l in self.modules[i].labels.iter_mut().filter(|l| *l == name) {
                    *l = label.clone();
                }
                *name = label;
            }
        }
    }
}

/// The source rewrites of the module docs, and the naga redeclarations dropped (see
/// `KNOWN_REDECLARATIONS`).
fn rewrite(msl: &str) -> (String, usize) {
    let src = msl.replace("static_cast<", "::mrt::cast<");
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len() + src.len() / 8);
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !ident(b[i - 1])) {
            let start = i;
            while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                i += 1;
            }
            let tok = &src[start..i];
            let is_float = tok.contains('.') && !tok.starts_with("0x");
            if is_float && tok.ends_with('h') {
                out += &format!("half({}f)", &tok[..tok.len() - 1]);
            } else if is_float && tok.bytes().last().is_some_and(|c| c.is_ascii_digit()) {
                out += tok;
                out.push('f');
            } else {
                out += tok;
            }
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    // naga 30 declares `packed_char4 reinterpreted_packed_char4_eN = as_type<packed_char4>(x);`
    // once per dot4I8Packed call, named after the argument expression: two calls on one argument
    // in one function declare it twice, which C++ (and so Metal) rejects. The repeated line (same
    // name, same immutable value) is dropped here so the module still executes; which pipelines
    // need it is asserted by the test.
    let mut dropped = 0;
    let mut seen = BTreeSet::new();
    let mut text = String::with_capacity(out.len());
    for line in out.lines() {
        if line.starts_with('}') {
            seen.clear();
        }
        let t = line.trim_start();
        if (t.starts_with("packed_char4 reinterpreted_") || t.starts_with("packed_uchar4 reinterpreted_")) && !seen.insert(t.to_string()) {
            dropped += 1;
            continue;
        }
        text += line;
        text.push('\n');
    }
    (text, dropped)
}

/// The wrapper of module `i`: calls its kernel with the buffers, builtins and threadgroup
/// variables; returns (its code, the kernel's `max_total_threads_per_threadgroup`).
fn wrapper(i: usize, msl: &str) -> Result<(String, Option<u32>), String> {
    let at = msl.find(" kernel void ").ok_or("no kernel")?;
    if msl[at + 1..].contains(" kernel void ") || msl[at + 1..].contains("\nkernel void ") {
        return Err("more than one kernel".into());
    }
    let line_start = msl[..at].rfind('\n').map_or(0, |p| p + 1);
    let max_threads = msl[line_start..at]
        .strip_prefix("[[max_total_threads_per_threadgroup(")
        .and_then(|r| r.strip_suffix(")]]"))
        .map(|n| n.parse::<u32>())
        .transpose()
        .map_err(|e| e.to_string())?;
    let rest = &msl[at + " kernel void ".len()..];
    let open = rest.find('(').ok_or("kernel signature")?;
    let name = rest[..open].trim();
    let close = rest.find("\n) {").ok_or("kernel signature end")?;
    let mut statics = String::new();
    let mut args = Vec::new();
    for (k, p) in rest[open + 1..close].split("\n,").enumerate() {
        let p = p.trim();
        let (decl, attr) = match p.find("[[") {
            Some(a) => (p[..a].trim(), Some(p[a + 2..].trim_end_matches("]]").trim())),
            None => (p, None),
        };
        if let Some(b) = attr.and_then(|a| a.strip_prefix("buffer(")).and_then(|a| a.strip_suffix(')')) {
            args.push(format!("::mrt::Arg{{b[{}]}}", b.parse::<u32>().map_err(|e| e.to_string())?));
        } else if let Some(ty) = decl.strip_prefix("threadgroup ") {
            let ty = ty.rsplit_once('&').ok_or_else(|| format!("threadgroup parameter `{p}`"))?.0.trim();
            let ty = if ty.starts_with("metal::") { ty.to_string() } else { format!("nm_{i}::{ty}") };
            statics += &format!("    static {ty} tg_{k};\n    ::mrt::poison_threadgroup(&tg_{k}, sizeof tg_{k});\n");
            args.push(format!("tg_{k}"));
        } else if let Some(a) = attr {
            let ty = decl.rsplit_once(' ').ok_or_else(|| format!("parameter `{p}`"))?.0.trim().trim_start_matches("metal::");
            args.push(builtin_expr(a, ty)?);
        } else {
            return Err(format!("parameter `{p}` not understood"));
        }
    }
    let code = format!("static void call_{i}(void* const* b, const Builtins& t) {{\n    (void)b; (void)t;\n{statics}    ::nm_{i}::{name}({});\n}}\n", args.join(", "));
    Ok((code, max_threads))
}

/// One translation unit: `modules` (indices into `cat`), each in its own namespace, their
/// wrappers and the entry table (entry `m<i>` runs module i).
fn translation_unit(cat: &Catalogue, modules: &[usize]) -> Result<String, String> {
    let mut tu = String::from("#include <metal_stdlib>\n");
    let mut wrappers = String::from("namespace mrt {\n");
    let mut table = String::new();
    for &i in modules {
        let m = &cat.modules[i];
        tu += &format!("// module {i}: {}\nnamespace nm_{i} {{\n{}}}  // namespace nm_{i}\n", m.labels.join(", "), rewrite(&m.msl).0);
        let (w, _) = wrapper(i, &m.msl).map_err(|e| format!("{}: {e}", m.labels[0]))?;
        wrappers += &w;
        table += &format!("    {{\"m{i}\", call_{i}}},\n");
    }
    wrappers += &format!("extern const Entry entries[] = {{\n{table}}};\nextern const int entry_count = {};\n}}  // namespace mrt\n", modules.len());
    Ok(tu + &wrappers)
}

/// The compiler flags of `mode` for naga's modules: the hand-written MSL's, but strict without
/// optimisation (IEEE arithmetic either way; several hundred modules build five times faster at
/// -O0 than at -O1, and the cases here are small). Fast-math keeps -O2, where the reassociation
/// and contraction it allows actually happen.
fn naga_flags(mode: Mode) -> Vec<&'static str> {
    mode.flags().into_iter().map(|f| if mode == Mode::Strict && f == "-O1" { "-O0" } else { f }).collect()
}

/// Compile one group of modules under `dir`: with `mode`, into an executable; without, only
/// checked (`-fsyntax-only`: every construct must exist in the runtime, with the right types).
fn compile_group(clang: &str, dir: &Path, cat: &Catalogue, modules: &[usize], mode: Option<Mode>, rt_obj: &Path, rt: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let src = dir.join("modules.cpp");
    std::fs::write(&src, translation_unit(cat, modules)?).map_err(|e| e.to_string())?;
    let (obj, exe) = (dir.join("modules.o"), dir.join("run"));
    let mut args = vec!["-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", "-Werror", "-Wall", "-Wno-unknown-attributes", "-Wno-unused", "-Wno-unused-parameter"];
    match mode {
        Some(m) => args.extend(naga_flags(m).into_iter().chain(["-c", "-o", obj.to_str().ok_or("path")?])),
        None => args.push("-fsyntax-only"),
    }
    args.extend(["-I", rt.to_str().ok_or("path")?]);
    let what = format!("{} modules from {} ({})", modules.len(), cat.modules[modules[0]].labels[0], mode.map_or("syntax", |m| m.name()));
    run_clang(clang, &args, &[&src]).map_err(|e| format!("{what}: {}", e.chars().take(8000).collect::<String>()))?;
    if mode.is_some() {
        run_clang(clang, &["-o", exe.to_str().ok_or("path")?, "-lstdc++", "-lm"], &[&obj, rt_obj])?;
    }
    Ok(exe)
}

/// Compile `groups` for each of `modes` (`None`: syntax only), in parallel; the executable of
/// every (mode, module).
fn compile_all(clang: &str, root: &Path, cat: &Catalogue, groups: &[Vec<usize>], modes: &[Option<Mode>], rt_obj: &Path) -> Result<HashMap<(Mode, usize), PathBuf>, Vec<String>> {
    let jobs: Vec<(Option<Mode>, usize)> = modes.iter().flat_map(|&m| (0..groups.len()).map(move |g| (m, g))).collect();
    let results = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let j = {
                    let mut n = next.lock().expect("lock");
                    *n += 1;
                    *n - 1
                };
                let Some(&(mode, g)) = jobs.get(j) else { break };
                let dir = root.join(format!("{}_{g}", mode.map_or("syntax", |m| m.name())));
                let r = compile_group(clang, &dir, cat, &groups[g], mode, rt_obj, &rt_dir());
                results.lock().expect("lock").push((mode, g, r));
            });
        }
    });
    let mut exes = HashMap::new();
    let mut errors = Vec::new();
    for (mode, g, r) in results.into_inner().expect("lock") {
        match (r, mode) {
            (Ok(exe), Some(m)) => exes.extend(groups[g].iter().map(|&i| ((m, i), exe.clone()))),
            (Ok(_), None) => {}
            (Err(e), _) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(exes)
    } else {
        Err(errors)
    }
}

/// `items` in groups of at most `n`.
fn groups_of(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    items.chunks(n.max(1)).map(|c| c.to_vec()).collect()
}

/// Run module `i` of executable `exe` for one dispatch of `desc`: buffer 0 the params, binding i
/// at buffer i, then the sizes buffer as wgpu's Metal backend fills it (each sized binding's byte
/// size); the bindings' new contents are written back.
#[allow(clippy::too_many_arguments)]
fn run_module(exe: &Path, i: usize, desc: &PipelineDesc, sized_bindings: &[u32], params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> Result<(), String> {
    let mut all = Vec::with_capacity(buffers.len() + 2);
    all.push(params.to_vec());
    all.extend(buffers.iter().cloned());
    let mut sizes: Vec<u8> = Vec::new();
    for b in sized_bindings {
        let len = all.get(*b as usize).ok_or_else(|| format!("sized binding {b} not bound"))?.len();
        sizes.extend(u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    }
    sizes.resize(sizes.len().max(16), 0);
    all.push(sizes);
    execute(exe, &format!("m{i}"), workgroups, desc.workgroup_size, &mut all)?;
    for (b, new) in buffers.iter_mut().zip(all.into_iter().skip(1)) {
        *b = new;
    }
    Ok(())
}

/// What the executor does with a dispatch.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Record the module and leave the buffers as they are (the cases' checks are ignored): which
    /// modules the cases use, and so which to build.
    Discover,
    /// Execute it, built in this mode.
    Run(Mode),
}

/// The dispatch executor: every dispatch runs its pipeline's naga MSL on the CPU.
struct NagaExecutor {
    cat: Mutex<Catalogue>,
    exes: Mutex<HashMap<(Mode, usize), PathBuf>>,
    phase: Mutex<Phase>,
    /// Modules dispatched since the last `take`.
    ran: Mutex<BTreeSet<usize>>,
    /// The pipeline of each module dispatched in the discovery (the first met).
    descs: Mutex<BTreeMap<usize, PipelineDesc>>,
    /// Whether the dispatches run the bounds-checked MSL (`ContextOptions::bounds_checks`).
    checked: bool,
    /// Where a module that the discovery missed is built on demand.
    clang: String,
    root: PathBuf,
    rt_obj: PathBuf,
}

impl NagaExecutor {
    fn new(cat: Catalogue, checked: bool, clang: &str, root: &Path, rt_obj: &Path) -> NagaExecutor {
        NagaExecutor {
            cat: Mutex::new(cat),
            exes: Mutex::new(HashMap::new()),
            phase: Mutex::new(Phase::Discover),
            ran: Mutex::new(BTreeSet::new()),
            descs: Mutex::new(BTreeMap::new()),
            checked,
            clang: clang.to_string(),
            root: root.to_path_buf(),
            rt_obj: rt_obj.to_path_buf(),
        }
    }

    fn take(&self) -> BTreeSet<usize> {
        std::mem::take(&mut *self.ran.lock().expect("lock"))
    }
}

impl NativeExecutor for NagaExecutor {
    fn execute(&self, desc: &PipelineDesc, params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> Result<(), String> {
        if desc.twin().is_some() {
            return Err(format!("{}: a Native pipeline reached the naga-MSL executor", desc.entry));
        }
        // Unchecked (this crate's default) or, on a context with `ContextOptions::bounds_checks`,
        // checked: the executor is told which, as wgpu's module creation is.
        let msl = metal_msl(desc, self.checked, LANG)?;
        let mut cat = self.cat.lock().map_err(|e| e.to_string())?;
        let i = cat.module_of(desc, self.checked)?;
        self.ran.lock().map_err(|e| e.to_string())?.insert(i);
        let Phase::Run(mode) = *self.phase.lock().map_err(|e| e.to_string())? else {
            self.descs.lock().map_err(|e| e.to_string())?.entry(i).or_insert_with(|| desc.clone());
            return Ok(());
        };
        let mut exes = self.exes.lock().map_err(|e| e.to_string())?;
        let exe = match exes.entry((mode, i)) {
            std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let dir = self.root.join(format!("on_demand_{}{}_{i}", mode.name(), if self.checked { "_checked" } else { "" }));
                println!("building module {i} on demand ({}): the discovery pass did not dispatch it", mode.name());
                slot.insert(compile_group(&self.clang, &dir, &cat, &[i], Some(mode), &self.rt_obj, &rt_dir())?).clone()
            }
        };
        drop((exes, cat));
        run_module(&exe, i, desc, &msl.sized_bindings, params, buffers, workgroups)
    }
}

/// Pipelines whose naga MSL declares a `reinterpreted_packed_char4_*` twice (see `rewrite`):
/// Metal's compiler rejects that module, so on a Mac such a pipeline fails to build. naga 30
/// writes that for WGSL calling dot4I8Packed twice on one argument in one function (Q4_0's and
/// Q6_K's integer dots did, with the constant 0x01010101 for the code offset, until the offset
/// was folded into the codes). Asserted both ways: empty, a new occurrence fails.
const KNOWN_REDECLARATIONS: &[&str] = &[];

/// Whether a case is small enough to run here.
fn fits(case: &dyn Case) -> bool {
    case.bytes() <= CASE_BYTES && case.flop_count().is_none_or(|f| f <= CASE_FLOPS)
}

/// A context that plans as a Mac does: the subgroup sizes wgpu's Metal backend reports (the
/// runtime's simdgroups have 32 lanes, as Apple GPUs' do) and Apple's threadgroup memory (or the
/// device's, where smaller).
fn apple_context() -> Context {
    let (min, max) = APPLE_SUBGROUP_SIZES;
    super::common::context().with_caps(|c| {
        c.subgroup_min_size = min;
        c.subgroup_max_size = max;
        let mem = &mut c.limits.max_compute_workgroup_storage_size;
        *mem = (*mem).min(APPLE_THREADGROUP_MEMORY);
    })
}

/// Whether a case passed on a naga-MSL executor (it must have dispatched there), and its summary.
fn outcome(result: &wgkernels::Result<Check>, ran: &BTreeSet<usize>) -> (bool, String) {
    match result {
        Ok(c) if ran.is_empty() => (false, format!("nothing ran on the naga-MSL executor ({})", c.summary())),
        Ok(c) => (c.passed(), c.summary()),
        Err(e) => (false, e.to_string()),
    }
}

/// One case's result line: the run (strict, fast-math or checked), kernel, variant, case, its
/// outcome and summary, the modules it ran and its time.
fn print_case(run: &str, kernel: &str, v: Variant, case: &str, (ok, summary): (bool, &str), modules: usize, secs: f64) {
    println!("{run:<9} {kernel:<22} {:<8} {case:<40} {} {summary} ({modules} modules, {secs:.2} s)", v.name(), if ok { "PASS" } else { "FAIL" });
}

/// The small cases of a kernel x variant that run here.
fn chosen_cases(kernel: &dyn Kernel) -> Vec<Box<dyn Case>> {
    kernel.test_cases().into_iter().filter(|c| fits(c.as_ref())).take(MAX_CASES).collect()
}

/// The grid's cases of a kernel x variant that passed in one mode, and how many plan cases did.
type Passed = (Vec<String>, usize);

/// Cases of one kernel x variant on one context (one tuning): the grid's chosen cases (default
/// tuning) and plan cases (`true`).
struct Run {
    kernel: &'static dyn Kernel,
    variant: Variant,
    /// What `ctx` plans for besides the Metal subgroup sizes.
    adapter: PlanAdapter,
    ctx: Context,
    cases: Vec<(Box<dyn Case>, bool)>,
    /// Per case: whether it runs (set by the discovery).
    keep: Vec<bool>,
}

#[test]
fn every_naga_msl_pipeline_executes_against_the_reference() {
    let started = Instant::now();
    let clang = super::clang();
    let cat = Catalogue::of_pipeline_list(false).unwrap_or_else(|e| panic!("{} translation failures:\n{}", e.len(), e.join("\n")));
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, r) in &cat.not_eligible {
        *reasons.entry(r.as_str()).or_default() += 1;
    }
    println!(
        "{} pipelines in the test kit's list: {} Metal-eligible through naga ({} distinct modules; MSL the same for versions {LANGS:?}), {} not ({:.1} s)",
        cat.eligible.len() + cat.not_eligible.len(),
        cat.eligible.len(),
        cat.modules.len(),
        cat.not_eligible.len(),
        started.elapsed().as_secs_f64()
    );
    for (r, n) in &reasons {
        println!("  not eligible: {n} x {r}");
    }
    let mut failures = Vec::new();
    // Each kernel's max_total_threads_per_threadgroup admits its workgroup.
    let pipelines = kernels::all_pipelines();
    let descs: HashMap<&str, &PipelineDesc> = pipelines.iter().map(|(l, d)| (l.as_str(), d)).collect();
    for (label, i) in &cat.eligible {
        let (_, max) = wrapper(*i, &cat.modules[*i].msl).unwrap_or_else(|e| panic!("{label}: {e}"));
        let threads: u32 = descs[label.as_str()].workgroup_size.iter().product();
        if max.is_some_and(|m| threads > m) {
            failures.push(format!("{label}: {threads} threads > max_total_threads_per_threadgroup {max:?}"));
        }
    }
    let root = build_dir("naga");
    let rt_obj = build_rt(&clang, &root);
    let exec = std::sync::Arc::new(NagaExecutor::new(cat, false, &clang, &root, &rt_obj));

    // Discovery: the modules the chosen cases dispatch, on contexts that plan for the subgroup
    // sizes wgpu's Metal backend reports; the same contexts (and pipelines) run them below.
    let apple = apple_context();
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)");
    let t = Instant::now();
    let mut runs: Vec<Run> = Vec::new();
    for kernel in kernels::registry() {
        let info = kernel.info();
        for v in [Variant::Portable, Variant::Subgroup] {
            if !info.variants.contains(&v) {
                continue;
            }
            if let Err(reason) = info.support(apple.caps(), v) {
                failures.push(format!("{} {}: not supported on this adapter: {reason}", info.name, v.name()));
                continue;
            }
            let options = |tuning: Tuning| ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_dispatch_executor(exec.clone()).with_tuning(tuning);
            let first = runs.len();
            let cases = chosen_cases(kernel).into_iter().map(|c| (c, false)).collect();
            runs.push(Run { kernel, variant: v, adapter: PlanAdapter::default(), ctx: apple.with_options(options(Tuning::default())), cases, keep: Vec::new() });
            // The listed plans the grid does not reach: one context per distinct tuning.
            for pc in kernel.plan_cases().into_iter().filter(|pc| pc.variant.is_none_or(|pv| pv == v) && fits(pc.case.as_ref())) {
                match runs[first..].iter_mut().find(|r| r.ctx.options().tuning == pc.tuning && r.adapter == pc.adapter) {
                    Some(r) => r.cases.push((pc.case, true)),
                    None => {
                        let ctx = apple.with_caps(|c| pc.adapter.apply(c)).with_options(options(pc.tuning));
                        runs.push(Run { kernel, variant: v, adapter: pc.adapter, ctx, cases: vec![(pc.case, true)], keep: Vec::new() });
                    }
                }
            }
        }
    }
    // Discovery runs every case; the grid's chosen cases all run below, a plan case only where it
    // dispatches a module no case before it does (the fewest runs that reach every module).
    let mut needed = BTreeSet::new();
    // The modules the grid's chosen cases dispatch (their checked forms run below too).
    let mut grid_modules = BTreeSet::new();
    for run in &mut runs {
        let mut rng = Rng::new(seed);
        for (case, plan) in &run.cases {
            exec.take();
            let _ = run_case(&run.ctx, case.as_ref(), &mut rng);
            let ran = exec.take();
            run.keep.push(!plan || !ran.is_subset(&needed));
            if !plan {
                grid_modules.extend(ran.iter().copied());
            }
            needed.extend(ran);
        }
    }
    let needed: Vec<usize> = needed.into_iter().collect();
    for run in &runs {
        exec.cat.lock().expect("lock").name_outside(run.ctx.built_pipelines());
    }
    let plans = || runs.iter().flat_map(|r| r.cases.iter().zip(&r.keep)).filter(|((_, plan), _)| *plan);
    println!(
        "discovery: the chosen cases and {} plan cases ({} contexts) dispatch {} modules; {} plan cases reach a module no case before them does and run ({:.1} s)",
        plans().count(),
        runs.len(),
        needed.len(),
        plans().filter(|(_, keep)| **keep).count(),
        t.elapsed().as_secs_f64()
    );
    let checked_cat;
    {
        let cat = exec.cat.lock().expect("lock");
        // The list names every plan a case reaches (each family's list and plan cases come from
        // one table): a module outside it fails (it is still translated, compiled and run).
        for (i, label) in &cat.outside {
            failures.push(format!("module {i}: {label}: dispatched by a case; add its plan to the family's plan table"));
        }
        // The known naga redeclaration, both ways.
        let redeclared: Vec<&str> = cat.modules.iter().filter(|m| rewrite(&m.msl).1 > 0).flat_map(|m| m.labels.iter().map(String::as_str)).collect();
        println!(
            "KNOWN DEFECT: {} pipelines fail to build on Metal (naga redeclares a reinterpreted packed_char4; the repeated line is dropped here to execute them):",
            redeclared.len()
        );
        for l in &redeclared {
            println!("  {l}");
        }
        for l in redeclared.iter().filter(|l| !KNOWN_REDECLARATIONS.iter().any(|k| l.contains(k))) {
            failures.push(format!("{l}: naga's MSL redeclares a variable (not in KNOWN_REDECLARATIONS)"));
        }
        for k in KNOWN_REDECLARATIONS.iter().filter(|k| !redeclared.iter().any(|l| l.contains(*k))) {
            failures.push(format!("KNOWN_REDECLARATIONS entry `{k}` no longer matches: remove it"));
        }
        // Every module compiles against the runtime; those the cases use are built, both modes.
        let t = Instant::now();
        let all: Vec<usize> = (0..cat.modules.len()).collect();
        if let Err(e) = compile_all(&clang, &root, &cat, &groups_of(&all, 160), &[None], &rt_obj) {
            failures.extend(e.into_iter().map(|e| format!("COMPILE {e}")));
        }
        println!("all {} modules compile against tests/metal_rt ({:.1} s)", cat.modules.len(), t.elapsed().as_secs_f64());
        // The bounds-checked MSL (`ContextOptions::bounds_checks`) of the list compiles too (the
        // modules the grid's chosen cases reach also run, below).
        let t = Instant::now();
        checked_cat = match Catalogue::of_pipeline_list(true) {
            Ok(checked) => {
                let all: Vec<usize> = (0..checked.modules.len()).collect();
                if let Err(e) = compile_all(&clang, &root.join("checked"), &checked, &groups_of(&all, 160), &[None], &rt_obj) {
                    failures.extend(e.into_iter().map(|e| format!("COMPILE (bounds-checked) {e}")));
                }
                println!("all {} bounds-checked modules compile against tests/metal_rt ({:.1} s)", checked.modules.len(), t.elapsed().as_secs_f64());
                Some(checked)
            }
            Err(e) => {
                failures.extend(e.into_iter().map(|e| format!("bounds-checked: {e}")));
                None
            }
        };
        let t = Instant::now();
        let exes = compile_all(&clang, &root, &cat, &groups_of(&needed, needed.len().div_ceil(4)), &[Some(Mode::Strict), Some(Mode::Fast)], &rt_obj)
            .unwrap_or_else(|e| panic!("BUILD:\n{}", e.join("\n")));
        *exec.exes.lock().expect("lock") = exes;
        println!("built {} modules, strict and fast-math, in {:.1} s", needed.len(), t.elapsed().as_secs_f64());
    }

    // Per mode: the modules executed.
    let mut executed = [BTreeSet::new(), BTreeSet::new()];
    // (kernel, variant) -> per mode: the grid's cases that ran and passed, and the plan cases.
    let mut table: BTreeMap<(&str, &str), [Passed; 2]> = BTreeMap::new();
    for mode in [Mode::Strict, Mode::Fast] {
        *exec.phase.lock().expect("lock") = Phase::Run(mode);
        for run in &runs {
            let (info, v, ctx) = (run.kernel.info(), run.variant, &run.ctx);
            let slot = &mut table.entry((info.name, v.name())).or_default()[mode as usize];
            let mut rng = Rng::new(seed);
            for ((case, plan), _) in run.cases.iter().zip(&run.keep).filter(|(_, keep)| **keep) {
                exec.take();
                let t = Instant::now();
                let result = run_case(ctx, case.as_ref(), &mut rng);
                let ran = exec.take();
                executed[mode as usize].extend(ran.iter().copied());
                let (ok, summary) = outcome(&result, &ran);
                let name = if *plan { format!("{} (plan case)", case.name()) } else { case.name() };
                print_case(mode.name(), info.name, v, &name, (ok, &summary), ran.len(), t.elapsed().as_secs_f64());
                if ok && *plan {
                    slot.1 += 1;
                } else if ok {
                    slot.0.push(name);
                } else {
                    failures.push(format!("{} {} {} {name}: {summary}", mode.name(), info.name, v.name()));
                }
            }
            if slot.0.is_empty() && slot.1 == 0 {
                failures.push(format!("{} {} {}: no case ran and passed (none fits {CASE_BYTES} bytes / {CASE_FLOPS:.0e} flops, or all failed)", mode.name(), info.name, v.name()));
            }
        }
    }
    // The bounds-checked MSL, strict: the grid's chosen cases again, on contexts with
    // `ContextOptions::bounds_checks`, each dispatch running its pipeline's checked module (built
    // from the pipelines the discovery saw those cases dispatch).
    let t = Instant::now();
    let mut checked_passed: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    if let Some(mut ccat) = checked_cat {
        let descs = exec.descs.lock().expect("lock").clone();
        let mut want = BTreeSet::new();
        for i in &grid_modules {
            match descs.get(i).ok_or_else(|| "no pipeline recorded".to_string()).and_then(|d| ccat.module_of(d, true)) {
                Ok(j) => {
                    want.insert(j);
                }
                Err(e) => failures.push(format!("bounds-checked form of module {i}: {e}")),
            }
        }
        let want: Vec<usize> = want.into_iter().collect();
        let dir = root.join("checked");
        let exes = compile_all(&clang, &dir, &ccat, &groups_of(&want, want.len().div_ceil(4)), &[Some(Mode::Strict)], &rt_obj)
            .unwrap_or_else(|e| panic!("BUILD (bounds-checked):\n{}", e.join("\n")));
        let built = t.elapsed().as_secs_f64();
        let cexec = std::sync::Arc::new(NagaExecutor::new(ccat, true, &clang, &dir, &rt_obj));
        *cexec.exes.lock().expect("lock") = exes;
        *cexec.phase.lock().expect("lock") = Phase::Run(Mode::Strict);
        let mut ran_checked = BTreeSet::new();
        for run in runs.iter().filter(|r| r.cases.iter().any(|(_, plan)| !plan)) {
            let (info, v) = (run.kernel.info(), run.variant);
            let ctx = apple.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_dispatch_executor(cexec.clone()).with_bounds_checks(true));
            let passed = checked_passed.entry((info.name, v.name())).or_default();
            let mut rng = Rng::new(seed);
            for (case, _) in run.cases.iter().filter(|(_, plan)| !plan) {
                cexec.take();
                let tc = Instant::now();
                let result = run_case(&ctx, case.as_ref(), &mut rng);
                let ran = cexec.take();
                ran_checked.extend(ran.iter().copied());
                let (ok, summary) = outcome(&result, &ran);
                print_case("checked", info.name, v, &case.name(), (ok, &summary), ran.len(), tc.elapsed().as_secs_f64());
                if ok {
                    passed.push(case.name());
                } else {
                    failures.push(format!("bounds-checked strict {} {} {}: {summary}", info.name, v.name(), case.name()));
                }
            }
            if passed.is_empty() {
                failures.push(format!("bounds-checked strict {} {}: no case ran and passed", info.name, v.name()));
            }
        }
        let ccat = cexec.cat.lock().expect("lock");
        for j in want.iter().filter(|j| !ran_checked.contains(j)) {
            failures.push(format!("bounds-checked module {j} ({}): the grid's cases reach its pipeline, but it did not run", ccat.modules[*j].labels.join(", ")));
        }
        println!(
            "bounds-checked, strict: {} grid cases of {} kernel x variants passed; {} modules executed ({} predicted from the discovery, built in {built:.1} s); {:.1} s in all",
            checked_passed.values().map(Vec::len).sum::<usize>(),
            checked_passed.len(),
            ran_checked.len(),
            want.len(),
            t.elapsed().as_secs_f64()
        );
    }
    println!("\nkernel                 variant  cases passed (strict | fast-math | bounds-checked strict): the grid's, and the plan cases");
    for ((k, v), [s, f]) in &table {
        let c = checked_passed.get(&(*k, *v)).map_or(String::new(), |c| c.join("; "));
        println!("{k:<22} {v:<8} {} + {} plan cases | {} + {} plan cases | {c}", s.0.join("; "), s.1, f.0.join("; "), f.1);
    }
    let cat = exec.cat.lock().expect("lock");
    // Every eligible pipeline of the list executed in both modes.
    for mode in [Mode::Strict, Mode::Fast] {
        for (label, i) in cat.eligible.iter().filter(|(_, i)| !executed[mode as usize].contains(i)) {
            failures.push(format!("{label} (module {i}): not executed in {} mode; no case reaches it", mode.name()));
        }
    }
    let reached = cat.eligible.iter().filter(|(_, i)| executed.iter().all(|e| e.contains(i))).count();
    println!(
        "executed {} of {} distinct modules in both modes: {reached} of the list's {} eligible pipelines; wall {:.1} s",
        executed[0].intersection(&executed[1]).count(),
        cat.modules.len(),
        cat.eligible.len(),
        started.elapsed().as_secs_f64()
    );
    for f in &failures {
        println!("FAILED: {f}");
    }
    cleanup(&root);
    assert!(failures.is_empty(), "{} naga-MSL failures (seed {seed})", failures.len());
}

/// Runs every dispatch's naga MSL (bounds-checked with `checked`) with one mutation: `from`
/// replaced by `to` (once) in the MSL, or the runtime's headers taken from `rt` (a mutated copy);
/// each module built strict on first use.
struct MutantExecutor {
    checked: bool,
    clang: String,
    dir: PathBuf,
    rt_obj: PathBuf,
    rt: PathBuf,
    from: &'static str,
    to: &'static str,
    built: Mutex<HashMap<String, PathBuf>>,
    /// Dispatches run, and those whose MSL the mutation changed.
    counts: Mutex<(usize, usize)>,
}

impl NativeExecutor for MutantExecutor {
    fn execute(&self, desc: &PipelineDesc, params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> Result<(), String> {
        let msl = metal_msl(desc, self.checked, LANG)?;
        let mutated = !self.from.is_empty() && msl.text.contains(self.from);
        let text = if mutated { msl.text.replacen(self.from, self.to, 1) } else { msl.text.clone() };
        let mut built = self.built.lock().map_err(|e| e.to_string())?;
        let n = built.len();
        let exe = match built.get(&text) {
            Some(e) => e.clone(),
            None => {
                let mut cat = Catalogue::default();
                let _ = cat.place(desc.entry.to_string(), Ok(text.clone()), true);
                let exe = compile_group(&self.clang, &self.dir.join(format!("m{n}")), &cat, &[0], Some(Mode::Strict), &self.rt_obj, &self.rt)?;
                built.insert(text, exe.clone());
                exe
            }
        };
        drop(built);
        run_module(&exe, 0, desc, &msl.sized_bindings, params, buffers, workgroups)?;
        let mut c = self.counts.lock().map_err(|e| e.to_string())?;
        c.0 += 1;
        c.1 += usize::from(mutated);
        Ok(())
    }
}

/// Where a mutation of the teeth test is made.
#[derive(Clone, Copy, PartialEq)]
enum Mutated {
    Msl,
    CheckedMsl,
    Runtime,
}

/// Teeth: each mutation - in naga's MSL (a subgroup reduction dropped; Q4_K's high scale bits
/// shifted one place short), in its bounds-checked MSL (the clamp of a threadgroup index, which
/// only the checked form has, pinned to 0: every simdgroup's partial sum lands in one slot) or in
/// the runtime's simd emulation (lane 31 left out of every reduction; the exclusive prefix sum
/// made inclusive) - built strict and executed in place of the real code must fail the harness's
/// own check of the kernel x variant on at least one of its chosen cases.
#[test]
fn a_wrong_naga_msl_or_simd_emulation_fails_the_check() {
    // (kernel, variant, text, replacement, where): the text is in the MSL, in the bounds-checked
    // MSL (run on a context with `ContextOptions::bounds_checks`), or in metal_stdlib.
    let mutations: [(&str, Variant, &str, &str, Mutated); 5] = [
        ("elementwise_rmsnorm", Variant::Subgroup, "metal::simd_sum(v_1)", "(v_1)", Mutated::Msl),
        ("mm_gemv_q4_k", Variant::Subgroup, "((h.y >> 2u) & 808464432u)", "((h.y >> 3u) & 808464432u)", Mutated::Msl),
        ("elementwise_rmsnorm", Variant::Subgroup, "ew_scratch.inner[metal::min(unsigned(_e6), 255u)]", "ew_scratch.inner[metal::min(unsigned(_e6), 0u)]", Mutated::CheckedMsl),
        ("elementwise_rmsnorm", Variant::Subgroup, "if (s.arrived[l]) acc = any", "if (s.arrived[l] && l != ::mrt::SIMD_WIDTH - 1) acc = any", Mutated::Runtime),
        (
            "elementwise_rmsnorm",
            Variant::Subgroup,
            "detail::op_prefix_sum<T, false>>(\"simd_prefix_exclusive_sum\"",
            "detail::op_prefix_sum<T, true>>(\"simd_prefix_exclusive_sum\"",
            Mutated::Runtime,
        ),
    ];
    let clang = super::clang();
    let root = build_dir("naga_mutants");
    let rt_obj = build_rt(&clang, &root);
    let apple = apple_context();
    let registry = kernels::registry();
    for (m, (name, v, from, to, place)) in mutations.into_iter().enumerate() {
        let in_runtime = place == Mutated::Runtime;
        let dir = root.join(format!("m{m}"));
        let rt = if in_runtime {
            // A copy of the runtime's headers with the mutation.
            let rt = dir.join("rt");
            std::fs::create_dir_all(rt.join("simd")).expect("mkdir");
            for f in ["metal_stdlib", "metal_rt_core.h", "metal_simdgroup_matrix.h", "metal_naga.h", "simd/simd.h"] {
                let text = std::fs::read_to_string(rt_dir().join(f)).expect("read");
                let text = if f == "metal_stdlib" {
                    assert!(text.contains(from), "mutation {m}: `{from}` not in {f}");
                    text.replacen(from, to, 1)
                } else {
                    text
                };
                std::fs::write(rt.join(f), text).expect("write");
            }
            rt
        } else {
            rt_dir()
        };
        let exec = std::sync::Arc::new(MutantExecutor {
            checked: place == Mutated::CheckedMsl,
            clang: clang.clone(),
            dir: dir.clone(),
            rt_obj: rt_obj.clone(),
            rt,
            from: if in_runtime { "" } else { from },
            to,
            built: Mutex::new(HashMap::new()),
            counts: Mutex::new((0, 0)),
        });
        let kernel = registry.iter().find(|k| k.info().name == name).unwrap_or_else(|| panic!("{name}"));
        let ctx = apple
            .with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_dispatch_executor(exec.clone()).with_bounds_checks(place == Mutated::CheckedMsl));
        let mut rng = Rng::new(Rng::fresh_seed());
        let mut failed = 0;
        for case in chosen_cases(*kernel) {
            let line = match run_case(&ctx, case.as_ref(), &mut rng) {
                Ok(c) => {
                    failed += usize::from(!c.passed());
                    c.summary()
                }
                Err(e) => {
                    failed += 1;
                    e.to_string()
                }
            };
            println!("mutant {m} {name} {} {}: {line}", v.name(), case.name());
        }
        let (ran, mutated) = *exec.counts.lock().expect("lock");
        assert!(ran > 0 && (in_runtime || mutated > 0), "mutant {m}: {ran} dispatches, {mutated} mutated");
        assert!(failed > 0, "mutant {m} ({to}) passed every case");
    }
    cleanup(&root);
}
