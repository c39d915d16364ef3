//! CPU dequantisers against gguf-py's values, bit for bit (tests/data/formats/*.gguf, made by
//! tools/make_format_golden.py: every weight tensor `w.x` is followed by `w.x.ref`, the F32
//! values gguf-py's `gguf.quants.dequantize` gives for it).

use wgkernels::formats::gguf::{GgmlType, GgufFile, MetaValue};
use wgkernels::formats::{q2_k, q3_k, q4_0, q4_1, q4k, q5_0, q5_1, q5_k, q6_k, FormatError};

type Dequantize = fn(&[u8], &mut [f32]) -> Result<(), FormatError>;

fn q4k_dequantize(bytes: &[u8], out: &mut [f32]) -> Result<(), FormatError> {
    let v = q4k::dequantize_row(&q4k::blocks_from_bytes(bytes)?);
    if v.len() != out.len() {
        return Err(FormatError::NotBlockMultiple { what: "Q4_K output values", len: out.len() as u64, block: q4k::QK_K as u64 });
    }
    out.copy_from_slice(&v);
    Ok(())
}

/// The formats checked here, with their CPU dequantisers.
const FORMATS: &[(&str, GgmlType, Dequantize)] = &[
    ("Q4_0", GgmlType::Q4_0, q4_0::dequantize),
    ("Q4_1", GgmlType::Q4_1, q4_1::dequantize),
    ("Q5_0", GgmlType::Q5_0, q5_0::dequantize),
    ("Q5_1", GgmlType::Q5_1, q5_1::dequantize),
    ("Q2_K", GgmlType::Q2_K, q2_k::dequantize),
    ("Q3_K", GgmlType::Q3_K, q3_k::dequantize),
    ("Q4_K", GgmlType::Q4_K, q4k_dequantize),
    ("Q5_K", GgmlType::Q5_K, q5_k::dequantize),
    ("Q6_K", GgmlType::Q6_K, q6_k::dequantize),
];

fn golden(name: &str) -> GgufFile {
    let path = format!("{}/tests/data/formats/{name}.gguf", env!("CARGO_MANIFEST_DIR"));
    GgufFile::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A weight tensor of a golden file: name, bytes, gguf-py's values, dims.
type Case<'a> = (&'a str, &'a [u8], Vec<f32>, Vec<u64>);

/// Every weight tensor of a file.
fn cases(f: &GgufFile, ty: GgmlType) -> Vec<Case<'_>> {
    let mut out = Vec::new();
    for t in f.tensors().iter().filter(|t| !t.name.ends_with(".ref")) {
        assert_eq!(t.ggml_type, ty, "{}", t.name);
        let r = f.tensor(&format!("{}.ref", t.name)).unwrap_or_else(|| panic!("{}.ref missing", t.name));
        assert_eq!((r.ggml_type, &r.dims), (GgmlType::F32, &t.dims), "{}", t.name);
        out.push((t.name.as_str(), f.tensor_data(t).unwrap(), f32s(f.tensor_data(r).unwrap()), t.dims.clone()));
    }
    out
}

#[test]
fn dequantize_matches_gguf_py_bit_exactly() {
    for &(name, ty, deq) in FORMATS {
        let f = golden(name);
        assert_eq!(f.get("wgk.golden.type"), Some(&MetaValue::String(name.into())));
        let cases = cases(&f, ty);
        assert!(cases.len() >= 4, "{name}: {} weight tensors", cases.len());
        assert!(cases.iter().any(|c| c.3.len() >= 2 && c.3[1] % 2 == 1 && c.3[1] > 1), "{name}: an odd row count");
        let mut checked = 0;
        for (tname, bytes, want, _) in &cases {
            let mut got = vec![f32::NAN; want.len()];
            deq(bytes, &mut got).unwrap_or_else(|e| panic!("{name} {tname}: {e}"));
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{name} {tname} value {i}: {g:e} vs gguf-py {w:e}");
            }
            checked += got.len();
        }
        // The data must be able to catch a wrong formula: many distinct values, both signs.
        let all: Vec<f32> = cases.iter().flat_map(|c| c.2.iter().copied()).collect();
        let mut distinct: Vec<u32> = all.iter().map(|v| v.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() * 16 > all.len(), "{name}: only {} distinct values of {}", distinct.len(), all.len());
        assert!(all.iter().any(|&v| v > 0.0) && all.iter().any(|&v| v < 0.0), "{name}: one sign only");
        println!("{name}: {checked} values bit-exact ({} distinct)", distinct.len());
    }
}

/// Changing any single byte of a block's quant data or scales changes some value: the golden
/// comparison above sees every part of every format.
#[test]
fn every_byte_matters() {
    for &(name, ty, deq) in FORMATS {
        let (blk_w, blk_b) = ty.block_size().unwrap();
        let (blk_w, blk_b) = (blk_w as usize, blk_b as usize);
        let f = golden(name);
        let cases = cases(&f, ty);
        let (_, bytes, want, _) = cases.iter().max_by_key(|c| c.1.len()).unwrap();
        let mut dead = Vec::new();
        for pos in 0..blk_b {
            // Find a block where flipping this byte changes a value (a zero scale can hide some).
            let live = (0..bytes.len() / blk_b).any(|blk| {
                let mut m = bytes.to_vec();
                m[blk * blk_b + pos] ^= 0x5a;
                let mut got = vec![0f32; blk_w];
                deq(&m[blk * blk_b..(blk + 1) * blk_b], &mut got).is_ok_and(|_| got.iter().zip(&want[blk * blk_w..]).any(|(g, w)| g.to_bits() != w.to_bits()))
            });
            if !live {
                dead.push(pos);
            }
        }
        assert!(dead.is_empty(), "{name}: flipping bytes {dead:?} changes nothing");
    }
}

#[test]
fn bad_lengths_and_scales_are_errors() {
    for &(name, ty, deq) in FORMATS {
        let (blk_w, blk_b) = ty.block_size().unwrap();
        let (blk_w, blk_b) = (blk_w as usize, blk_b as usize);
        let f = golden(name);
        let (_, bytes, _, _) = cases(&f, ty).into_iter().max_by_key(|c| c.1.len()).unwrap();
        let n = bytes.len() / blk_b;
        let mut out = vec![0f32; n * blk_w];
        assert!(matches!(deq(&bytes[..bytes.len() - 1], &mut out), Err(FormatError::NotBlockMultiple { .. })), "{name}: truncated");
        assert!(deq(bytes, &mut out[..n * blk_w - 1]).is_err(), "{name}: short output");
        assert!(deq(&[], &mut []).is_ok(), "{name}: empty");
    }
    // A non-finite f16 scale anywhere it can sit.
    let scale_offsets: &[(&str, GgmlType, Dequantize, &[usize])] = &[
        ("Q4_0", GgmlType::Q4_0, q4_0::dequantize, &[0]),
        ("Q4_1", GgmlType::Q4_1, q4_1::dequantize, &[0, 2]),
        ("Q5_0", GgmlType::Q5_0, q5_0::dequantize, &[0]),
        ("Q5_1", GgmlType::Q5_1, q5_1::dequantize, &[0, 2]),
        ("Q2_K", GgmlType::Q2_K, q2_k::dequantize, &[80, 82]),
        ("Q3_K", GgmlType::Q3_K, q3_k::dequantize, &[108]),
        ("Q5_K", GgmlType::Q5_K, q5_k::dequantize, &[0, 2]),
        ("Q6_K", GgmlType::Q6_K, q6_k::dequantize, &[208]),
    ];
    for &(name, ty, deq, offsets) in scale_offsets {
        let (blk_w, blk_b) = ty.block_size().unwrap();
        let (blk_w, blk_b) = (blk_w as usize, blk_b as usize);
        let f = golden(name);
        let (_, bytes, _, _) = cases(&f, ty).into_iter().max_by_key(|c| c.1.len()).unwrap();
        let mut out = vec![0f32; bytes.len() / blk_b * blk_w];
        for &at in offsets {
            for bits in [0x7c00u16, 0xfc00, 0x7e00, 0x7c01] {
                let mut m = bytes.to_vec();
                m[blk_b + at..blk_b + at + 2].copy_from_slice(&bits.to_le_bytes());
                let r = deq(&m, &mut out);
                assert!(matches!(r, Err(FormatError::NonFinite { index }) if index == blk_w), "{name} offset {at} bits {bits:#x}: {r:?}");
            }
        }
    }
}
