
// ---- Q8_0 decode (mirrors wgsl/fmt_q8_0.wgsl; layout: src/formats/q8_0.rs) ----
// w = d * q (f16 d, int8 q). Row = its k code bytes (k / 16 uint4s), then the k / 32 f16 scales
// (block 2i: low half of word i). An item is 16 weights, one uint4 of codes of block item / 2:
// a 16-byte load, consecutive for consecutive items, and four float4 x loads shared by the ROWS
// rows; per row d * (sum of four int8x4 . float4 dots). k is a multiple of 32: every x load is
// in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q8_0_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 e507816f73e92baa

struct FmtRow {
    uint4 q;
    uint sw;  // the scale word holding the block's d
    uint hi;  // 1: d is its high half
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint b = item / 2u;
    FmtRow r;
    r.q = wq[base + item];
    // The scales follow the row's p.k4 / 4 code uint4s.
    r.sw = wq[base + p.k4 / 4u + b / 8u][(b % 8u) / 2u];
    r.hi = b & 1u;
    return r;
}

struct FmtX {
    float4 v[4];
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    for (uint t = 0; t < 4u; ++t) {
        r.v[t] = x[4u * item + t];
    }
    return r;
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hi != 0u ? w.sw >> 16 : w.sw & 0xffffu);
    return d * (dot(i8x4(w.q.x), x.v[0]) + dot(i8x4(w.q.y), x.v[1]) + (dot(i8x4(w.q.z), x.v[2]) + dot(i8x4(w.q.w), x.v[3])));
}
