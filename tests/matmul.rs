//! The weight-matrix family on GGUF input: every supported format loads from a file and its GEMV
//! matches the CPU (dequantised weights, f64 dot); embedding rows dequantise on the CPU without an
//! upload; bad input (unsupported type, non-finite scale, row length not a multiple of the
//! block, truncated data, wrong byte counts) gives typed errors naming the tensor. The Matrix
//! GEMM runs every format's GEMM grid where the adapter has cooperative matrices and is refused
//! as unsupported everywhere else; `Auto` picks it only from `MATRIX_MIN_M` rows on.

mod common;

use wgkernels::formats::gguf::{GgmlType, GgufFile, GgufWriter};
use wgkernels::formats::{self, format_of, FormatError, FORMATS};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::suite::{compare, run_case, Rng};
use wgkernels::{kernels, ContextOptions, Error, Variant, VariantPolicy};

fn rng() -> fastrand::Rng {
    let seed = Rng::fresh_seed();
    println!("seed {seed}");
    fastrand::Rng::with_seed(seed)
}

/// A file with one 7-row matrix per format (k = 2 blocks, at least 64 columns), plus bad tensors.
fn test_file(r: &mut fastrand::Rng) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for f in FORMATS {
        let k = (64 / f.block_weights).max(2) * f.block_weights;
        w = w.tensor(format!("w.{}", f.name), &[k as u64, 7], f.ggml_type, (f.random_blocks)(r, 7 * k / f.block_weights)).unwrap();
    }
    let q8 = format_of(GgmlType::Q8_0).unwrap();
    let mut nan = (q8.random_blocks)(r, 4);
    nan[34..36].copy_from_slice(&half::f16::NAN.to_bits().to_le_bytes()); // block 1's d
    w = w.tensor("bad.nan", &[64, 2], GgmlType::Q8_0, nan).unwrap();
    w = w.tensor("bad.iq", &[256, 2], GgmlType::IQ2_XXS, vec![0; 2 * 66]).unwrap();
    w = w.tensor("bad.odd", &[6, 2], GgmlType::F16, vec![0; 24]).unwrap();
    w.to_bytes()
}

#[test]
fn every_format_loads_and_multiplies() {
    let ctx = common::context();
    let mut r = rng();
    let file = GgufFile::parse(&test_file(&mut r)).unwrap();
    for f in FORMATS {
        let name = format!("w.{}", f.name);
        let info = file.tensor(&name).unwrap();
        let w = WeightMatrix::from_gguf(&ctx, &file, &name).unwrap();
        assert_eq!((w.n(), w.k(), w.ggml_type()), (7, info.dims[0] as usize, f.ggml_type));
        let k = w.k();
        let xs: Vec<f32> = (0..k).map(|_| r.f32() * 2.0 - 1.0).collect();
        let (x, y) = (ctx.upload(&xs).unwrap(), ctx.alloc::<f32>(7).unwrap());
        let mut b = ctx.batch();
        matmul::gemv(&mut b, &w, &x, &y).unwrap();
        b.run().unwrap();
        let data = file.tensor_data(info).unwrap();
        let mut wv = vec![0f32; 7 * k];
        formats::dequantize(f.ggml_type, data, &mut wv).unwrap();
        let mut mag = vec![0f64; 7 * k];
        (f.magnitudes)(data, &mut mag);
        let yref: Vec<f64> = (0..7).map(|i| (0..k).map(|c| wv[i * k + c] as f64 * xs[c] as f64).sum()).collect();
        let ymag: Vec<f64> = (0..7).map(|i| (0..k).map(|c| mag[i * k + c] * (xs[c] as f64).abs()).sum()).collect();
        let check = compare(&ctx.read(&y).unwrap(), &yref, &ymag, 1e-5);
        assert!(check.passed(), "{name}: {}", check.summary());

        // Embedding rows: rows 5 and 0, dequantised on the CPU from the file.
        let mut rows = vec![0f32; 2 * k];
        formats::dequantize_rows(&file, info, &[5, 0], &mut rows).unwrap();
        assert_eq!(rows[..k], wv[5 * k..6 * k], "{name} row 5");
        assert_eq!(rows[k..], wv[..k], "{name} row 0");
        assert!(matches!(formats::dequantize_rows(&file, info, &[7], &mut rows[..k]), Err(FormatError::TensorOutOfRange { .. })));
    }
}

#[test]
fn bad_tensors_give_typed_errors_naming_them() {
    let ctx = common::context();
    let mut r = rng();
    let bytes = test_file(&mut r);
    let file = GgufFile::parse(&bytes).unwrap();
    match WeightMatrix::from_gguf(&ctx, &file, "bad.iq") {
        Err(Error::UnsupportedType { ggml_type: GgmlType::IQ2_XXS, tensor: Some(t) }) => assert_eq!(t, "bad.iq"),
        other => panic!("bad.iq: {:?}", other.err()),
    }
    match WeightMatrix::from_gguf(&ctx, &file, "bad.nan") {
        Err(Error::Format(m)) => assert!(m.contains("bad.nan") && m.contains("block 1"), "{m}"),
        other => panic!("bad.nan: {:?}", other.err()),
    }
    match WeightMatrix::from_gguf(&ctx, &file, "bad.odd") {
        Err(Error::Shape(m)) => assert!(m.contains("bad.odd"), "{m}"),
        other => panic!("bad.odd: {:?}", other.err()),
    }
    assert!(matches!(WeightMatrix::from_gguf(&ctx, &file, "nope"), Err(Error::Argument(_))));
    let iq = file.tensor("bad.iq").unwrap();
    assert!(matches!(formats::dequantize_rows(&file, iq, &[0], &mut [0f32; 256]), Err(FormatError::UnsupportedType { tensor: Some(_), .. })));
    assert!(matches!(formats::dequantize(GgmlType::MXFP4, &[0; 17], &mut [0f32; 32]), Err(FormatError::UnsupportedType { ggml_type: GgmlType::MXFP4, tensor: None })));

    // Uploads from bytes: wrong length, k not a multiple of the block, zero sizes.
    let q4k = format_of(GgmlType::Q4_K).unwrap();
    let blocks = (q4k.random_blocks)(&mut r, 3);
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 3, 256, &blocks[..400]), Err(Error::Format(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 1, 384, &blocks[..216]), Err(Error::Shape(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 0, 256, &[]), Err(Error::Shape(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::TQ2_0, 1, 256, &[0; 66]), Err(Error::UnsupportedType { tensor: None, .. })));

    // Truncated file: the last tensor's bytes are cut short.
    let cut = &bytes[..bytes.len() - 5];
    if let Ok(f) = GgufFile::parse(cut) {
        match WeightMatrix::from_gguf(&ctx, &f, "bad.odd") {
            Err(Error::Format(m)) | Err(Error::Shape(m)) => assert!(m.contains("bad.odd"), "{m}"),
            other => panic!("truncated: {:?}", other.err()),
        }
    }
}

#[test]
fn gemv_rejects_short_buffers_and_mismatched_activations() {
    let ctx = common::context();
    let mut r = rng();
    let f = format_of(GgmlType::Q8_0).unwrap();
    let w = WeightMatrix::upload(&ctx, GgmlType::Q8_0, 5, 64, &(f.random_blocks)(&mut r, 10)).unwrap();
    let (x, y) = (ctx.upload(&[0f32; 64]).unwrap(), ctx.alloc::<f32>(5).unwrap());
    let (x_short, y_short) = (ctx.upload(&[0f32; 63]).unwrap(), ctx.alloc::<f32>(4).unwrap());
    let mut b = ctx.batch();
    assert!(matches!(matmul::gemv(&mut b, &w, &x_short, &y), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(matmul::gemv(&mut b, &w, &x, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    assert!(matches!(matmul::gemm(&mut b, &w, &x, &y, 0), Err(Error::Shape(_))));
    assert!(matches!(matmul::gemm(&mut b, &w, &x, &y, 2), Err(Error::BufferTooSmall { .. })));
    assert!(matches!(matmul::dequantize(&mut b, &w, &y), Err(Error::BufferTooSmall { name: "out", .. })));
    let xq = wgkernels::kernels::q8::Q8Activations::alloc(&ctx, 96).unwrap();
    assert!(matches!(matmul::gemv_q8(&mut b, &w, &xq, &y), Err(Error::Shape(_))));
}

/// The Matrix GEMM, forced, over every format's GEMM test grid (odd m such as 17, 33, 100, 130;
/// n tails; a row-chunked matrix; guard regions; f64 reference with the f16 error bound). On an
/// adapter without cooperative matrices every case must be refused as `Unsupported`: none runs,
/// none counts as passed. (`cargo test --release --test matmul -- --nocapture matrix` on a GPU.)
#[test]
fn matrix_gemm_every_format_or_unsupported() {
    let base = common::context();
    let seed = Rng::fresh_seed();
    println!("seed {seed} (WGKERNELS_SEED={seed} reproduces)");
    let mut rng = Rng::new(seed);
    let (mut passed, mut refused) = (0, 0);
    for bounds_checks in [false, true] {
        let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Matrix)).with_bounds_checks(bounds_checks));
        for kernel in kernels::registry().into_iter().filter(|k| k.info().name.starts_with("mm_gemm_")) {
            let name = kernel.info().name;
            let support = kernel.info().support(base.caps(), Variant::Matrix);
            for case in kernel.test_cases() {
                let what = format!("{name} matrix {} (bounds checks {bounds_checks})", case.name());
                match (&support, run_case(&ctx, case.as_ref(), &mut rng)) {
                    (Err(_), Err(Error::Unsupported { variant: Variant::Matrix, .. })) => refused += 1,
                    (Err(why), other) => panic!("{what}: the adapter lacks Matrix ({why}) but the call gave {:?}", other.map(|c| c.summary())),
                    (Ok(()), Ok(c)) => {
                        println!("{what}: {}", c.summary());
                        assert!(c.passed(), "{what}: {}", c.summary());
                        passed += 1;
                    }
                    (Ok(()), Err(e)) => panic!("{what}: {e}"),
                }
            }
        }
    }
    println!("matrix GEMM on {}: {passed} cases passed, {refused} refused as unsupported", base.caps().adapter_name);
    assert!(passed + refused > 0 && (passed == 0 || refused == 0), "passed {passed}, refused {refused}");
}

/// `Auto` runs the Portable GEMM below `MATRIX_MIN_M` rows and the Matrix one from there on where
/// the adapter supports it; `Require(Matrix)` is an `Unsupported` error where it does not.
#[test]
fn gemm_variant_selection() {
    let base = common::context();
    let required = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Matrix)));
    let portable = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Portable)));
    let auto = base.with_options(ContextOptions::default());
    for f in FORMATS {
        let has = matmul::kernel_infos(f).gemm.support(base.caps(), Variant::Matrix).is_ok();
        for m in [2, matmul::matrix::MATRIX_MIN_M - 1, matmul::matrix::MATRIX_MIN_M, 2048] {
            assert!(matmul::gemm_pipeline(&portable, f, m).unwrap().is_none());
            let chosen = matmul::gemm_pipeline(&auto, f, m).unwrap();
            assert_eq!(chosen.is_some(), has && m >= matmul::matrix::MATRIX_MIN_M, "{} m = {m}", f.name);
            match matmul::gemm_pipeline(&required, f, m) {
                Ok(Some(_)) => assert!(has),
                Err(Error::Unsupported { variant: Variant::Matrix, .. }) => assert!(!has),
                other => panic!("{} m = {m}: {:?}", f.name, other.map(|k| k.is_some())),
            }
        }
    }
}
