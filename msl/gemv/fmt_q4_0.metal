
// ---- Q4_0 decode (mirrors wgsl/fmt_q4_0.wgsl; layout: src/formats/q4_0.rs) ----
// w = d * (q - 8), exact in f32. Row = k / 32 uint4s of code bytes (block b: uint4 b), then the
// k / 32 f16 scales (block 2i: low half of word i). An item is one block (32 weights): byte t
// holds weights t (low nibble) and t + 16 (high nibble); a 16-byte code load, consecutive for
// consecutive items, and the scale word. k is a multiple of 32: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q4_0_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 a0de69a2066bbb16

struct FmtRow {
    uint4 q;
    uint sw;  // the scale word holding the block's d
    uint hi;  // 1: d is its high half
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    FmtRow r;
    r.q = wq[base + item];
    r.sw = wq[base + p.k4 / 8u + item / 8u][(item % 8u) / 2u];
    r.hi = item & 1u;
    return r;
}

struct FmtX {
    float4 a[4];  // weights 0 .. 15
    float4 b[4];  // weights 16 .. 31
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    for (uint t = 0; t < 4u; ++t) {
        r.a[t] = x[8u * item + t];
        r.b[t] = x[8u * item + 4u + t];
    }
    return r;
}

// The low (shift 0) or high (shift 4) nibbles of the four bytes of w, minus 8.
static inline float4 fmt_q4(uint w, uint shift) {
    return u8x4((w >> shift) & 0x0f0f0f0fu) - float4(8.0f);
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hi != 0u ? w.sw >> 16 : w.sw & 0xffffu);
    const float lo = (dot(fmt_q4(w.q.x, 0u), x.a[0]) + dot(fmt_q4(w.q.y, 0u), x.a[1])) + (dot(fmt_q4(w.q.z, 0u), x.a[2]) + dot(fmt_q4(w.q.w, 0u), x.a[3]));
    const float hi = (dot(fmt_q4(w.q.x, 4u), x.b[0]) + dot(fmt_q4(w.q.y, 4u), x.b[1])) + (dot(fmt_q4(w.q.z, 4u), x.b[2]) + dot(fmt_q4(w.q.w, 4u), x.b[3]));
    return d * (lo + hi);
}
