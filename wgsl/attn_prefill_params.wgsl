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
}
