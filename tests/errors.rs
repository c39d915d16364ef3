//! Bad input returns typed errors before any dispatch: never a panic, never a GPU write.

mod common;

use wgkernels::kernels::int4::{self, HostInt4, Int4Matrix, Int4Mode};
use wgkernels::kernels::int8::{self, HostInt8, Int8Matrix, Int8Scale};
use wgkernels::suite::Rng;
use wgkernels::{Context, ContextOptions, Error, Variant, VariantPolicy};

fn host(rng: &mut Rng, n: usize, k: usize, g: usize) -> HostInt4 {
    int4::random_host(rng, n, k, g, Int4Mode::Signed, false)
}

#[test]
fn int4_shape_and_argument_errors() {
    let ctx = common::context();
    let mut rng = Rng::new(1);
    assert!(matches!(Int4Matrix::alloc(&ctx, 4, 0, 32, Int4Mode::Signed), Err(Error::Shape(_))));
    assert!(matches!(Int4Matrix::alloc(&ctx, 0, 4, 32, Int4Mode::Signed), Err(Error::Shape(_))));
    assert!(matches!(Int4Matrix::alloc(&ctx, 4, 4, 0, Int4Mode::Signed), Err(Error::Argument(_))));

    let mut h = host(&mut rng, 5, 70, 32);
    h.scales.pop();
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "scales of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.zeros = Some(vec![0.0; 3]);
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "zeros of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.codes.truncate(5 * 35 - 1);
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "codes of the wrong length");
    let mut h = host(&mut rng, 5, 70, 32);
    h.k = 0;
    assert!(matches!(Int4Matrix::upload(&ctx, &h), Err(Error::Shape(_))), "k = 0");
}

#[test]
fn int4_buffer_length_errors() {
    let ctx = common::context();
    let mut rng = Rng::new(2);
    let w = Int4Matrix::upload(&ctx, &host(&mut rng, 33, 100, 32)).unwrap();
    let x_short = ctx.upload(&vec![1.0f32; 99]).unwrap();
    let x = ctx.upload(&vec![1.0f32; 100]).unwrap();
    let y_short = ctx.alloc::<f32>(32).unwrap();
    let y = ctx.alloc::<f32>(33).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(int4::gemv(&mut b, &w, &x_short, &y), Err(Error::BufferTooSmall { name: "x", .. })));
    assert!(matches!(int4::gemv(&mut b, &w, &x, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    assert!(matches!(int4::gemm(&mut b, &w, &x, &y, 0), Err(Error::Shape(_))));
    assert!(matches!(int4::gemm(&mut b, &w, &x, &y, 2), Err(Error::BufferTooSmall { .. })));
    let out = ctx.alloc::<f32>(33 * 100 - 1).unwrap();
    assert!(matches!(int4::dequantize(&mut b, &w, &out), Err(Error::BufferTooSmall { .. })));
    let src = ctx.upload(&vec![0.5f32; 33 * 100 - 1]).unwrap();
    assert!(matches!(int4::quantize(&mut b, &src, &w), Err(Error::BufferTooSmall { .. })));
    assert_eq!(b.len(), 0, "nothing may be recorded after a rejected call");
}

#[test]
fn int8_errors() {
    let ctx = common::context();
    let h = HostInt8 { n: 3, k: 5, signed: true, codes: vec![1; 15], scale: Int8Scale::PerRow { scales: vec![1.0; 2], zeros: vec![0.0; 3] } };
    assert!(matches!(Int8Matrix::upload(&ctx, &h), Err(Error::Argument(_))), "per-row scales of the wrong length");
    let h = HostInt8 { n: 3, k: 0, signed: true, codes: vec![], scale: Int8Scale::PerTensor { scale: 1.0, zero: 0.0 } };
    assert!(matches!(Int8Matrix::upload(&ctx, &h), Err(Error::Shape(_))));
    let h = HostInt8 { n: 3, k: 5, signed: false, codes: vec![1; 14], scale: Int8Scale::PerTensor { scale: 1.0, zero: 0.0 } };
    assert!(matches!(Int8Matrix::upload(&ctx, &h), Err(Error::Argument(_))));
    let h = HostInt8 { n: 3, k: 5, signed: false, codes: vec![1; 15], scale: Int8Scale::PerTensor { scale: 1.0, zero: 0.0 } };
    let w = Int8Matrix::upload(&ctx, &h).unwrap();
    let x = ctx.upload(&[1.0f32; 4]).unwrap();
    let y = ctx.alloc::<f32>(3).unwrap();
    assert!(matches!(int8::gemv(&mut ctx.batch(), &w, &x, &y), Err(Error::BufferTooSmall { name: "x", .. })));
}

#[test]
fn required_variant_that_cannot_run_is_an_error() {
    let base = common::context();
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Native)));
    let mut rng = Rng::new(3);
    let w = Int4Matrix::upload(&ctx, &host(&mut rng, 4, 64, 32)).unwrap();
    let x = ctx.upload(&[1.0f32; 64]).unwrap();
    let y = ctx.alloc::<f32>(4).unwrap();
    let r = int4::gemv(&mut ctx.batch(), &w, &x, &y);
    assert!(matches!(r, Err(Error::Unsupported { variant: Variant::Native, .. })), "{r:?}");
    // The GEMM has no subgroup version: requiring one is an error, preferring one falls back.
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Subgroup)));
    assert!(matches!(ctx.variant_for(&int4::GEMM), Err(Error::Unsupported { .. })));
    let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Prefer(Variant::Subgroup)));
    assert_eq!(ctx.variant_for(&int4::GEMM).unwrap(), Variant::Portable);
}

/// A device whose storage-binding limit is small: a matrix over it is rejected with
/// BindingTooLarge before dispatch (wgpu would otherwise raise a validation error).
#[test]
fn binding_over_the_device_limit() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())).expect("adapter");
    let limits = wgpu::Limits { max_storage_buffer_binding_size: 64 << 10, ..wgpu::Limits::default() };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor { required_limits: limits, ..Default::default() })).expect("device");
    let ctx = Context::from_device(device, queue, ContextOptions::default()).unwrap();
    assert_eq!(ctx.caps().limits.max_storage_buffer_binding_size, 64 << 10);
    let mut rng = Rng::new(4);
    let w = Int4Matrix::upload(&ctx, &host(&mut rng, 256, 1024, 32)).unwrap(); // 128 KiB of codes
    let x = ctx.upload(&vec![1.0f32; 1024]).unwrap();
    let y = ctx.alloc::<f32>(256).unwrap();
    let r = int4::gemv(&mut ctx.batch(), &w, &x, &y);
    assert!(matches!(r, Err(Error::BindingTooLarge { name: "codes", .. })), "{r:?}");
    // Within the limit it runs (from an application-owned device, without subgroups enabled).
    let w = Int4Matrix::upload(&ctx, &host(&mut rng, 16, 64, 32)).unwrap();
    let mut b = ctx.batch();
    int4::gemv(&mut b, &w, &x, &y).unwrap();
    b.run().unwrap();
}

#[test]
fn q8_activation_errors() {
    use wgkernels::kernels::q4k::{self, Q4kMatrix};
    use wgkernels::kernels::q8::{self, Q8Activations};
    let ctx = common::context();
    let mut rng = Rng::new(8);
    assert!(matches!(Q8Activations::alloc(&ctx, 0), Err(Error::Shape(_))));
    assert!(matches!(Q8Activations::alloc(&ctx, 100), Err(Error::Shape(_))), "k % 32 != 0");
    let xq = Q8Activations::alloc(&ctx, 96).unwrap();
    assert!(!xq.has_q4k());
    let x_short = ctx.upload(&vec![1.0f32; 95]).unwrap();
    let y = ctx.alloc::<f32>(64).unwrap();
    let y_short = ctx.alloc::<f32>(4).unwrap();
    let mut b = ctx.batch();
    assert!(matches!(q8::quantize_activations(&mut b, &x_short, &xq), Err(Error::BufferTooSmall { name: "x", .. })));
    // INT4: k % 32, group_size % 32, k mismatch, y too short.
    let w_k = Int4Matrix::upload(&ctx, &host(&mut rng, 5, 100, 32)).unwrap();
    assert!(matches!(int4::gemv_q8(&mut b, &w_k, &xq, &y), Err(Error::Shape(_))), "k % 32 != 0");
    let w_g = Int4Matrix::upload(&ctx, &host(&mut rng, 5, 96, 48)).unwrap();
    assert!(matches!(int4::gemv_q8(&mut b, &w_g, &xq, &y), Err(Error::Argument(_))), "group_size % 32 != 0");
    let w_128 = Int4Matrix::upload(&ctx, &host(&mut rng, 5, 128, 32)).unwrap();
    assert!(matches!(int4::gemv_q8(&mut b, &w_128, &xq, &y), Err(Error::Shape(_))), "k mismatch");
    let w = Int4Matrix::upload(&ctx, &host(&mut rng, 5, 96, 32)).unwrap();
    assert!(matches!(int4::gemv_q8(&mut b, &w, &xq, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    // Q4_K: k mismatch, no Q4_K order (k % 256 != 0 cannot happen for a Q4_K matrix, so a
    // 256-column matrix against 96- and 512-column activations), y too short.
    let blocks = q4k::random_blocks(&mut rng, 5);
    let wq = Q4kMatrix::upload(&ctx, 5, 256, &blocks).unwrap();
    assert!(matches!(q4k::gemv_q8(&mut b, &wq, &xq, &y), Err(Error::Shape(_))));
    let xq512 = Q8Activations::alloc(&ctx, 512).unwrap();
    assert!(matches!(q4k::gemv_q8(&mut b, &wq, &xq512, &y), Err(Error::Shape(_))));
    let xq256 = Q8Activations::alloc(&ctx, 256).unwrap();
    assert!(matches!(q4k::gemv_q8(&mut b, &wq, &xq256, &y_short), Err(Error::BufferTooSmall { name: "y", .. })));
    assert_eq!(b.len(), 0, "nothing may be recorded after a rejected call");
    // A context that requires Subgroup cannot quantise (Portable only): typed, not a panic.
    let sub = ctx.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(Variant::Subgroup)));
    let x = sub.upload(&vec![1.0f32; 96]).unwrap();
    let mut b = sub.batch();
    assert!(matches!(q8::quantize_activations(&mut b, &x, &xq), Err(Error::Unsupported { .. })));
}
