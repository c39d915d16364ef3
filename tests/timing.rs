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
