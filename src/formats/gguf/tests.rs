use super::*;

fn all_values() -> Vec<(String, MetaValue)> {
    let strs = |v: &[&str]| MetaArray::String(v.iter().collect());
    vec![
        ("u8".into(), MetaValue::U8(200)),
        ("i8".into(), MetaValue::I8(-100)),
        ("u16".into(), MetaValue::U16(60000)),
        ("i16".into(), MetaValue::I16(-30000)),
        ("u32".into(), MetaValue::U32(4_000_000_000)),
        ("i32".into(), MetaValue::I32(-2_000_000_000)),
        ("f32".into(), MetaValue::F32(1.5)),
        ("bool".into(), MetaValue::Bool(true)),
        ("str".into(), MetaValue::String("héllo".into())),
        ("u64".into(), MetaValue::U64(u64::MAX)),
        ("i64".into(), MetaValue::I64(i64::MIN)),
        ("f64".into(), MetaValue::F64(-0.25)),
        ("arr.str".into(), strs(&["a", "", "ccc"]).into()),
        ("arr.empty".into(), MetaArray::F64(vec![]).into()),
        ("arr.u8".into(), MetaArray::U8(vec![1, 2, 255]).into()),
        ("arr.bool".into(), MetaArray::Bool(vec![true, false]).into()),
        ("arr.nested".into(), MetaArray::Array(vec![strs(&["x"]), strs(&[])]).into()),
    ]
}

#[test]
fn roundtrip_metadata_and_tensors() {
    let mut w = GgufWriter::new().alignment(64).unwrap();
    for (k, v) in all_values() {
        w = w.metadata(k, v);
    }
    let f32_data: Vec<u8> = (0..6u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w = w.tensor("a", &[3, 2], GgmlType::F32, f32_data.clone()).unwrap();
    w = w.tensor("q", &[256, 2], GgmlType::Q4_K, vec![7u8; 288]).unwrap();
    let bytes = w.to_bytes();
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_offset() % 64, 0);
    let mut want = all_values();
    want.push(("general.alignment".into(), MetaValue::U32(64)));
    assert_eq!(f.metadata(), &want[..]);
    assert_eq!(f.get("u64").and_then(MetaValue::as_u64), Some(u64::MAX));
    let a = f.tensor("a").unwrap();
    assert_eq!((a.dims.as_slice(), a.n_elements, a.n_bytes), (&[3u64, 2][..], 6, Some(24)));
    assert_eq!(f.tensor_data(a).unwrap(), &f32_data[..]);
    let q = f.tensor("q").unwrap();
    assert_eq!(q.offset, 64);
    assert_eq!(q.ggml_type, GgmlType::Q4_K);
    assert_eq!(f.tensor_data(q).unwrap(), &[7u8; 288][..]);
}

#[test]
fn ggml_type_table() {
    assert_eq!(GgmlType::from_id(12), GgmlType::Q4_K);
    assert_eq!(GgmlType::Q4_K.block_size(), Some((256, 144)));
    assert_eq!(GgmlType::Q6_K.block_size(), Some((256, 210)));
    assert_eq!(GgmlType::Q8_0.bytes_for(64), Some(68));
    assert_eq!(GgmlType::F16.bytes_for(3), Some(6));
    assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
    assert_eq!(GgmlType::from_id(4), GgmlType::Other(4));
    assert_eq!(GgmlType::Other(4).id(), 4);
    for id in 0..64 {
        assert_eq!(GgmlType::from_id(id).id(), id);
    }
}

#[test]
fn unknown_tensor_type_is_listed_but_unreadable() {
    let mut b = GgufWriter::new().to_bytes();
    b[8..16].copy_from_slice(&1u64.to_le_bytes());
    b.truncate(24);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'x');
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&5u64.to_le_bytes());
    b.extend_from_slice(&99u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    let f = GgufFile::parse(&b).unwrap();
    let t = &f.tensors()[0];
    assert_eq!(t.ggml_type, GgmlType::Other(99));
    assert!(matches!(f.tensor_data(t), Err(FormatError::UnknownTensorType { id: 99, .. })));
}

#[test]
fn header_errors() {
    let good = GgufWriter::new().to_bytes();
    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(GgufFile::parse(&b), Err(FormatError::BadMagic(_))));
    let mut b = good.clone();
    b[4] = 1;
    assert!(matches!(GgufFile::parse(&b), Err(FormatError::UnsupportedVersion(1))));
    let mut b = good.clone();
    b[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(matches!(GgufFile::parse(&b), Err(FormatError::LengthExceedsFile { .. })));
    // Header is 24 bytes; the padding after it is optional when there are no tensors.
    for n in 0..24 {
        assert!(GgufFile::parse(&good[..n]).is_err());
    }
}

#[test]
fn open_maps_the_same_image_that_read_reads() {
    let data: Vec<u8> = (0..512u32).map(|i| (i * 7 + 3) as u8).collect();
    let bytes = GgufWriter::new().metadata("general.name", MetaValue::String("mapped".into())).tensor("q", &[256, 2], GgmlType::Q4_K, data[..288].to_vec()).unwrap().to_bytes();
    let dir = std::env::temp_dir().join(format!("wgkernels-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.gguf");
    std::fs::write(&path, &bytes).unwrap();
    // SAFETY: this test's own file, not written while mapped.
    let mapped = unsafe { GgufFile::open_mapped(&path) }.unwrap();
    let read = GgufFile::read(&path).unwrap();
    assert_eq!(mapped.metadata(), read.metadata());
    assert_eq!(mapped.tensors(), read.tensors());
    let t = mapped.tensor("q").unwrap();
    assert_eq!(mapped.tensor_data(t).unwrap(), &data[..288]);
    assert_eq!(read.tensor_data(t).unwrap(), &data[..288]);
    let opened = GgufFile::open(&path).unwrap();
    assert_eq!(opened.tensor_data(t).unwrap(), &data[..288]);
    // A file truncated after `open` does not affect it (it was read, not mapped).
    std::fs::write(&path, &bytes[..40]).unwrap();
    assert_eq!(opened.tensor_data(opened.tensor("q").unwrap()).unwrap(), &data[..288]);
    drop(mapped);
    // A truncated or empty file is an error through the mapping too, not a fault.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert!(GgufFile::open(&path).is_err());
    assert!(unsafe { GgufFile::open_mapped(&path) }.is_err());
    std::fs::write(&path, b"").unwrap();
    assert!(GgufFile::open(&path).is_err());
    assert!(GgufFile::open(dir.join("missing.gguf")).is_err());
    std::fs::remove_dir_all(&dir).ok();
}
