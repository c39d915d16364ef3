//! The bench's reference kernels check their own output before they are timed: the copy kernel a
//! marker, the read-ceiling kernel an XOR digest of everything it read (odd sizes: a partial last
//! workgroup and a partial last 16 KiB block). And what timing and loops rely on in batches:
//! profiles, batches split into submissions, the bind cache's eviction.

mod common;

use wgkernels::batch::BindCache;
use wgkernels::kernels::elementwise::{add_inplace, scale_inplace};
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
    use wgkernels::kernels::elementwise::add;
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

/// A length of `min..min + 100` and two random vectors of it, for the batch tests below.
fn two_vectors(min: usize) -> (usize, Vec<f32>, Vec<f32>) {
    let n = min + fastrand::usize(..100);
    let v = || (0..n).map(|_| fastrand::f32() - 0.5).collect();
    (n, v(), v())
}

/// A batch split into submissions ([`wgkernels::batch::Batch::submit_early`]) computes what one
/// submission computes: a chain of dependent dispatches whose parameters differ (order and every
/// part's parameter upload matter), fresh and through a bind cache, first parts of one and a few
/// dispatches, and a batch whose last part ends at its last dispatch (14 = 2 + 4 + 8); a timed
/// split batch adds up its parts' GPU times.
#[test]
fn split_batch_runs_in_order_and_times_its_parts() {
    let ctx = common::context();
    let (n, a, c) = two_vectors(300);
    let gc = ctx.upload(&c).unwrap();
    let cache = BindCache::default();
    for (every, steps, cached, timed) in [(3, 40, false, true), (1, 90, true, true), (7, 50, true, false), (2, 7, false, true), (0, 20, false, true)] {
        let scales: Vec<f32> = (0..steps).map(|_| 0.5 + fastrand::f32()).collect();
        let gy = ctx.upload(&a).unwrap();
        let b = if timed { ctx.timed_batch() } else { ctx.batch() };
        let mut b = if cached { b.with_cache(&cache) } else { b }.submit_early(every);
        let mut want = a.clone();
        for &s in &scales {
            add_inplace(&mut b, &gy, &gc, n).unwrap();
            scale_inplace(&mut b, &gy, n, s).unwrap();
            for (w, &ci) in want.iter_mut().zip(&c) {
                *w = (*w + ci) * s;
            }
        }
        let ns = b.submit().unwrap().gpu_ns().unwrap();
        assert_eq!(ns.is_some(), timed && ctx.caps().timestamps, "every {every}");
        assert!(ns.is_none_or(|t| t.is_finite() && t > 0.0), "every {every}: {ns:?}");
        let y = ctx.read(&gy).unwrap();
        for i in 0..n {
            assert!((y[i] - want[i]).abs() <= 1e-5 * want[i].abs().max(1.0), "every {every}, {i}: {} vs {}", y[i], want[i]);
        }
    }
}

/// A bind cache past its capacity drops what recent batches did not use and reuses those
/// parameter slots: a loop whose batches share two dispatches and vary a third computes what it
/// computes uncached, batch after batch (a reused slot holds its new block), while the cache
/// stays near its capacity.
#[test]
fn bind_cache_evicts_what_recent_batches_did_not_use() {
    let ctx = common::context();
    let (n, a, c) = two_vectors(200);
    let (ga, gc, gy) = (ctx.upload(&a).unwrap(), ctx.upload(&c).unwrap(), ctx.upload(&a).unwrap());
    let cache = BindCache::new(12);
    let mut want = a.clone();
    for step in 0..40 {
        // A new scale every batch, as a decode step's position.
        let s = 0.5 + ((step * 37) % 50) as f32 * 0.01;
        let mut b = ctx.batch().with_cache(&cache);
        add_inplace(&mut b, &gy, &gc, n).unwrap();
        scale_inplace(&mut b, &gy, n, s).unwrap();
        add_inplace(&mut b, &gy, &ga, n).unwrap();
        b.run().unwrap();
        for ((w, &ci), &ai) in want.iter_mut().zip(&c).zip(&a) {
            *w = (*w + ci) * s + ai;
        }
        let y = ctx.read(&gy).unwrap();
        for i in 0..n {
            assert!((y[i] - want[i]).abs() <= 1e-5 * want[i].abs().max(1.0), "batch {step}, {i}: {} vs {}", y[i], want[i]);
        }
        assert!(cache.len() <= 13, "batch {step}: {} bind groups cached", cache.len());
    }
}
