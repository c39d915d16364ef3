//! Chat: a conversation rendered with the model's own chat template, generated turn by turn on
//! one [`Session`] whose KV cache carries the conversation from turn to turn.
//!
//! **The template.** A GGUF file carries its model's chat template as the Jinja source in
//! `tokenizer.chat_template`. [`ChatTemplate`] renders it as Hugging Face's `apply_chat_template`
//! does (the reference the template's authors wrote it for): Jinja with `trim_blocks` and
//! `lstrip_blocks`, the variables `messages` (each a map of `role` and `content`),
//! `add_generation_prompt`, `bos_token` and `eos_token` (the texts of the vocabulary's BOS and EOS
//! tokens), `tools` and `documents` (none), the functions `raise_exception(message)` (an error
//! naming the message: e.g. a template that refuses a system role) and `strftime_now(format)`
//! (the local time, as Python's `datetime.now().strftime`), the filter `tojson` as Python's `json.dumps`
//! (no HTML escaping; `indent`, `separators`, `sort_keys`), and Python's string, list and dict
//! methods (`startswith`, `strip`, `split`, `items`, ...); booleans and none print as Python's
//! `True`, `False` and `None`. A template that does not parse, or
//! fails while rendering, is [`ModelError::ChatTemplate`] with the engine's description and line.
//! A file without a template has no [`ChatTemplate`]; a [`Chat`] then uses the messages' raw
//! text, one message per line, and says so ([`Chat::template`] is `None`).
//!
//! **A turn** ([`Chat::reply`]): the whole conversation is rendered again with the generation
//! prompt and tokenised (special-token text becomes those tokens; BOS is prepended where the
//! vocabulary adds one and the rendering does not already start with it). Only what the cache
//! does not hold yet is run: the tokens after the cached ones when the cached tokens are a prefix
//! of the new ones, else the text after the cached text when that is a prefix of the new text
//! (the model's own reply tokens stay in the cache even where the text would tokenise
//! differently), else (a template that rewrites earlier turns, e.g. dropping a reasoning block,
//! or a conversation edited or started anew) the longest common prefix of the cached tokens and
//! the new ones stays in the cache ([`Session::truncate`]) and what follows it runs. Generation stops at any
//! end-of-generation token of the vocabulary
//! ([`crate::model::tokenizer::Tokenizer::eog_tokens`]: the EOS, EOT and EOM ids of the file and
//! the end-of-turn tokens it names, as llama.cpp marks them), at a stop string,
//! at the token limit, or when the cache is full; the reply (without the end-of-generation token
//! or the stop string) joins the conversation as the assistant's message.
//!
//! ```
//! use wgkernels::{Context, ContextOptions};
//! use wgkernels::model::chat::{Chat, Message};
//! use wgkernels::model::{tokenizer::Tokenizer, Model, Sampler, SamplerConfig, Session, SessionOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::new_blocking(ContextOptions::from_env()?)?;
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models/qwen3-tiny-q4_k_m.gguf");
//! let model = Model::open(&ctx, path, &mut |_| {})?; // a random-weight Qwen3 with its template
//! let tok = Tokenizer::from_gguf(&model.file)?;
//! let mut session = Session::new(&ctx, &model, SessionOptions { context: 512, ..Default::default() })?;
//! let mut sampler = Sampler::new(SamplerConfig::default())?;
//! let mut chat = Chat::from_gguf(&model.file, &tok)?;
//! chat.push(Message::system("You are a helpful assistant."));
//! for question in ["What is the capital of France?", "And of Italy?"] {
//!     let reply = chat.reply(&ctx, &model, &mut session, &tok, &mut sampler, question, 16, |text| {
//!         print!("{text}");
//!         Ok(true)
//!     })?;
//!     println!("\n[{:?}, {} tokens run, {} reused]", reply.stop, reply.prompt_tokens, reply.reused_tokens);
//! }
//! # Ok(()) }
//! ```

use super::error::{ModelError, Result};
use super::tokenizer::{TokenType, Tokenizer, TokenizerKind};
use super::{Model, Sampler, Session};
use crate::context::Context;
use crate::formats::gguf::GgufFile;
use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, ErrorKind, Value};

/// The metadata key of the chat template.
pub const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant` (or any role the template knows).
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// A compiled chat template (see the [module docs](self) for what it sees).
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("bos", &self.bos).field("eos", &self.eos).finish_non_exhaustive()
    }
}

/// The template's name inside its environment (error messages say `(in chat_template:LINE)`).
const NAME: &str = "chat_template";

fn template_error(e: minijinja::Error) -> ModelError {
    ModelError::ChatTemplate(e.to_string())
}

impl ChatTemplate {
    /// Compiles `source` with the texts of the BOS and EOS tokens it may print. A template that
    /// does not parse is [`ModelError::ChatTemplate`].
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().map_err(template_error)?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        // Printed as Python prints them (`True`, `False`, `None`).
        env.set_formatter(|out, state, value| {
            let python = match value.kind() {
                ValueKind::Bool if value.is_true() => "True",
                ValueKind::Bool => "False",
                ValueKind::None => "None",
                _ => return minijinja::escape_formatter(out, state, value),
            };
            Ok(out.write_str(python)?)
        });
        env.add_function("raise_exception", |message: String| -> std::result::Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("raise_exception: {message}")))
        });
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_string()).map_err(template_error)?;
        Ok(ChatTemplate { env, bos: bos_token.to_string(), eos: eos_token.to_string() })
    }

    /// The file's template with its vocabulary's BOS and EOS texts (empty where the vocabulary
    /// has none); `None` where the file has no `tokenizer.chat_template`.
    pub fn from_gguf(file: &GgufFile, tok: &Tokenizer) -> Result<Option<ChatTemplate>> {
        let Some(v) = file.get(TEMPLATE_KEY) else { return Ok(None) };
        let source = v.as_str().ok_or_else(|| ModelError::BadKey { key: TEMPLATE_KEY.into(), reason: "not a string".into() })?;
        let text = |id: Option<u32>| -> Result<String> {
            Ok(match id {
                Some(id) => tok.token_text(id)?.to_string(),
                None => String::new(),
            })
        };
        Ok(Some(ChatTemplate::new(source, &text(tok.bos())?, &text(tok.eos())?)?))
    }

    /// Renders `messages`, with the generation prompt (the start of the assistant's turn) when
    /// `add_generation_prompt`; `strftime_now` gives the current local time, as transformers'
    /// `datetime.now().strftime(format)` and llama.cpp's `strftime` of `localtime` do (UTC where
    /// the local time zone is not read: targets other than Linux, Android, Apple's and the BSDs).
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        self.render_at(messages, add_generation_prompt, now.saturating_add(local_utc_offset(now)))
    }

    /// [`ChatTemplate::render`] with `strftime_now` at the civil time `unix_seconds` seconds after
    /// 1970-01-01 00:00 (a Unix time prints as UTC; add a UTC offset for a local time), for
    /// renderings that do not depend on the day.
    pub fn render_at(&self, messages: &[Message], add_generation_prompt: bool, unix_seconds: i64) -> Result<String> {
        let tmpl = self.env.get_template(NAME).map_err(template_error)?;
        let messages: Vec<Value> = messages.iter().map(|m| Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())])).collect();
        let strftime_now = Value::from_function(move |format: String| strftime(&format, unix_seconds));
        let ctx = Value::from_pairs([
            ("messages", Value::from(messages)),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("bos_token", Value::from(self.bos.as_str())),
            ("eos_token", Value::from(self.eos.as_str())),
            ("tools", Value::from(())),
            ("documents", Value::from(())),
            ("strftime_now", strftime_now),
        ]);
        tmpl.render(ctx).map_err(template_error)
    }
}

/// The `tojson` filter as Python's `json.dumps(value, ensure_ascii=False, indent=..,
/// separators=.., sort_keys=..)`.
fn tojson(value: &Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let (item, key) = match &separators {
        Some(s) if !s.is_none() => {
            let part = |i| s.get_item_by_index(i).ok().and_then(|v| v.as_str().map(str::to_string));
            match (part(0), part(1)) {
                (Some(a), Some(b)) => (a, b),
                _ => return Err(minijinja::Error::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings")),
            }
        }
        _ => (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()),
    };
    let mut out = String::new();
    let json = Json { indent, sort_keys: sort_keys.unwrap_or(false), item, key };
    json.write(value, 0, &mut out)?;
    Ok(Value::from(out))
}

struct Json {
    indent: Option<usize>,
    sort_keys: bool,
    item: String,
    key: String,
}

impl Json {
    fn newline(&self, level: usize, out: &mut String) {
        if let Some(n) = self.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    }

    fn write(&self, v: &Value, level: usize, out: &mut String) -> std::result::Result<(), minijinja::Error> {
        match v.kind() {
            ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&v.to_string()),
            ValueKind::String => json_string(v.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.block('[', ']', items.len(), level, out, |i, out| self.write(&items[i], level + 1, out))?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort();
                }
                self.block('{', '}', keys.len(), level, out, |i, out| {
                    let k = &keys[i];
                    match k.as_str() {
                        Some(s) => json_string(s, out),
                        None => json_string(&k.to_string(), out),
                    }
                    out.push_str(&self.key);
                    self.write(&v.get_item(k)?, level + 1, out)
                })?;
            }
            kind => return Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("tojson: a value of kind {kind} is not JSON serialisable"))),
        }
        Ok(())
    }

    /// `open`, the `n` items separated and indented, `close`.
    fn block(
        &self,
        open: char,
        close: char,
        n: usize,
        level: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> std::result::Result<(), minijinja::Error>,
    ) -> std::result::Result<(), minijinja::Error> {
        out.push(open);
        for i in 0..n {
            if i > 0 {
                out.push_str(&self.item);
            }
            self.newline(level + 1, out);
            item(i, out)?;
        }
        if n > 0 {
            self.newline(level, out);
        }
        out.push(close);
        Ok(())
    }
}

/// A JSON string as Python writes it with `ensure_ascii=False`.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The local time zone's offset from UTC at the Unix time `t`, in seconds (`localtime_r`'s
/// `tm_gmtoff`; the zone from `TZ` or the system's); 0 where it cannot be read.
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
fn local_utc_offset(t: i64) -> i64 {
    let Some(t) = libc::time_t::try_from(t).ok() else { return 0 };
    // SAFETY: `localtime_r` reads `t` and writes only the `tm` it is given, both valid for the
    // call; an all-zero `tm` is a valid value of the plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    // `tm_gmtoff` is a C long: i64 here, i32 on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let offset = i64::from(tm.tm_gmtoff);
    if ok {
        offset
    } else {
        0
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd")))]
fn local_utc_offset(_t: i64) -> i64 {
    0
}

/// `format` as Python's `strftime` for the civil time `unix_seconds` seconds after 1970-01-01
/// 00:00 (the C locale's names); an unknown directive is kept as written.
fn strftime(format: &str, unix_seconds: i64) -> String {
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let (y, m, d) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = (days + 3).rem_euclid(7) as usize;
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let yday = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][m as usize - 1] + d + i64::from(leap && m > 2);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = chars.next() else {
            out.push('%');
            break;
        };
        let text = match f {
            'd' => format!("{d:02}"),
            'e' => format!("{d:2}"),
            'm' => format!("{m:02}"),
            'Y' => format!("{y}"),
            'y' => format!("{:02}", y.rem_euclid(100)),
            'b' | 'h' => MONTHS[m as usize - 1][..3].to_string(),
            'B' => MONTHS[m as usize - 1].to_string(),
            'a' => DAYS[weekday][..3].to_string(),
            'A' => DAYS[weekday].to_string(),
            'w' => format!("{}", (weekday + 1) % 7),
            'j' => format!("{yday:03}"),
            'H' => format!("{h:02}"),
            'I' => format!("{:02}", (h + 11) % 12 + 1),
            'p' => (if h < 12 { "AM" } else { "PM" }).to_string(),
            'M' => format!("{mi:02}"),
            'S' => format!("{s:02}"),
            'F' => format!("{y}-{m:02}-{d:02}"),
            'T' => format!("{h:02}:{mi:02}:{s:02}"),
            '%' => "%".to_string(),
            other => format!("%{other}"),
        };
        out.push_str(&text);
    }
    out
}

/// (year, month 1..=12, day 1..=31) of the day `days` after 1970-01-01 (proleptic Gregorian):
/// days counted in 400-year eras of 146097 days, each era's years starting in March.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Holds back streamed text that may be the start of a stop string, and finds the first stop
/// string in the text.
#[derive(Clone, Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
}

impl StopStrings {
    /// Empty strings are ignored.
    pub fn new(stops: &[String]) -> StopStrings {
        StopStrings { stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(), held: String::new() }
    }

    /// Appends `text`; returns the text that can be shown now and the stop string that ended
    /// it, if one did (the text then ends before the stop string; what follows is dropped; of
    /// two stop strings the one that starts first wins, the longer at the same place).
    pub fn push(&mut self, text: &str) -> (String, Option<String>) {
        self.held.push_str(text);
        let first = self.stops.iter().filter_map(|s| self.held.find(s.as_str()).map(|at| (at, std::cmp::Reverse(s.len()), s))).min();
        if let Some((at, _, s)) = first {
            let out = self.held[..at].to_string();
            let s = s.clone();
            self.held.clear();
            return (out, Some(s));
        }
        // Keep the longest tail that a stop string starts with.
        let keep = self.stops.iter().flat_map(|s| (1..s.len()).rev().filter(|&n| s.is_char_boundary(n) && self.held.ends_with(&s[..n])).take(1)).max().unwrap_or(0);
        let out = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (out, None)
    }

    /// The text held back (no stop string came).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// Why a reply ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// An end-of-generation token (this id).
    EndOfGeneration(u32),
    /// A stop string (this one) appeared in the text.
    StopString(String),
    /// The token limit of the call.
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
    /// The text callback returned `false`.
    Cancelled,
}

/// The outcome of [`Chat::reply`].
#[derive(Clone, Debug)]
pub struct Reply {
    /// The assistant's text (without the end-of-generation token or the stop string).
    pub text: String,
    /// The tokens generated, the one that ended the reply included.
    pub tokens: Vec<u32>,
    pub stop: Stop,
    /// Tokens of the conversation run this turn before generating.
    pub prompt_tokens: usize,
    /// Tokens of the conversation found in the cache and not run again.
    pub reused_tokens: usize,
}

/// A conversation on one [`Session`] (see the [module docs](self)).
#[derive(Debug)]
pub struct Chat {
    template: Option<ChatTemplate>,
    messages: Vec<Message>,
    stop: Vec<String>,
    /// The tokens in the session's cache, in order, and the text they stand for.
    cached: Vec<u32>,
    cached_text: Vec<u8>,
}

impl Chat {
    /// A conversation rendered with `template`, or (`None`) the messages' raw text.
    pub fn new(template: Option<ChatTemplate>) -> Chat {
        Chat { template, messages: Vec::new(), stop: Vec::new(), cached: Vec::new(), cached_text: Vec::new() }
    }

    /// A conversation with the file's own template ([`ChatTemplate::from_gguf`]).
    pub fn from_gguf(file: &GgufFile, tok: &Tokenizer) -> Result<Chat> {
        Ok(Chat::new(ChatTemplate::from_gguf(file, tok)?))
    }

    /// The template; `None`: the file has none and the messages' raw text is used.
    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// Stop strings for every later reply (besides the end-of-generation tokens). They are found
    /// in the reply's text, where control tokens print nothing: a stop string never matches one.
    pub fn set_stop_strings(&mut self, stops: Vec<String>) {
        self.stop = stops;
    }

    /// Appends a message (a system prompt, or earlier turns).
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tokens the session's cache holds for this conversation, in order (empty when the next
    /// reply runs everything again).
    pub fn cached_tokens(&self) -> &[u32] {
        &self.cached
    }

    /// Forgets the messages (the next reply keeps in the cache only what the new conversation's
    /// tokens share with the cached ones from the start, and runs the rest).
    pub fn clear(&mut self) {
        self.messages.clear();
    }

    /// The conversation as the model sees it: the template's rendering, or without a template
    /// the messages' contents one per line (the generation prompt is then nothing).
    pub fn prompt(&self, add_generation_prompt: bool) -> Result<String> {
        match &self.template {
            Some(t) => t.render(&self.messages, add_generation_prompt),
            None => Ok(self.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")),
        }
    }

    /// The tokens of a rendered conversation: special-token text as those tokens, BOS first
    /// where the vocabulary adds one and the text does not start with it.
    pub fn tokenize(tok: &Tokenizer, text: &str) -> Result<Vec<u32>> {
        let mut ids = tok.encode_with(text, false, true)?;
        if let (true, Some(bos)) = (tok.add_bos(), tok.bos()) {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }

    /// What to run this turn for the conversation `text` (tokens `full`), and how many of the
    /// cached tokens stay: the tokens after the cached ones, or the tokens of the text after the
    /// cached text (all the cached tokens stay), or else the tokens after the longest common
    /// prefix of the cached tokens and `full` (at least the last token runs, for its logits).
    fn plan(&self, tok: &Tokenizer, session: &Session, text: &str, full: &[u32]) -> Result<(Vec<u32>, usize)> {
        let n = self.cached.len();
        if session.kv().pos() != n || n == 0 {
            return Ok((full.to_vec(), 0));
        }
        if full.len() > n && full.starts_with(&self.cached) {
            return Ok((full[n..].to_vec(), n));
        }
        let bytes = self.cached_text.len();
        if text.len() > bytes && text.as_bytes().starts_with(&self.cached_text) && text.is_char_boundary(bytes) {
            let ids = tok.encode_with(&text[bytes..], false, true)?;
            // SentencePiece puts a space before text that starts the input: right only where the
            // suffix starts with a special token.
            let spm_space =
                matches!(tok.kind(), TokenizerKind::SentencePiece) && !matches!(ids.first().map(|&t| tok.token_type(t)), Some(Ok(TokenType::Control | TokenType::UserDefined)));
            if !ids.is_empty() && !spm_space {
                return Ok((ids, n));
            }
        }
        let keep = self.cached.iter().zip(full).take_while(|(a, b)| a == b).count().min(full.len().saturating_sub(1));
        Ok((full[keep..].to_vec(), keep))
    }

    /// Adds the user's message, runs what the cache does not hold of the conversation, and
    /// generates the assistant's reply: at most `max_tokens` tokens, `sampler`'s choice (made on
    /// the GPU at temperature 0 or with a top-k of 1 to [`super::ops::TOP_K_MAX`],
    /// [`Session::decode_sampled`]; else drawn on the CPU from the read-back logits,
    /// [`Session::decode_stream`]), `on_text` getting the text as it
    /// comes (held back while it may be the start of a stop string; returning `false` stops).
    /// The reply joins the conversation. On an error the user's message is taken back out and
    /// the conversation stays as it was (the next call runs the whole conversation again).
    #[allow(clippy::too_many_arguments)]
    pub fn reply(
        &mut self,
        ctx: &Context,
        model: &Model,
        session: &mut Session,
        tok: &Tokenizer,
        sampler: &mut Sampler,
        user: &str,
        max_tokens: usize,
        mut on_text: impl FnMut(&str) -> Result<bool>,
    ) -> Result<Reply> {
        self.messages.push(Message::user(user));
        // The turn, as a closure so that its errors come here and the message goes out again.
        let r = (|| -> Result<Reply> {
            let text = self.prompt(true)?;
            let full = Self::tokenize(tok, &text)?;
            if full.is_empty() {
                return Err(ModelError::Argument("the conversation tokenises to nothing and the vocabulary adds no BOS".into()));
            }
            let (feed, reused) = self.plan(tok, session, &text, &full)?;
            session.truncate(reused)?;
            self.cached.truncate(reused);
            // The cache and the record of it agree again only once the prefill ran.
            self.cached_text.clear();
            let mut cached = std::mem::take(&mut self.cached);
            let logits = session.prefill(ctx, model, &feed)?;
            cached.extend_from_slice(&feed);
            let mut reply = Reply { text: String::new(), tokens: Vec::new(), stop: Stop::MaxTokens, prompt_tokens: feed.len(), reused_tokens: reused };
            let mut stops = StopStrings::new(&self.stop);
            let mut dec = tok.decoder(false);
            let mut failed = None;
            // Each generated token: end of generation, a stop string, the caller, the limit.
            let mut step = |t: u32, reply: &mut Reply| -> Result<bool> {
                reply.tokens.push(t);
                if tok.is_eog(t) {
                    reply.stop = Stop::EndOfGeneration(t);
                    return Ok(false);
                }
                let (shown, stopped) = stops.push(&dec.push(t)?);
                reply.text.push_str(&shown);
                let go_on = shown.is_empty() || on_text(&shown)?;
                if let Some(s) = stopped {
                    reply.stop = Stop::StopString(s);
                    return Ok(false);
                }
                if !go_on {
                    reply.stop = Stop::Cancelled;
                }
                Ok(go_on && reply.tokens.len() < max_tokens)
            };
            if max_tokens > 0 {
                let k = sampler.config().top_k;
                if sampler.config().temperature == 0.0 || (1..=super::ops::TOP_K_MAX).contains(&k) {
                    session.decode_sampled(ctx, model, sampler, max_tokens, |t| step(t, &mut reply))?;
                } else if session.kv().remaining() > 0 {
                    let first = sampler.sample(&logits)?;
                    if step(first, &mut reply)? {
                        session.decode_stream(ctx, model, first, |logits| {
                            let t = match sampler.sample(logits) {
                                Ok(t) => t,
                                Err(e) => {
                                    failed = Some(e);
                                    return Ok(None);
                                }
                            };
                            Ok(step(t, &mut reply)?.then_some(t))
                        })?;
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if reply.stop == Stop::MaxTokens && reply.tokens.len() < max_tokens {
                reply.stop = Stop::ContextFull;
            }
            if !matches!(reply.stop, Stop::StopString(_)) {
                let rest = stops.finish() + &dec.finish();
                if !rest.is_empty() {
                    reply.text.push_str(&rest);
                    on_text(&rest)?;
                }
            }
            // The cache holds the conversation and every generated token but the last: record them
            // and their text (else the record stays empty and the next turn runs everything again).
            if let Some(k) = session.kv().pos().checked_sub(cached.len()).filter(|&k| k <= reply.tokens.len()) {
                let mut bytes = text.into_bytes();
                for &t in &reply.tokens[..k] {
                    bytes.extend_from_slice(tok.piece(t, true)?);
                }
                cached.extend_from_slice(&reply.tokens[..k]);
                self.cached = cached;
                self.cached_text = bytes;
            }
            Ok(reply)
        })();
        match &r {
            Ok(reply) => self.messages.push(Message::assistant(reply.text.clone())),
            Err(_) => {
                self.messages.pop();
            }
        }
        r
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The local UTC offset is the one `date` prints for the same zone (`TZ` or the system's):
    /// run with e.g. `TZ=Asia/Kolkata` (+05:30) or `TZ=America/New_York` to see a non-zero one.
    #[test]
    fn local_utc_offset_is_dates() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let Ok(out) = std::process::Command::new("date").arg("+%z").output() else { return };
        let z = String::from_utf8(out.stdout).unwrap();
        let z = z.trim();
        let (sign, hm) = z.split_at(1);
        let secs = hm[..2].parse::<i64>().unwrap() * 3600 + hm[2..4].parse::<i64>().unwrap() * 60;
        let want = if sign == "-" { -secs } else { secs };
        assert_eq!(local_utc_offset(now), want, "date +%z: {z}");
        // The civil time strftime_now prints is the Unix time shifted by it.
        assert_eq!(strftime("%F %T", 86_400 + 3_723), "1970-01-02 01:02:03");
    }
}
