// JSON text for the tests that talk to tools outside Rust (tests/tint.rs, tests/dawn.rs): string
// literals out, numbers in. Not every test uses it.
#![allow(dead_code)]

use std::fmt::Write as _;

/// A JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A pipeline's override values as a JSON object.
pub fn constants(constants: &[(&str, f64)]) -> String {
    let fields: Vec<String> = constants.iter().map(|(k, v)| format!("{}: {v:?}", string(k))).collect();
    format!("{{{}}}", fields.join(", "))
}

/// The number after `"key":` in flat JSON text, if any.
pub fn number(text: &str, key: &str) -> Option<f64> {
    let at = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = text[at..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))).unwrap_or(rest.len());
    rest[..end].parse().ok()
}
