
// ---- INT4 decode (mirrors wgsl/fmt_int4.wgsl; layout: src/formats/int4.rs) ----
// w = d * q (f32 d, q in -8..7). Row = k / 32 uint4s of code bytes (block b: uint4 b; byte t
// holds weights 2t (low nibble) and 2t + 1 (high), two's-complement nibbles), then the k / 32
// f32 scales (block b: word b), padded to a whole uint4. An item is one block: a 16-byte code
// load, consecutive for consecutive items, the scale word and eight float4 x loads shared by the
// ROWS rows; per row d * (sum of eight nibble-quad . float4 dots). k is a multiple of 32: every
// x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_int4_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 091698a2337b69e8

struct FmtRow {
    uint4 q;
    uint dw;  // the block's f32 scale
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    FmtRow r;
    r.q = wq[base + item];
    // The scales follow the row's p.k4 / 8 code uint4s.
    r.dw = wq[base + p.k4 / 8u + item / 4u][item % 4u];
    return r;
}

struct FmtX {
    float4 v[8];
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    for (uint c = 0; c < 8u; ++c) {
        r.v[c] = x[8u * item + c];
    }
    return r;
}

// The signed nibble (-8..7) in bits sh .. sh + 3 of w, exactly.
static inline float fmt_snib(uint w, uint sh) {
    return as_type<float>((((w >> sh) & 15u) ^ 8u) | 0x4b000000u) - 8388616.0f;
}

// Weights 0..3 (lo) and 4..7 (hi) of a code word: byte t holds weight 2t low, 2t + 1 high.
static inline float4 fmt_lo4(uint w) {
    return f4(fmt_snib(w, 0u), fmt_snib(w, 4u), fmt_snib(w, 8u), fmt_snib(w, 12u));
}
static inline float4 fmt_hi4(uint w) {
    return f4(fmt_snib(w, 16u), fmt_snib(w, 20u), fmt_snib(w, 24u), fmt_snib(w, 28u));
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float s = (dot(fmt_lo4(w.q.x), x.v[0]) + dot(fmt_hi4(w.q.x), x.v[1])) + (dot(fmt_lo4(w.q.y), x.v[2]) + dot(fmt_hi4(w.q.y), x.v[3]))
                  + ((dot(fmt_lo4(w.q.z), x.v[4]) + dot(fmt_hi4(w.q.z), x.v[5])) + (dot(fmt_lo4(w.q.w), x.v[6]) + dot(fmt_hi4(w.q.w), x.v[7])));
    return as_type<float>(w.dw) * s;
}
