//! Q4_K dequantisation against gguf-py's values (tests/data, made by
//! tools/make_q4k_golden.py), the quantiser's error, and GGUF reader robustness.

use wgkernels::formats::gguf::{GgmlType, GgufFile, GgufWriter, MetaArray, MetaValue, TensorInfo, ValueType, MAX_ARRAY_DEPTH};
use wgkernels::formats::q4k::{self, BlockQ4K, QK_K};
use wgkernels::formats::FormatError;

fn data_path(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn golden() -> (Vec<u8>, GgufFile) {
    let bytes = std::fs::read(data_path("q4k_golden.gguf")).expect("golden GGUF");
    let file = GgufFile::parse(&bytes).expect("golden GGUF parses");
    (bytes, file)
}

#[test]
fn golden_metadata_and_tensor_infos() {
    let (_, f) = golden();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    let get = |k: &str| f.get(k).unwrap_or_else(|| panic!("missing {k}")).clone();
    assert_eq!(get("general.architecture"), MetaValue::String("wgk-test".into()));
    assert_eq!(get("test.u8"), MetaValue::U8(200));
    assert_eq!(get("test.i8"), MetaValue::I8(-100));
    assert_eq!(get("test.u16"), MetaValue::U16(60000));
    assert_eq!(get("test.i16"), MetaValue::I16(-30000));
    assert_eq!(get("test.u32"), MetaValue::U32(4_000_000_000));
    assert_eq!(get("test.i32"), MetaValue::I32(-2_000_000_000));
    assert_eq!(get("test.f32"), MetaValue::F32(0.15625));
    assert_eq!(get("test.bool"), MetaValue::Bool(true));
    assert_eq!(get("test.string"), MetaValue::String("héllo wörld".into()));
    assert_eq!(get("test.u64"), MetaValue::U64(u64::MAX));
    assert_eq!(get("test.i64"), MetaValue::I64(i64::MIN));
    assert_eq!(get("test.f64"), MetaValue::F64(-1.0e300));
    let strs = ["a", "bc", ""].map(|s| MetaValue::String(s.into())).to_vec();
    assert_eq!(get("test.arr_str"), MetaValue::array(ValueType::String, &strs).unwrap());
    assert_eq!(get("test.arr_str").as_array().and_then(|a| a.strings()).map(|s| s.iter().collect::<Vec<_>>()), Some(vec!["a", "bc", ""]));
    let i16s = vec![MetaValue::I16(-1), MetaValue::I16(2), MetaValue::I16(-3)];
    assert_eq!(get("test.arr_i16"), MetaValue::array(ValueType::I16, &i16s).unwrap());
    assert_eq!(get("test.arr_i16"), MetaValue::Array(MetaArray::I16(vec![-1, 2, -3])));
    let i32s = |v: &[i32]| MetaArray::I32(v.to_vec());
    assert_eq!(get("test.arr_nested"), MetaValue::Array(MetaArray::Array(vec![i32s(&[1, 2]), i32s(&[3])])));

    let shapes: Vec<(&str, Vec<u64>, GgmlType)> = f.tensors().iter().map(|t| (t.name.as_str(), t.dims.clone(), t.ggml_type)).collect();
    assert_eq!(
        shapes,
        vec![
            ("blk.0.q4k_a", vec![256, 3], GgmlType::Q4_K),
            ("blk.0.q4k_b", vec![512, 5], GgmlType::Q4_K),
            ("blk.1.q4k_c", vec![768, 2], GgmlType::Q4_K),
            ("blk.1.q4k_3d", vec![256, 2, 2], GgmlType::Q4_K),
            ("f32_tensor", vec![3, 2], GgmlType::F32),
            ("f16_tensor", vec![8, 4], GgmlType::F16),
        ]
    );
    assert_eq!(f.tensor_data(f.tensor("f32_tensor").unwrap()).unwrap().len(), 24);
    assert_eq!(f.tensor_data(f.tensor("f16_tensor").unwrap()).unwrap().len(), 64);
}

#[test]
fn dequant_matches_gguf_py_bit_exactly() {
    let (_, f) = golden();
    let raw = std::fs::read(data_path("q4k_golden_values.f32")).expect("golden values");
    let want: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut at = 0;
    for t in f.tensors().iter().filter(|t| t.ggml_type == GgmlType::Q4_K) {
        let blocks = q4k::blocks_from_bytes(f.tensor_data(t).unwrap()).unwrap();
        assert_eq!(blocks.len() as u64 * QK_K as u64, t.n_elements);
        let got = q4k::dequantize_row(&blocks);
        let exp = &want[at..at + got.len()];
        for (i, (g, e)) in got.iter().zip(exp).enumerate() {
            assert_eq!(g.to_bits(), e.to_bits(), "{} value {i}: {g} vs gguf-py {e}", t.name);
        }
        at += got.len();
    }
    assert_eq!(at, want.len(), "every golden value checked");
}

#[test]
fn quantize_roundtrip_rmse_and_gguf() {
    // Deterministic N(0, 1) samples (xorshift + Box-Muller).
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut uni = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let x: Vec<f32> = (0..QK_K * 128).map(|_| ((-2.0 * uni().ln()).sqrt() * (std::f64::consts::TAU * uni()).cos()) as f32).collect();
    let blocks = q4k::quantize_row(&x).unwrap();
    let y = q4k::dequantize_row(&blocks);
    let sq = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / x.len() as f64;
    let mse = sq(&mut x.iter().zip(&y).map(|(a, b)| ((a - b) as f64).powi(2)));
    let var = sq(&mut x.iter().map(|a| (*a as f64).powi(2)));
    let rel = (mse / var).sqrt();
    println!("Q4_K quantise->dequantise relative RMSE on Gaussian weights: {rel:.4}");
    assert!(rel > 0.01 && rel < 0.1, "relative RMSE {rel}");
    assert!(matches!(q4k::quantize_row(&x[..300]), Err(FormatError::NotBlockMultiple { .. })));

    // Through a GGUF file and back.
    let bytes = GgufWriter::new().tensor("w", &[QK_K as u64 * 4, 32], GgmlType::Q4_K, q4k::blocks_to_bytes(&blocks)).unwrap().to_bytes();
    let f = GgufFile::parse(&bytes).unwrap();
    let back = q4k::blocks_from_bytes(f.tensor_data(&f.tensors()[0]).unwrap()).unwrap();
    assert_eq!(back, blocks);
    let cast: &[BlockQ4K] = bytemuck::cast_slice(&blocks);
    assert_eq!(bytemuck::cast_slice::<_, u8>(cast), &q4k::blocks_to_bytes(&blocks)[..]);
}

/// Hand-built GGUF pieces for corruption tests.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn parse(&self) -> Result<GgufFile, FormatError> {
        GgufFile::parse(&self.0)
    }
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    let (bytes, _) = golden();
    for n in 0..bytes.len() {
        assert!(GgufFile::parse(&bytes[..n]).is_err(), "truncated to {n} bytes parsed");
    }
}

#[test]
fn header_errors() {
    let (bytes, _) = golden();
    let mut b = bytes.clone();
    b[..4].copy_from_slice(b"GGML");
    assert!(matches!(GgufFile::parse(&b), Err(FormatError::BadMagic(m)) if &m == b"GGML"));
    for v in [0u32, 1, 4, u32::MAX] {
        b = bytes.clone();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        assert!(matches!(GgufFile::parse(&b), Err(FormatError::UnsupportedVersion(x)) if x == v));
    }
    b = bytes.clone();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(GgufFile::parse(&b).unwrap().version(), 2);
    for (range, what) in [(8..16, "tensors"), (16..24, "kv")] {
        for huge in [1u64 << 60, u64::MAX, 1 << 20] {
            b = bytes.clone();
            b[range.clone()].copy_from_slice(&huge.to_le_bytes());
            let e = GgufFile::parse(&b).unwrap_err();
            assert!(matches!(e, FormatError::LengthExceedsFile { .. }), "{what} {huge}: {e}");
        }
    }
}

fn kv_file(key: &str, ty: u32, payload: &[u8]) -> Raw {
    let mut r = Raw::header(3, 0, 1);
    r.str(key).u32(ty);
    r.0.extend_from_slice(payload);
    r
}

#[test]
fn metadata_errors() {
    let e = kv_file("k", 13, &[0; 8]).parse().unwrap_err();
    assert!(matches!(e, FormatError::UnknownValueType(13)), "{e}");
    let e = kv_file("k", u32::MAX, &[0; 8]).parse().unwrap_err();
    assert!(matches!(e, FormatError::UnknownValueType(_)), "{e}");
    // String length 2^50 and u64::MAX, in a key and in a value.
    for len in [1u64 << 50, u64::MAX] {
        let e = kv_file("k", 8, &len.to_le_bytes()).parse().unwrap_err();
        assert!(matches!(e, FormatError::LengthExceedsFile { .. }), "{e}");
        let mut r = Raw::header(3, 0, 1);
        r.u64(len).u32(4).u32(0);
        assert!(matches!(r.parse(), Err(FormatError::LengthExceedsFile { .. })));
    }
    let mut arr = Raw::default();
    arr.u32(4).u64(1 << 61);
    let e = kv_file("k", 9, &arr.0).parse().unwrap_err();
    assert!(matches!(e, FormatError::LengthExceedsFile { .. }), "{e}");
    arr = Raw::default();
    arr.u32(77).u64(1);
    assert!(matches!(kv_file("k", 9, &arr.0).parse(), Err(FormatError::UnknownValueType(77))));
    // Arrays nested past the limit (each level: type = array, count = 1).
    arr = Raw::default();
    for _ in 0..MAX_ARRAY_DEPTH + 2 {
        arr.u32(9).u64(1);
    }
    arr.u32(0).u64(0);
    let e = kv_file("k", 9, &arr.0).parse().unwrap_err();
    assert!(matches!(e, FormatError::NestingTooDeep { .. }), "{e}");
    assert!(matches!(kv_file("k", 7, &[2]).parse(), Err(FormatError::InvalidBool(2))));
    let mut bad_utf8 = Raw::default();
    bad_utf8.u64(2).0.extend_from_slice(&[0xff, 0xfe]);
    let e = kv_file("k", 8, &bad_utf8.0).parse().unwrap_err();
    assert!(matches!(e, FormatError::InvalidUtf8 { .. }), "{e}");
    let mut dup = Raw::header(3, 0, 2);
    dup.str("k").u32(0).0.push(1);
    dup.str("k").u32(0).0.push(2);
    assert!(matches!(dup.parse(), Err(FormatError::DuplicateKey(_))));
}

#[test]
fn alignment_errors() {
    for a in [0u32, 3, 48] {
        let e = kv_file("general.alignment", 4, &a.to_le_bytes()).parse().unwrap_err();
        assert!(matches!(e, FormatError::BadAlignment(x) if x == a as u64), "{a}: {e}");
    }
    let mut s = Raw::default();
    s.str("32");
    let e = kv_file("general.alignment", 8, &s.0).parse().unwrap_err();
    assert!(matches!(e, FormatError::WrongMetadataType { .. }), "{e}");
    let f = kv_file("general.alignment", 4, &64u32.to_le_bytes()).parse().unwrap();
    assert_eq!(f.alignment(), 64);
    assert!(GgufWriter::new().alignment(24).is_err());
}

/// One F32 tensor `t` of `dims` at `offset`, with `data_len` data bytes after padding.
fn tensor_file(dims: &[u64], ty: u32, offset: u64, data_len: usize) -> Raw {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", dims, ty, offset);
    r.0.resize(r.0.len().div_ceil(32) * 32 + data_len, 0);
    r
}

#[test]
fn tensor_info_errors() {
    assert!(tensor_file(&[4, 2], 0, 0, 32).parse().is_ok());
    let e = tensor_file(&[4, 2], 0, 0, 31).parse().unwrap_err();
    assert!(matches!(e, FormatError::TensorOutOfRange { .. }), "{e}");
    let e = tensor_file(&[4, 2], 0, 32, 32).parse().unwrap_err();
    assert!(matches!(e, FormatError::TensorOutOfRange { .. }), "{e}");
    let e = tensor_file(&[4, 2], 0, u64::MAX - 31, 32).parse().unwrap_err();
    assert!(matches!(e, FormatError::TensorOutOfRange { .. }), "{e}");
    let e = tensor_file(&[4, 2], 0, 8, 64).parse().unwrap_err();
    assert!(matches!(e, FormatError::MisalignedTensor { .. }), "{e}");
    let e = tensor_file(&[1, 1, 1, 1, 1], 0, 0, 32).parse().unwrap_err();
    assert!(matches!(e, FormatError::TooManyDims { n_dims: 5, .. }), "{e}");
    let e = tensor_file(&[1 << 32, 1 << 32], 0, 0, 32).parse().unwrap_err();
    assert!(matches!(e, FormatError::ShapeOverflow { .. }), "{e}");
    let e = tensor_file(&[1 << 62], 0, 0, 32).parse().unwrap_err(); // 2^64 bytes of f32
    assert!(matches!(e, FormatError::ShapeOverflow { .. }), "{e}");
    let e = tensor_file(&[100, 1], 12, 0, 32).parse().unwrap_err(); // Q4_K needs ne0 % 256 == 0
    assert!(matches!(e, FormatError::BadTensorShape { .. }), "{e}");
    let mut r = Raw::header(3, 1, 0);
    r.str("t").u32(u32::MAX).u64(1).u32(0).u64(0); // n_dims = 2^32 - 1
    assert!(matches!(r.parse(), Err(FormatError::TooManyDims { .. })));
    // A zero-sized tensor in a file that ends inside the padding before the data section
    // (found by the fuzzer).
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[0], 0, 0);
    let e = r.parse().unwrap_err();
    assert!(matches!(e, FormatError::TensorOutOfRange { .. }), "{e}");
    let mut dup = Raw::header(3, 2, 0);
    dup.tensor("t", &[1], 0, 0).tensor("t", &[1], 0, 32);
    dup.0.resize(128, 0);
    assert!(matches!(dup.parse(), Err(FormatError::DuplicateTensor(_))));

    // tensor_data re-checks bounds for infos that do not come from this file.
    let f = tensor_file(&[4, 2], 0, 0, 32).parse().unwrap();
    let mut info: TensorInfo = f.tensors()[0].clone();
    info.offset = 1 << 40;
    assert!(matches!(f.tensor_data(&info), Err(FormatError::TensorOutOfRange { .. })));
    info.offset = 0;
    info.n_bytes = Some(u64::MAX);
    assert!(matches!(f.tensor_data(&info), Err(FormatError::TensorOutOfRange { .. })));
}

#[test]
fn random_corruption_never_panics() {
    let (bytes, _) = golden();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut ok = 0;
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        let cut = b.len() - (next() % 2 * (next() % b.len() as u64)) as usize;
        if let Ok(f) = GgufFile::parse(&b[..cut]) {
            ok += 1;
            for t in f.tensors() {
                let _ = f.tensor_data(t);
            }
        }
    }
    println!("{ok} of 3000 corrupted files still parsed");
}
