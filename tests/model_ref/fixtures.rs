//! Reading the llama.cpp fixtures under tests/data/models/ (written by
//! tools/make_model_fixtures.py): `key values...` text files and float32 .npy files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The fixture directory.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models")
}

/// Lines of `key values...` (comments `#` skipped): key -> the whitespace-separated values.
pub fn read_keys(path: &Path) -> HashMap<String, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace().map(str::to_string);
            let k = it.next().expect("key");
            (k, it.collect())
        })
        .collect()
}

/// One model of manifest.txt: `model NAME FILE ARCH FTYPE REF VOCAB`.
pub struct FixtureModel {
    pub name: String,
    pub file: String,
    pub arch: String,
    pub ftype: String,
    pub reference: String,
}

pub fn manifest_models() -> Vec<FixtureModel> {
    let path = dir().join("manifest.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (the llama.cpp fixtures are missing)", path.display()));
    text.lines()
        .filter(|l| l.starts_with("model "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            FixtureModel { name: f[1].into(), file: f[2].into(), arch: f[3].into(), ftype: f[4].into(), reference: f[5].into() }
        })
        .collect()
}

pub fn u32s(v: &[String]) -> Vec<u32> {
    v.iter().map(|s| s.parse().expect("integer")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// A float32 C-order .npy file: (shape, values).
pub fn read_npy_f32(bytes: &[u8]) -> (Vec<usize>, Vec<f32>) {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "not an .npy file");
    let (hlen, start) = if bytes[6] == 1 { (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10) } else { (u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize, 12) };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).unwrap();
    assert!(header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"), "need little-endian float32 C order: {header}");
    let shape_txt = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape: Vec<usize> = shape_txt.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    let data: Vec<f32> = bytes[start + hlen..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(data.len(), shape.iter().product::<usize>(), "npy data length");
    (shape, data)
}
