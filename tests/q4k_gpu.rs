//! Q4_K on the GPU against gguf-py: the committed golden file's tensors (tests/data, made by
//! tools/make_q4k_golden.py) through the GEMV on every supported variant (against an f64 dot
//! of gguf-py's dequantised values) and the dequantiser (bit-exact); GGUF F32/F16 uploads;
//! typed errors for bad shapes and buffers.

mod common;

use wgkernels::formats::gguf::{GgmlType, GgufFile};
use wgkernels::formats::q4k::{self, QK_K};
use wgkernels::kernels::q4k::{self as gpu, GgufTensor, Q4kMatrix};
use wgkernels::suite::{compare, guarded_f32, Rng};
use wgkernels::{reference, ContextOptions, Error, Variant, VariantPolicy};

fn data_path(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The golden file and, per Q4_K tensor in file order, gguf-py's dequantised values.
fn golden() -> (GgufFile, Vec<(String, Vec<f32>)>) {
    let file = GgufFile::open(data_path("q4k_golden.gguf")).expect("golden GGUF");
    let raw = std::fs::read(data_path("q4k_golden_values.f32")).expect("golden values");
    let vals: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut at = 0;
    let mut out = Vec::new();
    for t in file.tensors().iter().filter(|t| t.ggml_type == GgmlType::Q4_K) {
        let len = t.n_elements as usize;
        out.push((t.name.clone(), vals[at..at + len].to_vec()));
        at += len;
    }
    assert_eq!(at, vals.len(), "golden values cover every Q4_K tensor");
    assert!(out.len() >= 4);
    (file, out)
}

#[test]
fn golden_gemv_every_variant() {
    let base = common::context();
    let (file, tensors) = golden();
    let mut rng = Rng::new(Rng::fresh_seed());
    let mut ran = 0;
    for v in [Variant::Portable, Variant::Subgroup] {
        if let Err(why) = gpu::GEMV.support(base.caps(), v) {
            println!("q4k_gemv {} UNSUPPORTED: {why}", v.name());
            continue;
        }
        for bounds_checks in [false, true] {
            let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_bounds_checks(bounds_checks));
            for (name, want) in &tensors {
                let info = file.tensor(name).unwrap();
                let w = Q4kMatrix::from_gguf(&ctx, &file, name).unwrap();
                let (n, k) = (w.n(), w.k());
                assert_eq!((n * k) as u64, info.n_elements);
                let blocks = q4k::blocks_from_bytes(file.tensor_data(info).unwrap()).unwrap();
                let mag = gpu::operand_magnitudes(&blocks);
                let xs = rng.uniform_vec(k, -1.0, 1.0);
                let (yref, ymag) = reference::gemv(n, k, |r, c| want[r * k + c] as f64, |r, c| mag[r * k + c], &xs);
                let x = ctx.upload(&xs).unwrap();
                let y = guarded_f32(&ctx, n).unwrap();
                let mut b = ctx.batch();
                gpu::gemv(&mut b, &w, &x, &y).unwrap();
                b.run().unwrap();
                let check = compare(&ctx.read(&y).unwrap(), &yref, &ymag, 1e-5);
                println!("q4k_gemv {} checks={} {name} n={n} k={k}: {}", v.name(), bounds_checks, check.summary());
                assert!(check.passed(), "{} {name}: {}", v.name(), check.summary());
                ran += 1;
            }
        }
    }
    assert!(ran >= 8, "the Portable variant always runs");
}

#[test]
fn golden_dequant_bit_exact() {
    let ctx = common::context();
    let (file, tensors) = golden();
    for (name, want) in &tensors {
        let w = Q4kMatrix::from_gguf(&ctx, &file, name).unwrap();
        let out = guarded_f32(&ctx, w.n() * w.k()).unwrap();
        let mut b = ctx.batch();
        gpu::dequantize(&mut b, &w, &out).unwrap();
        b.run().unwrap();
        let got = ctx.read(&out).unwrap();
        for (i, (g, e)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.to_bits(), e.to_bits(), "{name} value {i}: GPU {g} vs gguf-py {e}");
        }
        assert!(got[want.len()..].iter().all(|v| v.to_bits() == wgkernels::suite::POISON_F32), "{name}: guard overwritten");
        println!("q4k_dequantize {name}: {} values bit-exact with gguf-py", want.len());
    }
}

#[test]
fn golden_upload_roundtrip_and_other_types() {
    let ctx = common::context();
    let (file, _) = golden();
    for t in file.tensors() {
        let bytes = file.tensor_data(t).unwrap();
        match GgufTensor::upload_info(&ctx, &file, t).unwrap() {
            GgufTensor::Q4K(m) => {
                assert_eq!(m.k(), t.dims[0] as usize);
                let back = m.download(&ctx).unwrap();
                assert_eq!(q4k::blocks_to_bytes(&back), bytes, "{}", t.name);
            }
            GgufTensor::F32 { dims, data } => {
                assert_eq!(dims, t.dims);
                assert_eq!(bytemuck::cast_slice::<f32, u8>(&ctx.read(&data).unwrap()), bytes);
            }
            GgufTensor::F16 { dims, data } => {
                assert_eq!(dims, t.dims);
                assert_eq!(bytemuck::cast_slice::<half::f16, u8>(&ctx.read(&data).unwrap()), bytes);
            }
        }
    }
    assert!(matches!(Q4kMatrix::from_gguf(&ctx, &file, "f32_tensor"), Err(Error::Format(_))));
    assert!(matches!(Q4kMatrix::from_gguf(&ctx, &file, "no such tensor"), Err(Error::Argument(_))));
}

#[test]
fn shape_and_buffer_errors() {
    let ctx = common::context();
    let mut rng = Rng::new(3);
    let blocks = gpu::random_blocks(&mut rng, 6);
    // K % 256 != 0 is a typed error, before anything is uploaded.
    assert!(matches!(Q4kMatrix::upload(&ctx, 3, 300, &blocks), Err(Error::Shape(_))));
    assert!(matches!(Q4kMatrix::upload(&ctx, 6, 128, &blocks), Err(Error::Shape(_))));
    assert!(matches!(Q4kMatrix::upload(&ctx, 0, 256, &[]), Err(Error::Shape(_))));
    assert!(matches!(Q4kMatrix::upload(&ctx, 4, 256, &blocks), Err(Error::Argument(_))), "block count != n * k / 256");
    let bytes = q4k::blocks_to_bytes(&blocks);
    assert!(matches!(Q4kMatrix::upload_bytes(&ctx, 6, 256, &bytes[1..]), Err(Error::Argument(_))));

    let w = Q4kMatrix::upload(&ctx, 3, 2 * QK_K, &blocks).unwrap();
    let x = ctx.upload(&vec![1.0f32; 2 * QK_K]).unwrap();
    let short_x = ctx.upload(&vec![1.0f32; 2 * QK_K - 1]).unwrap();
    let y = ctx.alloc::<f32>(3).unwrap();
    let short_y = ctx.alloc::<f32>(2).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(gpu::gemv(&mut b, &w, &short_x, &y), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(gpu::gemv(&mut b, &w, &x, &short_y), Err(Error::BufferTooSmall { name: "y", .. })));
    assert!(matches!(gpu::gemm(&mut b, &w, &x, &y, 0), Err(Error::Shape(_))));
    assert!(matches!(gpu::gemm(&mut b, &w, &x, &y, 2), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(gpu::dequantize(&mut b, &w, &y), Err(Error::BufferTooSmall { name: "out", .. })));
    assert!(b.is_empty(), "nothing dispatched");
}

/// Split-K GEMMs reuse the context's scratch buffer for their partial sums: two of them of
/// different shapes (and a GEMV between them) recorded in one batch, after an earlier batch left
/// other partials in the scratch, must each match the f64 reference.
#[test]
fn split_gemms_share_the_scratch() {
    let ctx = common::context();
    let mut rng = Rng::new(Rng::fresh_seed());
    // (m, n, k): few output tiles and a long K, so both take the split path.
    let shapes = [(5usize, 96usize, 2048usize), (3, 160, 1280), (2, 64, 3072)];
    let mut setups = Vec::new();
    for &(m, n, k) in &shapes {
        let rows: Vec<Vec<f32>> = (0..n).map(|_| rng.uniform_vec(k, -1.0, 1.0)).collect();
        let blocks: Vec<_> = rows.iter().flat_map(|r| q4k::quantize_row(r).unwrap()).collect();
        let w = Q4kMatrix::upload_bytes(&ctx, n, k, &q4k::blocks_to_bytes(&blocks)).unwrap();
        let vals: Vec<f32> = blocks.chunks(k / QK_K).flat_map(q4k::dequantize_row).collect();
        let mag = gpu::operand_magnitudes(&blocks);
        let xs = rng.uniform_vec(m * k, -1.0, 1.0);
        let (yref, ymag) = reference::gemm(m, n, k, |r, c| vals[r * k + c] as f64, |r, c| mag[r * k + c], &xs);
        setups.push((m, n, w, ctx.upload(&xs).unwrap(), guarded_f32(&ctx, m * n).unwrap(), yref, ymag));
    }
    // The last shape alone first, so the scratch holds stale partials of another shape.
    {
        let (m, _, w, x, y, ..) = &setups[2];
        let mut b = ctx.batch();
        gpu::gemm(&mut b, w, x, y, *m).unwrap();
        b.run().unwrap();
    }
    let gv_x = ctx.upload(&rng.uniform_vec(setups[0].2.k(), -1.0, 1.0)).unwrap();
    let gv_y = guarded_f32(&ctx, setups[0].1).unwrap();
    let mut b = ctx.batch();
    gpu::gemm(&mut b, &setups[0].2, &setups[0].3, &setups[0].4, setups[0].0).unwrap();
    gpu::gemv(&mut b, &setups[0].2, &gv_x, &gv_y).unwrap();
    gpu::gemm(&mut b, &setups[1].2, &setups[1].3, &setups[1].4, setups[1].0).unwrap();
    gpu::gemm(&mut b, &setups[2].2, &setups[2].3, &setups[2].4, setups[2].0).unwrap();
    b.run().unwrap();
    for (i, (m, n, _, _, y, yref, ymag)) in setups.iter().enumerate() {
        let check = compare(&ctx.read(y).unwrap(), yref, ymag, 1e-5);
        println!("q4k_gemm m={m} n={n} (shape {i}): {}", check.summary());
        assert!(check.passed(), "shape {i}: {}", check.summary());
    }
}
