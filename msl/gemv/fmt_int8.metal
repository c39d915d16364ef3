
// ---- INT8 decode (mirrors wgsl/fmt_int8.wgsl; layout: src/formats/int8.rs) ----
// w = d * q (f32 d, int8 q), one f32 multiplication. Row = its k code bytes (k / 16 uint4s), then
// the k / 32 f32 scales (block b: word b). An item is 16 weights, one uint4 of codes of block
// item / 2: a 16-byte load, consecutive for consecutive items, the scale word and four float4 x
// loads shared by the ROWS rows. k is a multiple of 32: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_int8_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 bd5536fadbb6e277

struct FmtRow {
    uint4 q;
    uint d;  // the block's scale (f32 bits)
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint b = item / 2u;
    FmtRow r;
    r.q = wq[base + item];
    // The scales follow the row's p.k4 / 4 code uint4s.
    r.d = wq[base + p.k4 / 4u + b / 4u][b % 4u];
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
    const float s = (dot(i8x4(w.q.x), x.v[0]) + dot(i8x4(w.q.y), x.v[1])) + (dot(i8x4(w.q.z), x.v[2]) + dot(i8x4(w.q.w), x.v[3]));
    return as_type<float>(w.d) * s;
}
