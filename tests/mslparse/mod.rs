//! A small parser for the subset of MSL our kernels are written in, shared by tests/msl_bindings.rs
//! and tests/msl_clang.rs: kernel signatures (parameters with their address space, type and
//! attribute), program-scope `constant constexpr` integers, structs, and the static threadgroup
//! arrays declared in each kernel body. It is strict: anything it does not understand in a kernel
//! signature is an error, so a new construct has to be taught here (and checked) before it ships.
//!
//! The MSL programs are the msl/*.metal files and the programs the library assembles in Rust from
//! parts (the weight-matrix GEMVs on msl/gemv/), found through the kernel registry: [`programs`].

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Address space of a kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Constant,
    DeviceConst,
    Device,
    Threadgroup,
    /// A value parameter (builtins).
    Value,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub space: Space,
    /// Pointee / referee type for buffers, the value type for builtins.
    pub ty: String,
    /// `*` or `&` (empty for values).
    pub indirection: &'static str,
    pub name: String,
    /// The attribute text inside `[[ ]]`, e.g. `buffer(3)` or `thread_index_in_threadgroup`.
    pub attr: String,
}

impl Param {
    pub fn buffer_index(&self) -> Option<u32> {
        self.attr.strip_prefix("buffer(")?.strip_suffix(')')?.trim().parse().ok()
    }
}

/// A threadgroup array declared in a kernel body.
#[derive(Clone, Debug)]
pub struct TgArray {
    pub ty: String,
    pub name: String,
    /// The element count as written (a literal or a `constant constexpr` name).
    pub count_expr: String,
    pub bytes: u64,
}

#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub threadgroup: Vec<TgArray>,
}

impl Kernel {
    pub fn threadgroup_bytes(&self) -> u64 {
        self.threadgroup.iter().map(|a| a.bytes).sum()
    }
}

#[derive(Clone, Debug)]
pub struct MslFile {
    pub path: PathBuf,
    pub text: String,
    pub kernels: Vec<Kernel>,
    /// Program-scope `constant constexpr uint NAME = value;`.
    pub constants: BTreeMap<String, u64>,
    /// Structs: name -> fields (type, name).
    pub structs: BTreeMap<String, Vec<(String, String)>>,
    /// Threadgroup arrays declared anywhere in the file (must all be in kernel bodies).
    pub threadgroup_decls: usize,
}

/// Every msl/*.metal, sorted by name.
pub fn metal_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/msl"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "metal"))
        .collect();
    v.sort();
    v
}

/// Every MSL program: each msl/*.metal file (sorted by name), then each Native pipeline's MSL that
/// is none of them (assembled in Rust from parts), found through the kernel registry and named
/// `assembled/<kernel>.metal` (a path that exists only in messages; see [`on_disk`]).
pub fn programs() -> Vec<MslFile> {
    let mut v: Vec<MslFile> = metal_files().into_iter().map(|p| parse(p).unwrap_or_else(|e| panic!("{e}"))).collect();
    for kernel in wgkernels::kernels::registry() {
        for (_, desc) in kernel.pipelines() {
            let wgkernels::pipeline::ShaderSource::Msl { text, .. } = &desc.source else { continue };
            if !v.iter().any(|f| f.text == *text) {
                let path = PathBuf::from(format!("assembled/{}.metal", kernel.info().name));
                v.push(parse_text(path, text.to_string()).unwrap_or_else(|e| panic!("{e}")));
            }
        }
    }
    v
}

/// A path holding `file`'s text: its own for a file of msl/, else the text written to `dir`.
pub fn on_disk(file: &MslFile, dir: &std::path::Path) -> PathBuf {
    if file.path.is_file() {
        return file.path.clone();
    }
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join(file.path.file_name().expect("a file name"));
    std::fs::write(&path, &file.text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// Remove `//` and `/* */` comments (the kernels contain no string literals with slashes).
pub fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Byte size of the scalar and vector types we allow in threadgroup memory and params structs.
pub fn type_size(ty: &str) -> Option<u64> {
    Some(match ty {
        "float" | "uint" | "int" | "half2" | "ushort2" => 4,
        "half" | "ushort" | "short" => 2,
        "float2" | "uint2" | "int2" | "half4" => 8,
        "float4" | "uint4" | "int4" => 16,
        _ => return None,
    })
}

/// The index of the bracket matching the one at `open` (`(`/`)` or `{`/`}`).
fn matching(s: &str, open: usize) -> Result<usize, String> {
    let b = s.as_bytes();
    let (o, c) = match b[open] {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        x => return Err(format!("no bracket at {open}: {}", x as char)),
    };
    let mut depth = 0;
    for (i, &x) in b.iter().enumerate().skip(open) {
        if x == o {
            depth += 1;
        } else if x == c {
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
        }
    }
    Err("unbalanced brackets".into())
}

fn parse_param(raw: &str) -> Result<Param, String> {
    let raw = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    let (decl, attr) = match raw.find("[[") {
        Some(i) => {
            let end = raw.find("]]").ok_or_else(|| format!("unclosed attribute in `{raw}`"))?;
            if raw[end + 2..].trim() != "" {
                return Err(format!("text after the attribute in `{raw}`"));
            }
            (raw[..i].trim().to_string(), raw[i + 2..end].trim().to_string())
        }
        None => return Err(format!("kernel parameter without an attribute: `{raw}`")),
    };
    let decl = decl.replace('*', " * ").replace('&', " & ");
    let words: Vec<&str> = decl.split_whitespace().collect();
    let (space, rest) = match words.as_slice() {
        ["constant", rest @ ..] => (Space::Constant, rest),
        ["device", "const", rest @ ..] => (Space::DeviceConst, rest),
        ["device", rest @ ..] => (Space::Device, rest),
        ["threadgroup", rest @ ..] => (Space::Threadgroup, rest),
        rest => (Space::Value, rest),
    };
    let (ty, indirection, name) = match rest {
        [ty, "*", name] => (ty.to_string(), "*", name.to_string()),
        [ty, "&", name] => (ty.to_string(), "&", name.to_string()),
        [ty, name] if space == Space::Value => (ty.to_string(), "", name.to_string()),
        _ => return Err(format!("unrecognised kernel parameter `{raw}`")),
    };
    Ok(Param { space, ty, indirection, name, attr })
}

/// Parse one .metal file.
pub fn parse(path: PathBuf) -> Result<MslFile, String> {
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_text(path, text)
}

/// Parse one MSL program (`path` names it in messages).
pub fn parse_text(path: PathBuf, text: String) -> Result<MslFile, String> {
    let src = strip_comments(&text);
    let mut constants = BTreeMap::new();
    for stmt in src.split(';') {
        let w: Vec<&str> = stmt.split_whitespace().collect();
        if let ["constant", "constexpr", "uint", name, "=", value] = w.as_slice() {
            let v = value.trim_end_matches(['u', 'U']).parse().map_err(|_| format!("constant {name} = {value}: not an integer literal"))?;
            constants.insert(name.to_string(), v);
        }
    }
    let mut structs = BTreeMap::new();
    let mut at = 0;
    while let Some(i) = src[at..].find("struct ") {
        let start = at + i + "struct ".len();
        let brace = start + src[start..].find('{').ok_or("struct without body")?;
        let name = src[start..brace].trim().to_string();
        let end = matching(&src, brace)?;
        let fields = src[brace + 1..end]
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                let w: Vec<&str> = f.split_whitespace().collect();
                match w.as_slice() {
                    [ty, name] => Ok((ty.to_string(), name.to_string())),
                    _ => Err(format!("struct {name}: unrecognised field `{f}`")),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        structs.insert(name, fields);
        at = end;
    }
    let mut kernels = Vec::new();
    let mut at = 0;
    while let Some(i) = src[at..].find("kernel void ") {
        let start = at + i + "kernel void ".len();
        let open = start + src[start..].find('(').ok_or("kernel without parameters")?;
        let name = src[start..open].trim().to_string();
        let close = matching(&src, open)?;
        let params = src[open + 1..close].split(',').map(parse_param).collect::<Result<Vec<_>, _>>().map_err(|e| format!("{name}: {e}"))?;
        let body_open = close + src[close..].find('{').ok_or("kernel without body")?;
        let body_close = matching(&src, body_open)?;
        let threadgroup = threadgroup_arrays(&src[body_open..body_close], &constants).map_err(|e| format!("{name}: {e}"))?;
        kernels.push(Kernel { name, params, threadgroup });
        at = body_close;
    }
    let threadgroup_decls = src.split(['{', '}', ';']).filter(|s| tg_decl(s).is_some()).count();
    Ok(MslFile { path, text, kernels, constants, structs, threadgroup_decls })
}

/// `threadgroup T name[expr]` (one declaration statement, without the `;`).
fn tg_decl(stmt: &str) -> Option<(String, String, String)> {
    let s = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
    let idx = s.find("threadgroup ")?;
    let rest = &s[idx + "threadgroup ".len()..];
    if s[..idx].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let (ty, rest) = rest.split_once(' ')?;
    let (name, rest) = rest.split_once('[')?;
    let expr = rest.strip_suffix(']')?;
    let ident = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ident(ty) && ident(name.trim())).then(|| (ty.to_string(), name.trim().to_string(), expr.trim().to_string()))
}

fn threadgroup_arrays(body: &str, constants: &BTreeMap<String, u64>) -> Result<Vec<TgArray>, String> {
    let mut v = Vec::new();
    for stmt in body.split(['{', '}', ';']) {
        let Some((ty, name, count_expr)) = tg_decl(stmt) else {
            continue;
        };
        let size = type_size(&ty).ok_or_else(|| format!("threadgroup {name}: unknown element type {ty}"))?;
        let count = eval(&count_expr, constants).map_err(|e| format!("threadgroup {name}[{count_expr}]: {e}"))?;
        v.push(TgArray { ty, name, count_expr, bytes: size * count });
    }
    Ok(v)
}

/// Evaluate an array size: integer literals and `constant constexpr uint` names combined with
/// `+`, `*` and parentheses.
pub fn eval(expr: &str, constants: &BTreeMap<String, u64>) -> Result<u64, String> {
    let tokens: Vec<String> = expr.replace('(', " ( ").replace(')', " ) ").replace('+', " + ").replace('*', " * ").split_whitespace().map(str::to_string).collect();
    let mut pos = 0;
    let v = sum(&tokens, &mut pos, constants)?;
    if pos != tokens.len() {
        return Err(format!("unexpected `{}`", tokens[pos]));
    }
    Ok(v)
}

fn sum(t: &[String], pos: &mut usize, c: &BTreeMap<String, u64>) -> Result<u64, String> {
    let mut v = product(t, pos, c)?;
    while t.get(*pos).is_some_and(|s| s == "+") {
        *pos += 1;
        v += product(t, pos, c)?;
    }
    Ok(v)
}

fn product(t: &[String], pos: &mut usize, c: &BTreeMap<String, u64>) -> Result<u64, String> {
    let mut v = atom(t, pos, c)?;
    while t.get(*pos).is_some_and(|s| s == "*") {
        *pos += 1;
        v *= atom(t, pos, c)?;
    }
    Ok(v)
}

fn atom(t: &[String], pos: &mut usize, c: &BTreeMap<String, u64>) -> Result<u64, String> {
    let tok = t.get(*pos).ok_or("expression ends early")?;
    *pos += 1;
    if tok == "(" {
        let v = sum(t, pos, c)?;
        if t.get(*pos).map(String::as_str) != Some(")") {
            return Err("missing `)`".into());
        }
        *pos += 1;
        return Ok(v);
    }
    match tok.trim_end_matches(['u', 'U']).parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) => c.get(tok.as_str()).copied().ok_or_else(|| format!("`{tok}` is not a literal or a constant constexpr uint")),
    }
}
