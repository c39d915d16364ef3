//! Command-line scaffolding shared by the model examples (`generate`, `model_bench`), included
//! by each with `#[path = "common/cli.rs"] mod cli;` (a folder without `main.rs`, so it is no
//! example target of its own): one positional `MODEL.gguf` plus flags, `--help`, the exit codes,
//! the on-disk pipeline cache, opening the model file and the context, and the pipeline warm-up.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;
use wgkernels::formats::gguf::GgufFile;
use wgkernels::model::{KvKind, Model, Session};
use wgkernels::{Context, ContextOptions};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The instant `main` started (first call): times "from process start" are measured from it.
pub fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Seconds since [`process_start`].
pub fn since_start() -> f64 {
    process_start().elapsed().as_secs_f64()
}

/// The arguments after a flag, for flags that take a value.
pub struct Flags<I: Iterator<Item = String>> {
    it: I,
}

impl<I: Iterator<Item = String>> Flags<I> {
    /// The next argument, parsed as the value of `flag`.
    pub fn value<T: std::str::FromStr>(&mut self, flag: &str) -> Result<T, String> {
        let v = self.it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse().map_err(|_| format!("{flag}: cannot parse {v:?}"))
    }

    /// The next argument as a KV cache kind (`--kv f16|turboquant`).
    pub fn kv(&mut self, flag: &str) -> Result<KvKind, String> {
        let v: String = self.value(flag)?;
        KvKind::parse(&v).ok_or_else(|| format!("{flag} {v}: expected f16 or turboquant"))
    }
}

/// The flags every model example takes (the context and its pipeline cache).
pub struct Common {
    /// `--pipeline-cache FILE` (default: [`default_pipeline_cache`]); `None` with `--no-pipeline-cache`.
    pub pipeline_cache: Option<PathBuf>,
}

/// Help lines of the flags [`parse`] handles itself.
pub const COMMON_HELP: &str = "  --pipeline-cache FILE  keep compiled GPU pipelines in FILE between runs (Vulkan; other backends
                         cache in their drivers). Default: $XDG_CACHE_HOME/wgkernels/pipelines.bin,
                         else ~/.cache/wgkernels/pipelines.bin, else target/wgkernels-pipelines.bin
  --no-pipeline-cache    build every pipeline from scratch and keep nothing
  -h, --help             print this help and exit";

/// Reads `args` (the program's, without its name): `flag` handles each argument that starts
/// with `-` and returns `Ok(false)` for one it does not know. `-h`/`--help` prints `help` and
/// exits with status 0; an unknown flag, a second positional argument or no model path give an
/// error naming the problem, followed by `help`'s first line (the usage). Returns the model path
/// and the common flags.
pub fn parse<I, F>(help: &str, args: I, mut flag: F) -> Result<(String, Common), String>
where
    I: Iterator<Item = String>,
    F: FnMut(&str, &mut Flags<I>) -> Result<bool, String>,
{
    let usage = help.lines().next().unwrap_or_default();
    let mut flags = Flags { it: args };
    let mut model = String::new();
    let mut common = Common { pipeline_cache: default_pipeline_cache() };
    while let Some(s) = flags.it.next() {
        match s.as_str() {
            "-h" | "--help" => {
                println!("{help}\n{COMMON_HELP}");
                std::process::exit(0);
            }
            "--pipeline-cache" => common.pipeline_cache = Some(flags.value::<PathBuf>(&s)?),
            "--no-pipeline-cache" => common.pipeline_cache = None,
            f if f.starts_with('-') && f.len() > 1 => {
                if !flag(f, &mut flags)? {
                    return Err(format!("unknown option {f}\n{usage}"));
                }
            }
            other if model.is_empty() => model = other.to_string(),
            other => return Err(format!("unexpected argument {other:?}\n{usage}")),
        }
    }
    if model.is_empty() {
        return Err(format!("no model file given\n{usage}"));
    }
    Ok((model, common))
}

/// Where the examples keep compiled pipelines unless told otherwise: under the user's cache
/// directory, or in the build's target directory when there is none.
pub fn default_pipeline_cache() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let user = env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|h| h.join(".cache")));
    Some(match user {
        Some(dir) => dir.join("wgkernels").join("pipelines.bin"),
        None => PathBuf::from(option_env!("CARGO_TARGET_DIR").unwrap_or(concat!(env!("CARGO_MANIFEST_DIR"), "/target"))).join("wgkernels-pipelines.bin"),
    })
}

/// Runs `run` on the parsed arguments: a parse error is printed and exits with status 2, a run
/// error is printed as `error: ...` and exits with status 1.
pub fn main_with<A>(args: Result<A, String>, run: impl FnOnce(A) -> Res<()>) {
    let a = match args {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The model file, memory-mapped (its header read and checked), then a context from the
/// environment's options with the pipeline cache (the adapter named on stderr).
pub fn open(model: &str, common: &Common) -> Res<(Context, GgufFile)> {
    // Mapped, not read: the weights go from the page cache to the GPU, and the pages the model
    // keeps using (embedding rows) stay evictable file pages instead of a second copy of the
    // model in RAM (which on unified-memory machines would halve the model that fits).
    // SAFETY: the examples neither write nor truncate the model file while they run; the user
    // must not either (see GgufFile::open_mapped).
    let file = unsafe { GgufFile::open_mapped(model) }.map_err(|e| format!("{model}: {e}"))?;
    let mut options = ContextOptions::from_env()?;
    options.pipeline_cache = common.pipeline_cache.clone();
    let ctx = Context::new_blocking(options)?;
    let caps = ctx.caps();
    eprintln!("adapter: {} ({:?}, {:?})", caps.adapter_name, caps.device_type, caps.backend);
    Ok((ctx, file))
}

/// Builds every pipeline a prefill of `prompt_len` tokens and the decode steps after it use
/// ([`Session::warm_up`]), with the decode step's and the last chunk's pipelines built at the
/// same time on other threads (wgpu builds a pipeline on the calling thread; one pipeline is
/// built once, different ones in parallel), uploads the embedding table for greedy decoding on
/// the GPU when `gpu_embeddings`, then saves the pipeline cache. Returns the seconds taken.
pub fn warm_up(ctx: &Context, model: &Model, session: &Session, prompt_len: usize, gpu_embeddings: bool) -> Res<f64> {
    let t = Instant::now();
    if gpu_embeddings {
        // First, so that the warm-up below builds the row lookup's pipeline too.
        model.gpu_embeddings(ctx)?;
    }
    let chunk = session.options().chunk;
    let last = prompt_len % chunk;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| -> Res<()> {
        let mut helpers = Vec::new();
        if threads > 1 && session.kv().capacity() > 0 {
            helpers.push(s.spawn(|| session.record_decode(&mut ctx.batch(), model, 0)));
        }
        if threads > 2 && last > 1 && last != prompt_len.min(chunk) {
            helpers.push(s.spawn(move || session.record_chunk(&mut ctx.batch(), model, last, 0, false)));
        }
        let all = session.warm_up(ctx, model, prompt_len);
        for h in helpers {
            h.join().map_err(|_| "a warm-up thread panicked")??;
        }
        Ok(all?)
    })?;
    ctx.save_pipeline_cache()?;
    Ok(t.elapsed().as_secs_f64())
}
