//! The bench's reference kernels check their own output before they are timed: the copy kernel a
//! marker, the read-ceiling kernel an XOR digest of everything it read (odd sizes: a partial last
//! workgroup and a partial last 16 KiB block).

mod common;

use wgkernels::timing::{copy_bandwidth, read_ceiling};

#[test]
fn copy_and_read_kernels_verify_and_time() {
    let ctx = common::context();
    let (gbs, t) = copy_bandwidth(&ctx, 1 << 20, 2).expect("copy kernel verified");
    assert!(gbs > 0.0 && t.single_us > 0.0 && t.batched_us > 0.0);
    for bytes in [16, 16 * 1023 + 4, 3 * 16384 + 48, 1 << 20] {
        let t = read_ceiling(&ctx, bytes, 3, 2).unwrap_or_else(|e| panic!("read kernel over {bytes} bytes: {e}"));
        assert!(t.single_us > 0.0 && t.batched_us > 0.0, "{bytes} bytes: {t:?}");
    }
}

/// A profiled batch gives one time per dispatch, labelled with its kernel, and computes what an
/// ordinary batch computes; a full profile and bad capacities are typed errors.
#[test]
fn profiled_batch_times_every_dispatch() {
    use wgkernels::kernels::elementwise::{add, add_inplace};
    let ctx = common::context();
    if !ctx.caps().timestamps {
        eprintln!("profiled batch: unsupported here (no timestamp queries)");
        assert!(matches!(ctx.profiled_batch(4), Err(wgkernels::Error::Limit(_))));
        return;
    }
    let n = 1000 + fastrand::usize(..100);
    let a: Vec<f32> = (0..n).map(|_| fastrand::f32() - 0.5).collect();
    let c: Vec<f32> = (0..n).map(|_| fastrand::f32() - 0.5).collect();
    let (ga, gc, gy) = (ctx.upload(&a).unwrap(), ctx.upload(&c).unwrap(), ctx.alloc::<f32>(n).unwrap());
    let mut b = ctx.profiled_batch(3).unwrap();
    add(&mut b, &ga, &gc, &gy, n).unwrap();
    add_inplace(&mut b, &gy, &gc, n).unwrap();
    add_inplace(&mut b, &gy, &ga, n).unwrap();
    // A fourth dispatch does not fit: refused before anything is recorded.
    assert!(matches!(add_inplace(&mut b, &gy, &ga, n), Err(wgkernels::Error::Limit(_))));
    let times = b.submit().unwrap().profile().unwrap().expect("profiled");
    assert_eq!(times.len(), 3);
    assert!(times.iter().all(|(label, ns)| label.contains("Binary") && ns.is_finite() && *ns >= 0.0), "{times:?}");
    let y = ctx.read(&gy).unwrap();
    for i in 0..n {
        let want = 2.0 * (a[i] as f64 + c[i] as f64);
        assert!((y[i] as f64 - want).abs() <= 1e-6, "{i}: {} vs {want}", y[i]);
    }
    // An unprofiled batch has no profile.
    let mut b = ctx.batch();
    add(&mut b, &ga, &gc, &gy, n).unwrap();
    assert!(b.submit().unwrap().profile().unwrap().is_none());
    for bad in [0, 2049, usize::MAX] {
        assert!(matches!(ctx.profiled_batch(bad), Err(wgkernels::Error::Argument(_))), "{bad}");
    }
}
