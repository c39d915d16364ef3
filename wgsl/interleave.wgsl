// Interleaved row layout shared by the INT4/INT8 GEMV kernels (Rust twin: kernels::interleave).
// A row of W u32 words (W a multiple of 4) is cut into blocks of 128 words; in a block of
// S = min(32, remaining vec4s) vec4s, vec4 i holds natural words i, i+S, i+2S, i+3S. Lanes that
// load consecutive vec4s of codes then need consecutive x values for each component: 16-byte
// weight loads and coalesced x loads at once.

// Natural index of component 0 of vec4 `v` of a row with `vec4s` vec4s; component j is at
// + j * stride.
fn il_word0(v: u32) -> u32 {
    return ((v >> 5u) << 7u) + (v & 31u);
}

fn il_stride(v: u32, vec4s: u32) -> u32 {
    return min(32u, vec4s - ((v >> 5u) << 5u));
}

// Physical word index of natural word w (used by kernels that read single words).
fn il_phys(w: u32, vec4s: u32) -> u32 {
    let b = w >> 7u;
    let s = min(32u, vec4s - (b << 5u));
    let t = w & 127u;
    return (b << 7u) + 4u * (t % s) + t / s;
}
