
// ---- BF16 decode (mirrors wgsl/fmt_bf16.wgsl; layout: src/formats/bf16.rs) ----
// Row = bf16 values packed two per word (even column low), padded with zeros to 8 weights; an
// item is one uint4 (8 weights): a 16-byte load, consecutive for consecutive items. A bf16 is
// the high half of an f32, so widening is exact (NaN and infinities are data). Any k >= 1: x is
// zeroed at columns >= k, as the twin's mm_x4.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_bf16_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 ae411b1f8df554a8

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

// The two bf16 values of words a, b (low half first) as floats.
static inline float4 fmt_bf16x4(uint a, uint b) {
    return f4(as_type<float>(a << 16), as_type<float>(a & 0xffff0000u), as_type<float>(b << 16), as_type<float>(b & 0xffff0000u));
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    return dot(fmt_bf16x4(w.w.x, w.w.y), x.a) + dot(fmt_bf16x4(w.w.z, w.w.w), x.b);
}
