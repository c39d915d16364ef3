//! `cargo +nightly fuzz run gguf_parse`: the GGUF reader must never panic, and every tensor
//! it accepts must be readable or give an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wgkernels::formats::gguf::{GgmlType, GgufFile};
use wgkernels::formats::q4k;

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = GgufFile::parse(data) {
        for t in file.tensors() {
            if let Ok(bytes) = file.tensor_data(t) {
                assert_eq!(Some(bytes.len() as u64), t.n_bytes);
                if t.ggml_type == GgmlType::Q4_K {
                    let blocks = q4k::blocks_from_bytes(bytes).expect("Q4_K size checked");
                    let _ = q4k::dequantize_row(&blocks);
                }
            }
        }
    }
});
