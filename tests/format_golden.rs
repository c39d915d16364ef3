//! Every registered weight format against gguf-py (tests/data/formats/<TYPE>.gguf, made by
//! tools/make_format_golden.py: every weight tensor `w.x` is followed by `w.x.ref`, the F32
//! values gguf-py's `gguf.quants.dequantize` gives for it): the CPU dequantiser and the GPU
//! dequantise kernel bit for bit, and the GEMV (every supported variant) and GEMM against an f64
//! reference on the files' odd row counts.

mod common;

use wgkernels::formats::gguf::{GgmlType, GgufFile, MetaValue, TensorInfo};
use wgkernels::formats::{self, FormatError, WeightFormat, FORMATS};
use wgkernels::kernels::matmul::{self, kernel_infos, WeightMatrix};
use wgkernels::suite::{compare, guarded_f32, Rng, POISON_F32};
use wgkernels::{reference, ContextOptions, Variant, VariantPolicy};

/// The registered formats without a GGUF type: gguf-py has no data for them, so every test here
/// skips them (checked by `non_gguf_formats_are_skipped`; their CPU and GPU tests are the
/// format modules' own and the harness cases).
const NON_GGUF: &[&str] = &["int4", "int8"];

/// The formats with a GGUF type (the ones this file tests).
fn gguf_formats() -> Vec<&'static WeightFormat> {
    FORMATS.iter().copied().filter(|f| f.ggml_type.is_some()).collect()
}

/// The ggml type of a GGUF format.
fn ty(f: &WeightFormat) -> GgmlType {
    f.ggml_type.unwrap_or_else(|| panic!("{} has no ggml type", f.name))
}

/// The golden file of a format (named after its ggml type).
fn golden(f: &WeightFormat) -> GgufFile {
    let path = format!("{}/tests/data/formats/{:?}.gguf", env!("CARGO_MANIFEST_DIR"), ty(f));
    let file = GgufFile::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(file.get("wgk.golden.type"), Some(&MetaValue::String(format!("{:?}", ty(f)))));
    file
}

#[test]
fn non_gguf_formats_are_skipped() {
    let skipped: Vec<&str> = FORMATS.iter().filter(|f| f.ggml_type.is_none()).map(|f| f.name).collect();
    for name in &skipped {
        eprintln!("format_golden: skipping {name} (no GGUF type, no gguf-py data)");
    }
    assert_eq!(skipped, NON_GGUF, "the formats without a GGUF type (update NON_GGUF when adding one)");
    assert_eq!(gguf_formats().len() + skipped.len(), FORMATS.len());
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A weight tensor of a golden file and gguf-py's values for it.
struct Case<'a> {
    info: &'a TensorInfo,
    bytes: &'a [u8],
    want: Vec<f32>,
}

/// Every weight tensor of a golden file.
fn cases<'a>(file: &'a GgufFile, f: &WeightFormat) -> Vec<Case<'a>> {
    let mut out = Vec::new();
    for t in file.tensors().iter().filter(|t| !t.name.ends_with(".ref")) {
        assert_eq!(t.ggml_type, ty(f), "{}", t.name);
        let r = file.tensor(&format!("{}.ref", t.name)).unwrap_or_else(|| panic!("{}.ref missing", t.name));
        assert_eq!((r.ggml_type, &r.dims), (GgmlType::F32, &t.dims), "{}", t.name);
        out.push(Case { info: t, bytes: file.tensor_data(t).unwrap(), want: f32s(file.tensor_data(r).unwrap()) });
    }
    assert!(out.len() >= 4, "{}: {} weight tensors", f.name, out.len());
    assert!(out.iter().any(|c| c.info.dims.len() >= 2 && c.info.dims[1] % 2 == 1 && c.info.dims[1] > 1), "{}: an odd row count", f.name);
    out
}

#[test]
fn every_format_has_golden_data() {
    let dir = format!("{}/tests/data/formats", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    let mut want: Vec<String> = gguf_formats().iter().map(|f| format!("{:?}.gguf", ty(f))).collect();
    want.sort();
    assert_eq!(files, want, "one golden file per registered format");
}

#[test]
fn cpu_dequantize_matches_gguf_py_bit_exactly() {
    for f in gguf_formats() {
        let file = golden(f);
        let cases = cases(&file, f);
        let mut checked = 0;
        for c in &cases {
            let mut got = vec![f32::NAN; c.want.len()];
            formats::dequantize(ty(f), c.bytes, &mut got).unwrap_or_else(|e| panic!("{} {}: {e}", f.name, c.info.name));
            for (i, (g, w)) in got.iter().zip(&c.want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{} {} value {i}: {g:e} vs gguf-py {w:e}", f.name, c.info.name);
            }
            checked += got.len();
        }
        // The data must be able to catch a wrong formula: many distinct values, both signs.
        let all: Vec<f32> = cases.iter().flat_map(|c| c.want.iter().copied()).collect();
        let mut distinct: Vec<u32> = all.iter().map(|v| v.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() * 16 > all.len(), "{}: only {} distinct values of {}", f.name, distinct.len(), all.len());
        assert!(all.iter().any(|&v| v > 0.0) && all.iter().any(|&v| v < 0.0), "{}: one sign only", f.name);
        println!("{}: {checked} values bit-exact ({} distinct)", f.name, distinct.len());
    }
}

/// Changing any single byte of a block changes some value (in some block of the file): the
/// golden comparison sees every part of every format.
#[test]
fn every_byte_matters() {
    for f in gguf_formats() {
        let file = golden(f);
        let cases = cases(&file, f);
        let c = cases.iter().max_by_key(|c| c.bytes.len()).unwrap();
        let (bw, bb) = (f.block_weights, f.block_bytes);
        let dead: Vec<usize> = (0..bb)
            .filter(|&pos| {
                !(0..c.bytes.len() / bb).any(|blk| {
                    let mut m = c.bytes[blk * bb..(blk + 1) * bb].to_vec();
                    m[pos] ^= 0x5a;
                    let mut got = vec![0f32; bw];
                    formats::dequantize(ty(f), &m, &mut got).is_ok_and(|_| got.iter().zip(&c.want[blk * bw..]).any(|(g, w)| g.to_bits() != w.to_bits()))
                })
            })
            .collect();
        assert!(dead.is_empty(), "{}: flipping bytes {dead:?} changes nothing", f.name);
    }
}

#[test]
fn bad_lengths_and_scales_are_errors() {
    for f in gguf_formats() {
        let file = golden(f);
        let c = cases(&file, f).into_iter().max_by_key(|c| c.bytes.len()).unwrap();
        let n = c.bytes.len() / f.block_bytes * f.block_weights;
        let mut out = vec![0f32; n];
        if f.block_bytes > 1 {
            assert!(matches!(formats::dequantize(ty(f), &c.bytes[..c.bytes.len() - 1], &mut out), Err(FormatError::NotBlockMultiple { .. })), "{}", f.name);
        }
        assert!(matches!(formats::dequantize(ty(f), c.bytes, &mut out[1..]), Err(FormatError::WrongLength { .. })), "{}", f.name);
        assert!(formats::dequantize(ty(f), &[], &mut []).is_ok(), "{}", f.name);
        // Any non-finite f16 at a scale position is caught (found by trying every offset).
        if f.block_weights > 1 {
            let mut found = 0;
            for at in 0..f.block_bytes - 1 {
                let mut m = c.bytes.to_vec();
                m[f.block_bytes + at..f.block_bytes + at + 2].copy_from_slice(&0x7c00u16.to_le_bytes());
                if let Err(e) = f.validate(&m) {
                    assert!(matches!(e, FormatError::NonFiniteScale { block: 1 }), "{} offset {at}: {e}", f.name);
                    found += 1;
                }
            }
            assert!(found >= 1, "{}: no scale position", f.name);
        }
    }
}

#[test]
fn gpu_dequantize_matches_gguf_py_bit_exactly() {
    let ctx = common::context();
    for f in gguf_formats() {
        let file = golden(f);
        for c in cases(&file, f) {
            // Every row length uploads, odd ones of the float formats included.
            let w = WeightMatrix::from_gguf(&ctx, &file, &c.info.name).unwrap_or_else(|e| panic!("{} {} (k = {}): {e}", f.name, c.info.name, c.info.dims[0]));
            let out = guarded_f32(&ctx, c.want.len()).unwrap();
            let mut b = ctx.batch();
            matmul::dequantize(&mut b, &w, &out).unwrap();
            b.run().unwrap();
            let got = ctx.read(&out).unwrap();
            for (i, (g, e)) in got.iter().zip(&c.want).enumerate() {
                assert_eq!(g.to_bits(), e.to_bits(), "{} {} value {i}: GPU {g:e} vs gguf-py {e:e}", f.name, c.info.name);
            }
            assert!(got[c.want.len()..].iter().all(|v| v.to_bits() == POISON_F32), "{} {}: guard overwritten", f.name, c.info.name);
        }
        println!("{}: GPU dequantise bit-exact with gguf-py", f.name);
    }
}

#[test]
fn gpu_gemv_and_gemm_against_f64() {
    let base = common::context();
    let mut rng = Rng::new(Rng::fresh_seed());
    let mut ran = 0;
    for f in gguf_formats() {
        let file = golden(f);
        let infos = kernel_infos(f);
        for v in [Variant::Portable, Variant::Subgroup] {
            if let Err(why) = infos.gemv.support(base.caps(), v) {
                println!("{} {} UNSUPPORTED: {why}", infos.gemv.name, v.name());
                continue;
            }
            let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)));
            for c in cases(&file, f) {
                let w = WeightMatrix::from_gguf(&ctx, &file, &c.info.name).unwrap();
                let (n, k) = (w.n(), w.k());
                let mut mag = vec![0f64; n * k];
                (f.magnitudes)(c.bytes, &mut mag);
                let (wv, mv) = (|r: usize, col: usize| c.want[r * k + col] as f64, |r: usize, col: usize| mag[r * k + col]);
                for m in [1, 3] {
                    if m > 1 && v != Variant::Portable {
                        continue; // the GEMM has one variant
                    }
                    let xs = rng.uniform_vec(m * k, -1.0, 1.0);
                    let (yref, ymag) = if m == 1 { reference::gemv(n, k, wv, mv, &xs) } else { reference::gemm(m, n, k, wv, mv, &xs) };
                    let x = ctx.upload(&xs).unwrap();
                    let y = guarded_f32(&ctx, m * n).unwrap();
                    let mut b = ctx.batch();
                    matmul::matmul(&mut b, &w, &x, &y, m).unwrap();
                    b.run().unwrap();
                    let check = compare(&ctx.read(&y).unwrap(), &yref, &ymag, 1e-5);
                    println!("{} {} {} m={m} n={n} k={k}: {}", f.name, v.name(), c.info.name, check.summary());
                    assert!(check.passed(), "{} {} {} m={m}: {}", f.name, v.name(), c.info.name, check.summary());
                    ran += 1;
                }
            }
        }
    }
    assert!(ran >= gguf_formats().len() * 6, "the Portable variant always runs: {ran}");
}
