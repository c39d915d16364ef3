//! The weight-matrix family on GGUF input: every supported format loads from a file and its GEMV
//! matches the CPU (dequantised weights, f64 dot); embedding rows dequantise on the CPU without an
//! upload; bad input (unsupported type, non-finite scale, row length not a multiple of the
//! block, truncated data, wrong byte counts) gives typed errors naming the tensor; float formats
//! take row lengths that are not a multiple of 4. The Matrix GEMM runs every format's GEMM grid
//! where the adapter has cooperative matrices and is refused as unsupported everywhere else;
//! `Auto` picks it only from `MATRIX_MIN_M` rows on. The GEMV epilogues match the reference.

mod common;

use wgkernels::formats::gguf::{GgmlType, GgufFile, GgufWriter};
use wgkernels::formats::{self, format_of, FormatError, WeightFormat, FORMATS};
use wgkernels::kernels::matmul::{self, WeightMatrix};
use wgkernels::suite::{compare, run_case, Rng};
use wgkernels::{kernels, ContextOptions, Error, Variant, VariantPolicy};

fn rng() -> fastrand::Rng {
    let seed = Rng::fresh_seed();
    println!("seed {seed}");
    fastrand::Rng::with_seed(seed)
}

/// The formats with a GGUF type: the ones a GGUF file can hold (formats without one, such as
/// int4 and int8, are skipped by the GGUF-file tests; the harness cases cover them).
fn gguf_formats() -> Vec<&'static WeightFormat> {
    FORMATS.iter().copied().filter(|f| f.ggml_type.is_some()).collect()
}

/// The ggml type of a GGUF format.
fn gguf_type(f: &WeightFormat) -> GgmlType {
    f.ggml_type.unwrap_or_else(|| panic!("{} has no ggml type", f.name))
}

/// A file with one 7-row matrix per GGUF format (k = 2 blocks, at least 64 columns; 67 columns, not a
/// multiple of 4, for the float formats), plus bad tensors and a last F16 tensor of k = 6.
fn test_file(r: &mut fastrand::Rng) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for f in gguf_formats() {
        let k = if f.block_weights == 1 { 67 } else { (64 / f.block_weights).max(2) * f.block_weights };
        w = w.tensor(format!("w.{}", f.name), &[k as u64, 7], gguf_type(f), (f.random_blocks)(r, 7 * k / f.block_weights)).unwrap();
    }
    let q8 = format_of(GgmlType::Q8_0).unwrap();
    let mut nan = (q8.random_blocks)(r, 4);
    nan[34..36].copy_from_slice(&half::f16::NAN.to_bits().to_le_bytes()); // block 1's d
    w = w.tensor("bad.nan", &[64, 2], GgmlType::Q8_0, nan).unwrap();
    w = w.tensor("bad.iq", &[256, 2], GgmlType::IQ2_XXS, vec![0; 2 * 66]).unwrap();
    w = w.tensor("odd.f16", &[6, 2], GgmlType::F16, vec![0; 24]).unwrap();
    w.to_bytes()
}

#[test]
fn every_format_loads_and_multiplies() {
    let ctx = common::context();
    let mut r = rng();
    let file = GgufFile::parse(&test_file(&mut r)).unwrap();
    for f in gguf_formats() {
        let name = format!("w.{}", f.name);
        let info = file.tensor(&name).unwrap();
        let w = WeightMatrix::from_gguf(&ctx, &file, &name).unwrap();
        assert_eq!((w.n(), w.k(), w.ggml_type()), (7, info.dims[0] as usize, f.ggml_type));
        assert_eq!(format_of(gguf_type(f)).unwrap().name, f.name);
        let k = w.k();
        let xs: Vec<f32> = (0..k).map(|_| r.f32() * 2.0 - 1.0).collect();
        let (x, y) = (ctx.upload(&xs).unwrap(), ctx.alloc::<f32>(7).unwrap());
        let mut b = ctx.batch();
        matmul::gemv(&mut b, &w, &x, &y).unwrap();
        b.run().unwrap();
        let data = file.tensor_data(info).unwrap();
        let mut wv = vec![0f32; 7 * k];
        formats::dequantize(gguf_type(f), data, &mut wv).unwrap();
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
        Err(Error::InvalidData(m)) => assert!(m.contains("bad.nan") && m.contains("block 1"), "{m}"),
        other => panic!("bad.nan: {:?}", other.err()),
    }
    // A row length that is not a multiple of 4 is no error for a float format.
    assert_eq!(WeightMatrix::from_gguf(&ctx, &file, "odd.f16").map(|w| (w.n(), w.k())).ok(), Some((2, 6)));
    assert!(matches!(WeightMatrix::from_gguf(&ctx, &file, "nope"), Err(Error::Argument(_))));
    let iq = file.tensor("bad.iq").unwrap();
    assert!(matches!(formats::dequantize_rows(&file, iq, &[0], &mut [0f32; 256]), Err(FormatError::UnsupportedType { tensor: Some(_), .. })));
    assert!(matches!(formats::dequantize(GgmlType::MXFP4, &[0; 17], &mut [0f32; 32]), Err(FormatError::UnsupportedType { ggml_type: GgmlType::MXFP4, tensor: None })));

    // Uploads from bytes: wrong length, k not a multiple of the block, zero sizes.
    let q4k = format_of(GgmlType::Q4_K).unwrap();
    let blocks = (q4k.random_blocks)(&mut r, 3);
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 3, 256, &blocks[..400]), Err(Error::InvalidData(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 1, 384, &blocks[..216]), Err(Error::Shape(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::Q4_K, 0, 256, &[]), Err(Error::Shape(_))));
    assert!(matches!(WeightMatrix::upload(&ctx, GgmlType::TQ2_0, 1, 256, &[0; 66]), Err(Error::UnsupportedType { tensor: None, .. })));

    // Truncated file: the last tensor's bytes are cut short (5 bytes before their end, whatever
    // padding follows them).
    let last = file.tensor("odd.f16").unwrap();
    let end = (file.data_offset() + last.offset) as usize + 24;
    let cut = &bytes[..end - 5];
    if let Ok(f) = GgufFile::parse(cut) {
        match WeightMatrix::from_gguf(&ctx, &f, "odd.f16") {
            Err(Error::InvalidData(m)) | Err(Error::Shape(m)) => assert!(m.contains("odd.f16"), "{m}"),
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

/// The GEMV epilogues against the f64 CPU reference, f32 and int8 activations, odd row counts:
/// `y += W x` over a poisoned-free prior `y`, and SwiGLU over interleaved (gate, up) matrices;
/// outputs past the last row stay untouched.
#[test]
fn gemv_epilogues_match_reference() {
    use matmul::{Epilogue, GemvInput};
    use wgkernels::kernels::elementwise::{reference_activation, Activation};
    use wgkernels::kernels::q8::{quantize_activations, Q8Activations};
    use wgkernels::reference::q8 as r8;
    let ctx = common::context();
    let mut r = rng();
    for f in FORMATS.iter().filter(|f| ["f32", "f16", "q8_0", "q4_k", "q6_k"].contains(&f.name)) {
        let k = 512;
        let n = 19;
        let blocks = |r: &mut fastrand::Rng| (f.random_blocks)(r, n * k / f.block_weights);
        let (ga, ub) = (blocks(&mut r), blocks(&mut r));
        let deq = |bytes: &[u8]| {
            let mut v = vec![0f32; n * k];
            formats::dequantize_format(f, bytes, &mut v).unwrap();
            let mut m = vec![0f64; n * k];
            (f.magnitudes)(bytes, &mut m);
            (v, m)
        };
        let ((gw, gm), (uw, um)) = (deq(&ga), deq(&ub));
        let xs: Vec<f32> = (0..k).map(|_| r.f32() * 2.0 - 1.0).collect();
        let x = ctx.upload(&xs).unwrap();
        let xq = Q8Activations::alloc(&ctx, k).unwrap();
        let host_q = r8::quantize(&xs);
        for q8 in [false, true] {
            let xv: Vec<f64> = (0..k).map(|c| if q8 { host_q.value(c) } else { xs[c] as f64 }).collect();
            let dot = |w: &[f32], m: &[f64], i: usize| -> (f64, f64) { (0..k).fold((0.0, 0.0), |(s, a), c| (s + w[i * k + c] as f64 * xv[c], a + m[i * k + c] * xv[c].abs())) };
            let input = if q8 { GemvInput::Q8(&xq) } else { GemvInput::F32(&x) };
            // One GEMV (after quantising x for the int8 input), run, and its output read back.
            let run = |w: &WeightMatrix, y: &wgkernels::GpuBuffer<f32>, epi: Epilogue| {
                let mut b = ctx.batch();
                if q8 {
                    quantize_activations(&mut b, &x, &xq).unwrap();
                }
                matmul::gemv_with(&mut b, w, input, y, epi).unwrap();
                b.run().unwrap();
                ctx.read(y).unwrap()
            };
            // Accumulate: y = y0 + G x over n rows; y has 3 extra guard values.
            let gate = WeightMatrix::upload_format(&ctx, f, n, k, &ga).unwrap();
            let y0: Vec<f32> = (0..n + 3).map(|_| r.f32() * 4.0 - 2.0).collect();
            let got = run(&gate, &ctx.upload(&y0).unwrap(), Epilogue::Accumulate);
            let (yref, ymag): (Vec<f64>, Vec<f64>) = (0..n).map(|i| dot(&gw, &gm, i)).unzip();
            let yref: Vec<f64> = yref.iter().zip(&y0).map(|(s, &v)| s + v as f64).collect();
            let ymag: Vec<f64> = ymag.iter().zip(&y0).map(|(a, &v)| a + (v as f64).abs()).collect();
            let check = compare(&got[..n], &yref, &ymag, 1e-5);
            assert!(check.passed(), "{} accumulate q8={q8}: {}", f.name, check.summary());
            assert_eq!(&got[n..], &y0[n..], "{} accumulate: guard values changed", f.name);
            // SwiGLU and GeGLU over the interleaved (gate, up) matrix: n outputs.
            let gu = WeightMatrix::upload_interleaved(&ctx, gguf_type(f), n, k, &ga, &ub).unwrap();
            assert_eq!(gu.n(), 2 * n);
            for (epi, act) in [(Epilogue::SwiGlu, Activation::Silu), (Epilogue::GeGlu, Activation::GeluTanh)] {
                let got = run(&gu, &ctx.upload(&vec![f32::NAN; n + 3]).unwrap(), epi);
                let mut yref = Vec::new();
                let mut ymag = Vec::new();
                for i in 0..n {
                    let ((g, ga), (u, ua)) = (dot(&gw, &gm, i), dot(&uw, &um, i));
                    let s = reference_activation(act, g);
                    yref.push(s * u);
                    // silu' is within [-0.1, 1.1], gelu_tanh' within [-0.17, 1.13], and
                    // |act(g)| <= |g|: errors of g and u scale by these.
                    ymag.push(1.2 * ga * u.abs() + g.abs() * ua + (s * u).abs());
                }
                let check = compare(&got[..n], &yref, &ymag, 1e-5);
                assert!(check.passed(), "{} {epi:?} q8={q8}: {}", f.name, check.summary());
                assert!(got[n..].iter().all(|v| v.is_nan()), "{} {epi:?}: wrote past n outputs", f.name);
            }
        }
    }
}

#[test]
fn interleaved_upload_and_swiglu_reject_bad_shapes() {
    use matmul::{Epilogue, GemvInput};
    let ctx = common::context();
    let mut r = rng();
    let f = format_of(GgmlType::Q8_0).unwrap();
    let a = (f.random_blocks)(&mut r, 3 * 2);
    let b = (f.random_blocks)(&mut r, 3 * 2);
    assert!(matches!(WeightMatrix::upload_interleaved(&ctx, GgmlType::Q8_0, 3, 64, &a, &b[..b.len() - 1]), Err(Error::InvalidData(_))));
    assert!(matches!(WeightMatrix::upload_interleaved(&ctx, GgmlType::Q8_0, 3, 48, &a, &b), Err(Error::Shape(_))));
    // An odd row count cannot hold (gate, up) pairs; a short output is refused.
    let odd = WeightMatrix::upload(&ctx, GgmlType::Q8_0, 3, 64, &a).unwrap();
    let x = ctx.upload(&[0.5f32; 64]).unwrap();
    let y = ctx.alloc::<f32>(8).unwrap();
    let mut bt = ctx.batch();
    assert!(matches!(matmul::gemv_with(&mut bt, &odd, GemvInput::F32(&x), &y, Epilogue::SwiGlu), Err(Error::Shape(_))));
    let gu = WeightMatrix::upload_interleaved(&ctx, GgmlType::Q8_0, 3, 64, &a, &b).unwrap();
    let short = ctx.alloc::<f32>(2).unwrap();
    assert!(matmul::gemv_with(&mut bt, &gu, GemvInput::F32(&x), &short, Epilogue::SwiGlu).is_err());
}
/// Float formats at row lengths that are not a multiple of 4: GEMV with NaN in x past k (the
/// last vec4 of x straddles k), GEMM with m rows of x back to back (rows not on vec4 boundaries)
/// and NaN after them, dequantise into a guarded buffer; against the f64 reference, guards intact.
#[test]
fn float_formats_take_any_row_length() {
    use wgkernels::reference;
    use wgkernels::suite::{guard_damage, guarded_f32, POISON_F32};
    let ctx = common::context();
    let mut r = rng();
    let mut srng = Rng::new(r.u64(..));
    for f in FORMATS.iter().filter(|f| f.block_weights == 1) {
        for (n, k) in [(5, 1), (3, 2), (7, 7), (2, 13), (9, 301)] {
            let bytes = (f.random_blocks)(&mut r, n * k);
            let mut wv = vec![0f32; n * k];
            formats::dequantize_format(f, &bytes, &mut wv).unwrap();
            let mut mag = vec![0f64; n * k];
            (f.magnitudes)(&bytes, &mut mag);
            let w = WeightMatrix::upload_format(&ctx, f, n, k, &bytes).unwrap();
            let (wf, mf) = (|row: usize, c: usize| wv[row * k + c] as f64, |row: usize, c: usize| mag[row * k + c]);
            for m in [1, 3] {
                let xs = srng.uniform_vec(m * k, -1.0, 1.0);
                let mut padded = xs.clone();
                padded.extend([f32::NAN; 9]);
                let x = ctx.upload(&padded).unwrap();
                let y = guarded_f32(&ctx, m * n).unwrap();
                let mut b = ctx.batch();
                matmul::matmul(&mut b, &w, &x, &y, m).unwrap();
                b.run().unwrap();
                let (yref, ymag) = if m == 1 { reference::gemv(n, k, wf, mf, &xs) } else { reference::gemm(m, n, k, wf, mf, &xs) };
                let got = ctx.read(&y).unwrap();
                let check = compare(&got, &yref, &ymag, 1e-5);
                assert!(check.passed() && guard_damage(&got, m * n, POISON_F32) == 0, "{} m={m} n={n} k={k}: {}", f.name, check.summary());
            }
            let out = guarded_f32(&ctx, n * k).unwrap();
            let mut b = ctx.batch();
            matmul::dequantize(&mut b, &w, &out).unwrap();
            b.run().unwrap();
            let got = ctx.read(&out).unwrap();
            assert!(got[..n * k].iter().zip(&wv).all(|(g, e)| g.to_bits() == e.to_bits()), "{} n={n} k={k}: dequantise differs", f.name);
            assert_eq!(guard_damage(&got, n * k, POISON_F32), 0, "{} n={n} k={k}: guard overwritten", f.name);
        }
    }
}

/// The Matrix GEMM, forced, over every format's GEMM test grid (odd m such as 17, 33, 100, 130;
/// n tails; a row-chunked matrix; guard regions; f64 reference with the f16 error bound), with
/// its own tile choice and with each tile it can pick forced. On an
/// adapter without cooperative matrices every case must be refused as `Unsupported`: none runs,
/// none counts as passed. (`cargo test --release --test matmul -- --nocapture matrix` on a GPU.)
#[test]
fn matrix_gemm_every_format_or_unsupported() {
    let base = common::context();
    let seed = Rng::fresh_seed();
    println!("seed {seed} (WGKERNELS_SEED={seed} reproduces)");
    let mut rng = Rng::new(seed);
    let (mut passed, mut refused, mut odd_k) = (0, 0, 0);
    // The default tiles with and without bounds checks, then every tile the GEMM can pick forced
    // at every m (`Tuning::gemm_tile`).
    let forced = matmul::matrix::TILES.map(|t| (false, Some([t.sgm, t.sgn, t.mi, t.nj, t.tk])));
    for (bounds_checks, tile) in [(false, None), (true, None)].into_iter().chain(forced) {
        let tuning = wgkernels::Tuning { gemm_tile: tile, ..Default::default() };
        let options = ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Matrix)).with_bounds_checks(bounds_checks).with_tuning(tuning);
        let ctx = base.with_options(options);
        // The weight-matrix GEMMs with a Matrix variant (not the int8 multi-row GEMMs, mm_gemm_q8_*).
        for kernel in kernels::registry().into_iter().filter(|k| k.info().name.starts_with("mm_gemm_") && k.info().variants.contains(&Variant::Matrix)) {
            let name = kernel.info().name;
            let support = kernel.info().support(base.caps(), Variant::Matrix);
            for case in kernel.test_cases() {
                let what = format!("{name} matrix {} (bounds checks {bounds_checks}, tile {tile:?})", case.name());
                match (&support, run_case(&ctx, case.as_ref(), &mut rng)) {
                    (Err(_), Err(Error::Unsupported { variant: Variant::Matrix, .. })) => refused += 1,
                    // Row lengths that are not whole vec4s (float formats) stay Portable.
                    (Ok(()), Err(Error::Unsupported { variant: Variant::Matrix, reason, .. })) if reason.contains("not a multiple of 4") => odd_k += 1,
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
    println!("matrix GEMM on {}: {passed} cases passed, {refused} refused as unsupported, {odd_k} refused for k % 4 != 0", base.caps().adapter_name);
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
            assert!(matmul::gemm_pipeline(&portable, f, m, 256).unwrap().is_none());
            let chosen = matmul::gemm_pipeline(&auto, f, m, 256).unwrap();
            assert_eq!(chosen.is_some(), has && m >= matmul::matrix::MATRIX_MIN_M, "{} m = {m}", f.name);
            match matmul::gemm_pipeline(&required, f, m, 256) {
                Ok(Some(_)) => assert!(has),
                Err(Error::Unsupported { variant: Variant::Matrix, .. }) => assert!(!has),
                other => panic!("{} m = {m}: {:?}", f.name, other.map(|k| k.is_some())),
            }
            // A row length that is not whole vec4s: Portable under Auto, Unsupported under Require.
            assert!(matmul::gemm_pipeline(&auto, f, m, 301).unwrap().is_none());
            if has {
                assert!(matches!(matmul::gemm_pipeline(&required, f, m, 301), Err(Error::Unsupported { .. })));
            }
        }
    }
}

/// The int4 format holds INT4 host matrices losslessly: converting a `HostInt4` (signed, groups
/// of 32 and 64, from the INT4 quantiser and random codes) gives blocks whose CPU and GPU
/// dequantised values equal the host matrix's reference values rounded to f32, bit for bit; what
/// the format cannot hold (zero points, asymmetric codes, groups not a multiple of 32, invalid
/// scales) is an error.
#[test]
fn int4_host_matrices_convert_bit_exactly() {
    use wgkernels::kernels::int4::{HostInt4, Int4Mode};
    let ctx = common::context();
    let mut r = rng();
    let (n, k) = (5, 128);
    let check = |name: &str, bytes: &[u8], value: &dyn Fn(usize, usize) -> f64| {
        let f = formats::format_named(name).unwrap();
        let mut got = vec![f32::NAN; n * k];
        formats::dequantize_format(f, bytes, &mut got).unwrap();
        let w = WeightMatrix::upload_format(&ctx, f, n, k, bytes).unwrap();
        assert_eq!(w.ggml_type(), None);
        let out = ctx.alloc::<f32>(n * k).unwrap();
        let mut b = ctx.batch();
        matmul::dequantize(&mut b, &w, &out).unwrap();
        b.run().unwrap();
        let gpu = ctx.read(&out).unwrap();
        for i in 0..n * k {
            let want = value(i / k, i % k) as f32;
            assert_eq!(got[i].to_bits(), want.to_bits(), "{name} cpu ({}, {}): {} vs {want}", i / k, i % k, got[i]);
            assert_eq!(gpu[i].to_bits(), want.to_bits(), "{name} gpu ({}, {}): {} vs {want}", i / k, i % k, gpu[i]);
        }
    };
    let weights: Vec<f32> = (0..n * k).map(|_| r.f32() * 2.0 - 1.0).collect();
    for g in [32, 64] {
        let h = wgkernels::reference::quant::quantize(&weights, n, k, g, Int4Mode::Signed);
        check("int4", &h.to_int4_blocks().unwrap(), &|r, c| h.value(r, c));
        let mut codes = vec![0u8; n * k / 2];
        r.fill(&mut codes);
        let h = HostInt4 { n, k, group_size: g, mode: Int4Mode::Signed, codes, scales: (0..n * k / g).map(|_| r.f32() * 0.1 - 0.05).collect(), zeros: None };
        check("int4", &h.to_int4_blocks().unwrap(), &|r, c| h.value(r, c));
        let zeros = HostInt4 { zeros: Some(vec![0.0; n * k / g]), ..h.clone() };
        assert_eq!(zeros.to_int4_blocks().unwrap(), h.to_int4_blocks().unwrap());
        for bad in [
            HostInt4 { mode: Int4Mode::Asymmetric, ..h.clone() },
            HostInt4 { zeros: Some(vec![0.5; n * k / g]), ..h.clone() },
            HostInt4 { scales: vec![f32::NAN; n * k / g], ..h.clone() },
            HostInt4 { scales: vec![1e-40; n * k / g], ..h.clone() },
            HostInt4 { group_size: 16, scales: vec![1.0; n * k / 16], ..h.clone() },
            HostInt4 { codes: vec![0; 3], ..h.clone() },
        ] {
            assert!(bad.to_int4_blocks().is_err(), "{bad:?}");
        }
    }
    // Neither format has a GGUF type: no GGUF tensor type resolves to them.
    assert!(FORMATS.iter().filter(|f| f.ggml_type.is_none()).map(|f| f.name).eq(["int4", "int8"]));
}

/// The Matrix GEMM's weight staging, run anywhere: every run of 32 weights that its kernel stages
/// (through a format's run hook, or eight `fmt_w4` calls where the part has none) equals the CPU
/// dequantiser's values bit for bit, for odd row counts and row lengths of one, three and nine
/// vec4-aligned quanta (runs cut by the row's end for the float formats), guards intact.
#[test]
fn matrix_weight_runs_match_the_dequantiser() {
    use wgkernels::suite::{guard_damage, guarded_f32, POISON_F32};
    let ctx = common::context();
    let mut r = rng();
    for f in FORMATS {
        let q = f.block_weights.max(4) / 4 * 4;
        assert_eq!(q % f.block_weights, 0, "{}", f.name);
        for (n, k) in [(5, q), (3, 3 * q), (7, 9 * q)] {
            let bytes = (f.random_blocks)(&mut r, n * k / f.block_weights);
            let mut wv = vec![0f32; n * k];
            formats::dequantize_format(f, &bytes, &mut wv).unwrap();
            let w = WeightMatrix::upload_format(&ctx, f, n, k, &bytes).unwrap();
            let out = guarded_f32(&ctx, n * k).unwrap();
            let mut b = ctx.batch();
            matmul::matrix::check_runs(&mut b, &w, &out).unwrap();
            b.run().unwrap();
            let got = ctx.read(&out).unwrap();
            let bad = got[..n * k].iter().zip(&wv).position(|(g, e)| g.to_bits() != e.to_bits());
            assert!(bad.is_none(), "{} n={n} k={k}: value {} is {} (dequantiser: {})", f.name, bad.unwrap(), got[bad.unwrap()], wv[bad.unwrap()]);
            assert_eq!(guard_damage(&got, n * k, POISON_F32), 0, "{} n={n} k={k}: guard overwritten", f.name);
        }
    }
}

/// The test context where it has SHADER_F16 (the staging tests' f16 slices), else `None`
/// (printed as unsupported).
fn f16_context() -> Option<wgkernels::Context> {
    let ctx = common::context();
    if !ctx.caps().shader_f16 {
        println!("UNSUPPORTED: the adapter lacks SHADER_F16");
        return None;
    }
    Some(ctx)
}

/// A row length for the staging tests: whole vec4s (and runs) whose last 64-column step is
/// partial for 32-weight blocks (81 runs), nine 256-weight blocks, 324 for the float formats (a
/// cut run).
fn staging_k(f: &WeightFormat) -> usize {
    let q = f.block_weights.max(4) / 4 * 4;
    q * if q >= 256 { 9 } else { 81 }
}

/// Random `n x k` blocks of `f` whose weights are within f16's range (blocks redrawn until they
/// are), as the Matrix GEMMs take them, and their CPU dequantisation.
fn f16_range_matrix(f: &'static WeightFormat, r: &mut fastrand::Rng, n: usize, k: usize) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = (f.random_blocks)(r, n * k / f.block_weights);
    let mut blk = vec![0f32; f.block_weights];
    for b in bytes.chunks_exact_mut(f.block_bytes) {
        for _ in 0..1000 {
            formats::dequantize_format(f, b, &mut blk).unwrap();
            if blk.iter().all(|v| v.abs() <= 65504.0) {
                break;
            }
            b.copy_from_slice(&(f.random_blocks)(r, 1));
        }
    }
    let mut wv = vec![0f32; n * k];
    formats::dequantize_format(f, &bytes, &mut wv).unwrap();
    (bytes, wv)
}

/// The two-pass Matrix GEMM's first pass, run anywhere with f16 (its second pass needs
/// cooperative matrices): for every format, x (40 rows, padded to 128) and the weights (130
/// rows, padded to 192) in the scratch equal x and the CPU-dequantised weights rounded to f16,
/// with zeros in the padding (rows past m and n, columns past k up to the 64-column step), and
/// the scratch past the padded rows untouched (poisoned before).
#[test]
fn wide_first_pass_matches_the_inputs() {
    use half::f16;
    let Some(ctx) = f16_context() else { return };
    let mut r = rng();
    let mut srng = Rng::new(r.u64(..));
    let (m, rows, n, n_pad) = (40, 128, 130, 192);
    let poison = f16::from_bits(0x7e01);
    for f in FORMATS {
        let k = staging_k(f);
        let (bytes, wv) = f16_range_matrix(f, &mut r, n, k);
        let w = WeightMatrix::upload_format(&ctx, f, n, k, &bytes).unwrap();
        let xs = srng.uniform_vec(m * k, -2.0, 2.0);
        let x = ctx.upload(&xs).unwrap();
        let scratch = matmul::GemmScratch::new(&ctx, rows, &[(n_pad, k)]).unwrap();
        let (sx, sw) = matmul::wide::scratch_buffers(&scratch);
        ctx.write(sx, &vec![poison; sx.len()]).unwrap();
        ctx.write(sw, &vec![poison; sw.len()]).unwrap();
        let mut b = ctx.batch();
        let got = matmul::wide::widen(&mut b, &w, &x, m, matmul::wide::WIDE_TILES[1], &scratch).unwrap();
        b.run().unwrap();
        let kp = k.next_multiple_of(64);
        assert_eq!(got, (kp, rows, n_pad));
        for (name, buf, used, live, src) in [("x", sx, rows, m, &xs), ("w", sw, n_pad, n, &wv)] {
            let got = ctx.read(buf).unwrap();
            for (i, g) in got.iter().enumerate() {
                let (row, col) = (i / kp, i % kp);
                let want = if row >= used {
                    poison
                } else if row < live && col < k {
                    f16::from_f32(src[row * k + col])
                } else {
                    f16::ZERO
                };
                assert!(g.to_bits() == want.to_bits(), "{} {name}: row {row} col {col}: {g} vs {want}", f.name);
            }
        }
    }
}

/// The Matrix GEMM's staging, run anywhere with f16 (its cooperative-matrix products cannot run
/// here): for every format and every tile the GEMM can pick (K steps of 64 and 32 columns,
/// subgroup sizes 32 and 64), the x and weight slices it stages for every step of every tile
/// equal x and the CPU-dequantised weights rounded to f16, with zeros past m, n and k. Shapes:
/// 40 rows of x (a partial narrow tile), 130 weight rows (a second tile of 2 rows), row lengths
/// whose last step is partial (a cut run for the float formats).
#[test]
fn matrix_staging_matches_the_inputs() {
    use half::f16;
    use matmul::matrix::MatrixTile;
    let Some(ctx) = f16_context() else { return };
    let mut r = rng();
    let mut srng = Rng::new(r.u64(..));
    let max_wg = ctx.caps().limits.max_compute_invocations_per_workgroup;
    let (m, n) = (40, 130);
    let mut checked = 0;
    for f in FORMATS {
        let k = staging_k(f);
        let (bytes, wv) = f16_range_matrix(f, &mut r, n, k);
        let w = WeightMatrix::upload_format(&ctx, f, n, k, &bytes).unwrap();
        let xs = srng.uniform_vec(m * k, -2.0, 2.0);
        let x = ctx.upload(&xs).unwrap();
        let h = |v: f32| f16::from_f32(v).to_f32();
        for (sg, tile) in matmul::matrix::TILES.iter().map(|&t| (32, t)).chain([(64, MatrixTile::NARROW), (64, MatrixTile::WIDE)]) {
            if sg * tile.subgroups() > max_wg {
                continue;
            }
            let (tm, tn, tk) = (tile.tm(), tile.tn(), tile.tk());
            let tiles_n = n.div_ceil(tn);
            let len = m.div_ceil(tm) * tiles_n * k.div_ceil(tk) * (tm + tn) * tk;
            let out = ctx.upload(&vec![f32::NAN; len]).unwrap();
            let mut b = ctx.batch();
            let (tiles, steps) = matmul::matrix::check_stage(&mut b, &w, &x, m, &out, sg, tile).unwrap();
            b.run().unwrap();
            let got = ctx.read(&out).unwrap();
            for s in 0..steps {
                for t in 0..tiles {
                    let (m0, n0) = ((t / tiles_n) * tm, (t % tiles_n) * tn);
                    let blk = &got[(s * tiles + t) * (tm + tn) * tk..][..(tm + tn) * tk];
                    for (row, vals) in blk.chunks_exact(tk).enumerate() {
                        for (c, &g) in vals.iter().enumerate() {
                            let col = s * tk + c;
                            let want = if row < tm {
                                if m0 + row < m && col < k {
                                    h(xs[(m0 + row) * k + col])
                                } else {
                                    0.0
                                }
                            } else if n0 + row - tm < n && col < k {
                                h(wv[(n0 + row - tm) * k + col])
                            } else {
                                0.0
                            };
                            assert!(
                                g.to_bits() == want.to_bits(),
                                "{} sg {sg} {tile:?}: step {s} tile {t} {} row {} col {col}: {g} vs {want}",
                                f.name,
                                if row < tm { "x" } else { "w" },
                                if row < tm { row } else { row - tm }
                            );
                        }
                    }
                }
            }
            checked += 1;
        }
    }
    println!("staging checked for {checked} (format, tile) pipelines");
    assert!(checked >= FORMATS.len() * 4);
}

/// `gather_row` / `gather_rows`: the rows indices on the GPU name, bit-exact with the CPU
/// dequantiser, for every format (odd row count, indices at both ends, several rows at once); an
/// index past the matrix writes nothing (the poisoned output stays), and rows that are not whole
/// vec4s are refused.
#[test]
fn gather_row_matches_dequantiser() {
    let ctx = common::context();
    let mut r = rng();
    for f in FORMATS.iter().copied() {
        let k = f.block_weights.max(4).next_multiple_of(4) * 2;
        let n = 7;
        let bytes = (f.random_blocks)(&mut r, n * k / f.block_weights);
        let mut want = vec![0f32; n * k];
        formats::dequantize_format(f, &bytes, &mut want).unwrap();
        let w = WeightMatrix::upload_format(&ctx, f, n, k, &bytes).unwrap();
        for row in [0u32, 3, 6, 7, u32::MAX] {
            let idx = ctx.upload(&[row]).unwrap();
            let out = wgkernels::suite::guarded_f32(&ctx, k + 4).unwrap();
            let before = ctx.read(&out).unwrap();
            let mut b = ctx.batch();
            matmul::gather_row(&mut b, &w, &idx, &out).unwrap();
            b.run().unwrap();
            let got = ctx.read(&out).unwrap();
            if (row as usize) < n {
                let exact = got[..k].iter().zip(&want[row as usize * k..][..k]).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
                assert!(exact, "{} row {row}: gathered row differs from the dequantiser", f.name);
                assert_eq!(wgkernels::suite::guard_damage(&got, k, wgkernels::suite::POISON_F32), 0, "{} row {row}: guard damaged", f.name);
            } else {
                let same = got.iter().zip(&before).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{} index {row} past the matrix wrote into the output", f.name);
            }
        }
        // Several rows at once (a prompt's embeddings): row i from idx[i]; an index past the
        // matrix leaves its row as it was.
        let rows = [6u32, 0, 7, 3, 6];
        let idx = ctx.upload(&rows).unwrap();
        let out = wgkernels::suite::guarded_f32(&ctx, rows.len() * k).unwrap();
        let before = ctx.read(&out).unwrap();
        let mut b = ctx.batch();
        matmul::gather_rows(&mut b, &w, &idx, rows.len(), &out).unwrap();
        b.run().unwrap();
        let got = ctx.read(&out).unwrap();
        for (i, &row) in rows.iter().enumerate() {
            let g = &got[i * k..(i + 1) * k];
            let want = if (row as usize) < n { &want[row as usize * k..][..k] } else { &before[i * k..(i + 1) * k] };
            assert!(g.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())), "{} rows: row {i} (index {row})", f.name);
        }
        assert_eq!(wgkernels::suite::guard_damage(&got, rows.len() * k, wgkernels::suite::POISON_F32), 0, "{} rows: guard damaged", f.name);
    }
    // Rows of a float format whose length is not a whole number of vec4s are refused.
    let f32f = FORMATS.iter().copied().find(|f| f.name == "f32").unwrap();
    let w = WeightMatrix::upload_format(&ctx, f32f, 2, 6, &[0u8; 48]).unwrap();
    let (idx, out) = (ctx.upload(&[0u32]).unwrap(), ctx.alloc::<f32>(8).unwrap());
    let mut b = ctx.batch();
    assert!(matches!(matmul::gather_row(&mut b, &w, &idx, &out), Err(Error::Shape(_))));
    assert_eq!(b.len(), 0);
}

/// `gemm_q8` and the several-row int8 activations refuse bad input with typed errors, recording
/// nothing: m out of 1..=16 or above the activations' rows, k mismatch, activations without the
/// quad order, a format without an integer dot (Q5_0), y too short; the GEMVs refuse several-row
/// activations; `quantize_rows` checks m and x.
#[test]
fn gemm_q8_bad_input() {
    use wgkernels::kernels::q8::{self, Q8Activations};
    let ctx = common::context();
    let mut r = rng();
    let upload = |ty: GgmlType, n: usize, k: usize, r: &mut fastrand::Rng| {
        let f = format_of(ty).unwrap();
        WeightMatrix::upload(&ctx, ty, n, k, &(f.random_blocks)(r, n * k / f.block_weights)).unwrap()
    };
    let (n, k) = (5, 256);
    let w = upload(GgmlType::Q4_K, n, k, &mut r);
    let w512 = upload(GgmlType::Q4_K, n, 512, &mut r);
    let w5 = upload(GgmlType::Q5_0, n, k, &mut r);
    let w96 = upload(GgmlType::Q8_0, n, 96, &mut r);
    assert!(matches!(Q8Activations::alloc_rows(&ctx, k, 0), Err(Error::Shape(_))));
    assert!(matches!(Q8Activations::alloc_rows(&ctx, 1 << 20, 1 << 12), Err(Error::Shape(_))), "rows * k overflows the u32 indices");
    let xq = Q8Activations::alloc_rows(&ctx, k, 4).unwrap();
    let xq96 = Q8Activations::alloc_rows(&ctx, 96, 4).unwrap();
    let xq17 = Q8Activations::alloc_rows(&ctx, k, 17).unwrap();
    let x = ctx.upload(&vec![0.5f32; 17 * k]).unwrap();
    let x_short = ctx.upload(&vec![0.5f32; 3 * k - 1]).unwrap();
    let y = ctx.alloc::<f32>(17 * n).unwrap();
    let y_short = ctx.alloc::<f32>(3 * n - 1).unwrap();
    let mut b = ctx.batch();
    for m in [0, 17] {
        assert!(matches!(matmul::gemm_q8(&mut b, &w, &xq17, &y, m), Err(Error::Shape(_))), "m = {m}");
    }
    assert!(matches!(matmul::gemm_q8(&mut b, &w, &xq, &y, 5), Err(Error::Shape(_))), "m above the activations' rows");
    assert!(matches!(matmul::gemm_q8(&mut b, &w512, &xq, &y, 2), Err(Error::Shape(_))), "k mismatch");
    assert!(matches!(matmul::gemm_q8(&mut b, &w96, &xq96, &y, 2), Err(Error::Shape(_))), "no quad order (k % 256 != 0)");
    assert!(!matmul::has_integer_dot(w5.format()));
    assert!(matches!(matmul::gemm_q8(&mut b, &w5, &xq, &y, 2), Err(Error::Unsupported { .. })), "Q5_0 has no integer dot");
    assert!(matches!(matmul::gemm_q8(&mut b, &w, &xq, &y_short, 3), Err(Error::BufferTooSmall { name: "y", .. })));
    assert!(matches!(matmul::gemv_q8(&mut b, &w, &xq, &y), Err(Error::Shape(_))), "a GEMV reads one row");
    for m in [0, 5] {
        assert!(matches!(q8::quantize_rows(&mut b, &x, &xq, m), Err(Error::Shape(_))), "quantise m = {m}");
    }
    assert!(matches!(q8::quantize_rows(&mut b, &x_short, &xq, 3), Err(Error::BufferTooSmall { name: "x", .. })));
    assert_eq!(b.len(), 0, "nothing may be recorded after a rejected call");
    // The same calls with good arguments record (quantiser + GEMM), and Require(Subgroup)
    // refuses the Portable-only quantiser with a typed error.
    q8::quantize_rows(&mut b, &x, &xq, 3).unwrap();
    matmul::gemm_q8(&mut b, &w, &xq, &y, 3).unwrap();
    assert_eq!(b.len(), 2);
    let sub = ctx.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Subgroup)));
    let mut b = sub.batch();
    assert!(matches!(q8::quantize_rows(&mut b, &x, &xq, 3), Err(Error::Unsupported { .. })));
}
