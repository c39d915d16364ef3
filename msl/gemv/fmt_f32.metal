
// ---- F32 decode (mirrors wgsl/fmt_f32.wgsl; layout: src/formats/f32.rs) ----
// Row = k f32 words, padded with zeros to 4; an item is one float4 (4 weights): a 16-byte load,
// consecutive for consecutive items. Any k >= 1: x is zeroed at columns >= k, as the twin's mm_x4.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_f32_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 710e2c2c758eee8c

struct FmtRow {
    float4 w;
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    FmtRow r;
    r.w = as_type<float4>(wq[base + item]);
    return r;
}

struct FmtX {
    float4 v;
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    r.v = x4(p, x, item);
    return r;
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    return dot(w.w, x.v);
}
