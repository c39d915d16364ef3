//! GGUF parsing on adversarial files: peak heap while parsing stays within twice the file size
//! plus the parser's fixed slack (`METADATA_SLACK`, 64 KiB: a file image of N bytes plus at most
//! N + slack bytes of metadata; a counting global allocator in this test binary measures it, per
//! thread, so tests and the harness running beside a measurement do not count),
//! and counts that claim more than the file holds are errors before anything is reserved.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use wgkernels::formats::gguf::{GgufFile, MetaArray, MetaValue, METADATA_SLACK};
use wgkernels::formats::FormatError;

struct Counting;

// Counted per thread, and only on a thread inside `peak_during`: the test harness runs tests and
// prints results on other threads at the same time. (Const-initialised thread locals: reading
// them does not allocate.)
thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = ON.try_with(|on| {
        if on.get() {
            let now = CURRENT.with(|c| {
                c.set(c.get() + delta);
                c.get()
            });
            PEAK.with(|p| p.set(p.get().max(now)));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        count(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            // Counted as if old and new blocks coexisted (a moving realloc does hold both).
            count(new as isize);
            count(-(l.size() as isize));
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Peak heap this thread allocates above its level at the call while `f` runs.
fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    ON.with(|on| on.set(true));
    let r = f();
    ON.with(|on| on.set(false));
    (r, PEAK.with(|p| p.get()).max(0) as usize)
}

#[derive(Default)]
struct Raw(Vec<u8>);
impl Raw {
    fn header(n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(3).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
}

const N: usize = 8 << 20;

/// The adversarial files: each maximises items per file byte for one kind of item.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    // One U8 array filling the file (was 32 heap bytes per file byte).
    let mut r = Raw::header(0, 1);
    r.str("a").u32(9).u32(0).u64(N as u64);
    r.0.resize(r.0.len() + N, 7);
    v.push(("u8 array", r.0));
    // Bools, same shape.
    let mut r = Raw::header(0, 1);
    r.str("a").u32(9).u32(7).u64(N as u64);
    r.0.resize(r.0.len() + N, 1);
    v.push(("bool array", r.0));
    // Empty strings: 8 file bytes each.
    let mut r = Raw::header(0, 1);
    r.str("a").u32(9).u32(8).u64((N / 8) as u64);
    r.0.resize(r.0.len() + N, 0);
    v.push(("empty strings", r.0));
    // Empty nested arrays: 12 file bytes each.
    let mut r = Raw::header(0, 1);
    r.str("a").u32(9).u32(9).u64((N / 12) as u64);
    for _ in 0..N / 12 {
        r.u32(0).u64(0);
    }
    v.push(("nested empty arrays", r.0));
    // Many tiny key/values (13 bytes each: empty key, type U8, one byte)... keys must differ, so
    // 4-byte keys: 21 bytes each.
    let count = N / 21;
    let mut r = Raw::header(0, count as u64);
    for i in 0..count as u32 {
        r.u64(4).0.extend_from_slice(&i.to_le_bytes());
        r.u32(0).0.push(1);
    }
    v.push(("tiny key/values", r.0));
    // Many minimal tensor infos (4-byte names, no dims, F32, offset 0 ... each distinct name).
    let count = N / 28;
    let mut r = Raw::header(count as u64, 0);
    for i in 0..count as u32 {
        r.u64(4).0.extend_from_slice(&i.to_le_bytes());
        r.u32(0).u32(0).u64(0);
    }
    v.push(("tiny tensor infos", r.0));
    v
}

#[test]
fn parsing_peak_memory_is_within_twice_the_file_size() {
    let dir = std::env::temp_dir().join(format!("wgkernels-gguf-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in files() {
        let path = dir.join("f.gguf");
        std::fs::write(&path, &bytes).unwrap();
        let len = bytes.len();
        drop(bytes);
        let (r, peak) = peak_during(|| GgufFile::read(&path).map(|f| f.metadata().len()));
        let ratio = peak as f64 / len as f64;
        println!("{name:22} {len:>9} bytes: peak {peak:>10} ({ratio:.2}x) -> {:?}", r.as_ref().map_err(|e| e.to_string()));
        assert!(peak <= 2 * len + METADATA_SLACK as usize, "{name}: peak {peak} bytes for a {len}-byte file");
        match r {
            Ok(_) => {}
            Err(FormatError::MetadataTooLarge { .. }) => {}
            Err(e) => panic!("{name}: unexpected error {e}"),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The compact arrays parse back to what was written.
#[test]
fn compact_arrays_keep_their_values() {
    use wgkernels::formats::gguf::GgufWriter;
    let strs: MetaArray = MetaArray::String(["", "x", "héllo"].iter().collect());
    let bytes = GgufWriter::new()
        .metadata("u8", MetaArray::U8(vec![0, 255]).into())
        .metadata("i8", MetaArray::I8(vec![-128, 127]).into())
        .metadata("f32", MetaArray::F32(vec![1.5, -0.0]).into())
        .metadata("s", strs.clone().into())
        .to_bytes();
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(f.get("u8"), Some(&MetaValue::Array(MetaArray::U8(vec![0, 255]))));
    assert_eq!(f.get("i8").and_then(MetaValue::as_array).map(|a| a.iter().collect::<Vec<_>>()), Some(vec![MetaValue::I8(-128), MetaValue::I8(127)]));
    assert_eq!(f.get("f32").and_then(MetaValue::as_array).and_then(|a| a.get(0)), Some(MetaValue::F32(1.5)));
    assert_eq!(f.get("s"), Some(&MetaValue::Array(strs)));
    assert_eq!(f.get("s").and_then(MetaValue::as_array).and_then(|a| a.strings()).and_then(|s| s.get(2)), Some("héllo"));
}

/// Counts far beyond the input are rejected before any reservation (a 160 MiB file used to
/// abort the process asking for 5 GB).
#[test]
fn huge_counts_are_rejected_up_front() {
    for ty in [0u32, 4, 8, 9] {
        let mut r = Raw::header(0, 1);
        r.str("a").u32(9).u32(ty).u64(1 << 40);
        r.0.resize(r.0.len() + 4096, 0);
        let (res, peak) = peak_during(|| GgufFile::parse(&r.0).map(|_| ()));
        assert!(matches!(res, Err(FormatError::LengthExceedsFile { .. })), "type {ty}: {res:?}");
        assert!(peak <= 2 * r.0.len() + 4096, "type {ty}: peak {peak}");
    }
}
