
// ---- F16 decode (mirrors wgsl/fmt_f16.wgsl; layout: src/formats/f16.rs) ----
// Row = halves packed two per word (even column low), padded with zeros to 8 weights; an item is
// one uint4 (8 weights): a 16-byte load, consecutive for consecutive items, and two float4 x
// loads shared by the ROWS rows; per row and item two float4 dots. Halves are decoded exactly
// with integer ops (subnormals, infinities and NaN: weights are data). Any k >= 1: x is zeroed
// at columns >= k, as the twin's mm_x4 (the row's padding is zero, x past k may hold anything).
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_f16_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 115ef266f7692606

struct FmtRow {
    uint4 w;
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    FmtRow r;
    r.w = wq[base + item];
    return r;
}

struct FmtX {
    float4 a;  // columns 8 item .. + 3
    float4 b;  // columns 8 item + 4 .. + 7
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    r.a = x4(p, x, 2u * item);
    r.b = x4(p, x, 2u * item + 1u);
    return r;
}

// The four halves of words a, b (low half first) as floats.
static inline float4 fmt_halves(uint a, uint b) {
    return f4(f16_full(a & 0xffffu), f16_full(a >> 16), f16_full(b & 0xffffu), f16_full(b >> 16));
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    return dot(fmt_halves(w.w.x, w.w.y), x.a) + dot(fmt_halves(w.w.z, w.w.w), x.b);
}
