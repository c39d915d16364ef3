// The params block of every prefill pipeline (attn_prefill.wgsl with its portable / subgroup
// prologue, attn_prefill_matrix.wgsl): one layout, PrefillParams in src/kernels/attention/mod.rs.

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,      // heads / kv_heads
    kv_len: u32,
    offset: u32,
    causal: u32,
    rotate_k: u32,
    row_blocks: u32, // ceil(tokens * group / BQ)
    table_half: u32, // pairs per table row (= D / 2)
    scale_log2: f32, // softmax scale * log2(e)
    flags: u32,      // bit 0: half-split (NEOX) pairs, bit 1: f16 K/V; the WGSL kernels take these as
                     // overrides (NEOX, KV_F16), the Native MSL (which cannot) reads them here
    window: u32,     // sliding window W: query at position P sees keys j > P - W; 0: unlimited
    softcap: f32,    // score soft-cap * log2(e) (attn_softcap.wgsl); 0: off
    _p0: u32,
    _p1: u32,
}

// First key visible to a query at absolute position `pos` (its sliding window's start).
fn window_start(pos: u32) -> u32 {
    if (p.window != 0u && pos + 1u > p.window) {
        return pos + 1u - p.window;
    }
    return 0u;
}
