//! Command-line scaffolding shared by the model examples (`generate`, `model_bench`), included
//! by each with `#[path = "common/cli.rs"] mod cli;` (a folder without `main.rs`, so it is no
//! example target of its own): one positional `MODEL.gguf` plus flags, the exit codes, and
//! opening the context and the mapped model file.

use wgkernels::formats::gguf::GgufFile;
use wgkernels::model::KvKind;
use wgkernels::{Context, ContextOptions};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

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

/// Reads `args` (the program's, without its name): `flag` handles each argument that starts
/// with `-` and returns `Ok(false)` for one it does not know; `-h`/`--help`, an unknown flag, a
/// second positional argument or no model path give an error holding `usage`. Returns the
/// model path.
pub fn parse<I, F>(usage: &str, args: I, mut flag: F) -> Result<String, String>
where
    I: Iterator<Item = String>,
    F: FnMut(&str, &mut Flags<I>) -> Result<bool, String>,
{
    let mut flags = Flags { it: args };
    let mut model = String::new();
    while let Some(s) = flags.it.next() {
        match s.as_str() {
            "-h" | "--help" => return Err(usage.into()),
            f if f.starts_with('-') => {
                if !flag(f, &mut flags)? {
                    return Err(format!("unknown option {f}\n{usage}"));
                }
            }
            other if model.is_empty() => model = other.to_string(),
            other => return Err(format!("unexpected argument {other:?}\n{usage}")),
        }
    }
    if model.is_empty() {
        return Err(usage.into());
    }
    Ok(model)
}

/// Runs `run` on the parsed arguments: a parse error is printed and exits with status 2, a run
/// error is printed as `error: ...` and exits with status 1.
pub fn main_with<A>(args: Result<A, String>, run: impl FnOnce(A) -> Res<()>) {
    let a = match args {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// A context from the environment's options (the adapter named on stderr) and the model file,
/// memory-mapped.
pub fn open(model: &str) -> Res<(Context, GgufFile)> {
    let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
    let caps = ctx.caps();
    eprintln!("adapter: {} ({:?}, {:?})", caps.adapter_name, caps.device_type, caps.backend);
    // Mapped, not read: the weights go from the page cache to the GPU, and the pages the model
    // keeps using (embedding rows) stay evictable file pages instead of a second copy of the
    // model in RAM (which on unified-memory machines would halve the model that fits).
    // SAFETY: the examples neither write nor truncate the model file while they run; the user
    // must not either (see GgufFile::open_mapped).
    let file = unsafe { GgufFile::open_mapped(model)? };
    Ok((ctx, file))
}
