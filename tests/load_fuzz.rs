//! `Model::load` over mutated fixture files: header, metadata and tensor-info bytes changed by
//! a seeded RNG (bit flips, bytes, 32- and 64-bit integers that stress sizes, cuts) and numeric
//! metadata values set to extremes. Every case must end in a model or a typed error, without a
//! panic or an abort, and the Rust heap must stay within a small multiple of the file's size
//! (a counting global allocator measures the peak of each case).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use wgkernels::formats::gguf::{GgufFile, GgufWriter, MetaValue};
use wgkernels::model::{Model, ModelError};
use wgkernels::Context;

/// The system allocator, counting the bytes held now and their peak.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = HELD.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        HELD.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            HELD.fetch_sub(l.size(), Ordering::Relaxed);
            grew(new);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// One measured case at a time (the counters are global).
static SERIAL: Mutex<()> = Mutex::new(());

/// Heap bytes a load may hold above what was held before it: `FACTOR` times the file (the
/// file's own copy is made before the measurement) plus a fixed slack for the device's
/// pipelines and bookkeeping.
const FACTOR: usize = 4;
const SLACK: usize = 32 << 20;

/// Load `bytes` (parse and upload), returning the outcome and the peak heap growth.
fn measured_load(ctx: &Context, bytes: Vec<u8>) -> (std::thread::Result<Result<(), String>>, usize) {
    let base = HELD.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let file = GgufFile::from_vec(bytes).map_err(ModelError::from).map_err(|e| e.to_string())?;
        Model::load(ctx, file, &mut |_| {}).map(drop).map_err(|e| e.to_string())
    }));
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn check(ctx: &Context, what: &str, bytes: Vec<u8>) -> Result<(), String> {
    let size = bytes.len();
    let (r, peak) = measured_load(ctx, bytes);
    let r = r.unwrap_or_else(|_| panic!("{what}: Model::load panicked"));
    let bound = FACTOR * size + SLACK;
    assert!(peak <= bound, "{what}: load held {peak} heap bytes, over {bound} for a file of {size} ({:?})", r.as_ref().err());
    r
}

/// A fixture without its tokenizer keys (large arrays the loader never reads, where mutations
/// would be wasted), as bytes.
fn model_fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models").join(name);
    let file = GgufFile::open(&path).expect("fixture");
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata().iter().filter(|(k, _)| !k.starts_with("tokenizer.")) {
        w = w.metadata(k.clone(), v.clone());
    }
    for t in file.tensors() {
        w = w.tensor(t.name.clone(), &t.dims, t.ggml_type, file.tensor_data(t).unwrap().to_vec()).unwrap();
    }
    w.to_bytes()
}

/// `bytes` with metadata key `key` set to `value`.
fn with_key(bytes: &[u8], key: &str, value: MetaValue) -> Vec<u8> {
    let file = GgufFile::from_vec(bytes.to_vec()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata() {
        w = w.metadata(k.clone(), if k == key { value.clone() } else { v.clone() });
    }
    for t in file.tensors() {
        w = w.tensor(t.name.clone(), &t.dims, t.ggml_type, file.tensor_data(t).unwrap().to_vec()).unwrap();
    }
    w.to_bytes()
}

/// Integers at the edges of what sizes and counts hold.
const EXTREMES: [u64; 14] = [0, 1, 2, 3, 255, 1 << 16, (1 << 31) - 1, 1 << 31, u32::MAX as u64, 1 << 32, 1_000_000, 10_000_000, 1 << 36, u64::MAX];

/// Metadata and tensor infos that would size allocations: a huge block count (every per-layer
/// name was built before any was checked: 10^6 blocks held ~690 MiB, 10^7 aborted), and a huge
/// embedding length with an empty embedding table (a vector of that length was allocated
/// before the shape check).
#[test]
fn metadata_sizes_are_bounded_before_allocating() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = common::context();
    let base = model_fixture("llama-tiny-q4_k_m.gguf");
    for n in [1_000_000u64, 10_000_000, u64::MAX] {
        let r = check(&ctx, &format!("block_count {n}"), with_key(&base, "llama.block_count", MetaValue::U64(n)));
        let e = r.expect_err("a block count past the file's tensors");
        assert!(e.contains("llama.block_count"), "{e}");
    }
    // embedding_length 2^36 and a token_embd.weight of [2^36, 0] (no bytes).
    let file = GgufFile::from_vec(base.clone()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata() {
        w = w.metadata(k.clone(), if k == "llama.embedding_length" { MetaValue::U64(1 << 36) } else { v.clone() });
    }
    for t in file.tensors() {
        w = if t.name == "token_embd.weight" {
            w.tensor(t.name.clone(), &[1 << 36, 0], wgkernels::formats::gguf::GgmlType::F32, Vec::new())
        } else {
            w.tensor(t.name.clone(), &t.dims, t.ggml_type, file.tensor_data(t).unwrap().to_vec())
        }
        .unwrap();
    }
    let e = check(&ctx, "embedding_length 2^36", w.to_bytes()).expect_err("an empty embedding table");
    assert!(e.contains("token_embd.weight"), "{e}");
}

/// Mutated files per fixture (on lavapipe both fixtures' cases take well under a second).
const CASES: usize = 250;

#[test]
fn mutated_fixtures_load_or_fail_typed() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = common::context();
    let start = std::time::Instant::now();
    let mut rng = fastrand::Rng::with_seed(0x10ad);
    let (mut loaded, mut typed) = (0, 0);
    for name in ["llama-tiny-q4_k_m.gguf", "qwen2-tiny-q4_k_m.gguf"] {
        let base = model_fixture(name);
        let file = GgufFile::from_vec(base.clone()).unwrap();
        // Header, metadata and tensor infos: everything before the data section.
        let head = file.data_offset() as usize;
        let numeric: Vec<String> = file.metadata().iter().filter(|(_, v)| v.as_u64().is_some() || v.as_f64().is_some()).map(|(k, _)| k.clone()).collect();
        drop(file);
        for case in 0..CASES {
            let mut bytes = base.clone();
            let what = match rng.u32(0..6) {
                0 => {
                    let i = rng.usize(0..head);
                    bytes[i] ^= 1 << rng.u32(0..8);
                    format!("bit flip at {i}")
                }
                1 => {
                    let i = rng.usize(0..head);
                    bytes[i] = rng.u8(..);
                    format!("byte at {i}")
                }
                2 => {
                    let i = rng.usize(0..head - 8);
                    let v = EXTREMES[rng.usize(0..EXTREMES.len())];
                    bytes[i..i + 8].copy_from_slice(&v.to_le_bytes());
                    format!("u64 {v} at {i}")
                }
                3 => {
                    let i = rng.usize(0..head - 4);
                    let v = EXTREMES[rng.usize(0..EXTREMES.len())] as u32;
                    bytes[i..i + 4].copy_from_slice(&v.to_le_bytes());
                    format!("u32 {v} at {i}")
                }
                4 => {
                    let cut = rng.usize(0..bytes.len());
                    bytes.truncate(cut);
                    format!("cut at {cut}")
                }
                _ => {
                    let key = &numeric[rng.usize(0..numeric.len())];
                    let v = EXTREMES[rng.usize(0..EXTREMES.len())];
                    let value = if rng.bool() { MetaValue::U64(v) } else { MetaValue::F64(f64::from_bits(rng.u64(..))) };
                    let what = format!("{key} = {value:?}");
                    bytes = with_key(&base, key, value);
                    what
                }
            };
            match check(&ctx, &format!("{name} case {case}: {what}"), bytes) {
                Ok(()) => loaded += 1,
                Err(_) => typed += 1,
            }
        }
    }
    println!("{loaded} loaded, {typed} typed errors, in {:.1} s", start.elapsed().as_secs_f64());
    assert!(typed > 0 && loaded > 0 && loaded + typed == 2 * CASES);
}
