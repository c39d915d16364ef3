
// ---- Q5_0 decode (mirrors wgsl/fmt_q5_0.wgsl; layout: src/formats/q5_0.rs) ----
// w = d * (q - 16), exact in f32. Row = k / 32 uint4s of low-nibble bytes (block b: uint4 b),
// then two head words per block (qh, f16 d in the low half). An item is one block (32 weights):
// byte t holds the low nibbles of weights t (low) and t + 16 (high); bit i of qh is bit 4 of
// weight i; a 16-byte code load, consecutive for consecutive items, and the head's two words.
// k is a multiple of 32: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q5_0_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 f4d8bd67be429fae

struct FmtRow {
    uint4 q;
    uint2 h;  // qh, d
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint4 h = wq[base + p.k4 / 8u + item / 2u];
    FmtRow r;
    r.q = wq[base + item];
    r.h = (item & 1u) != 0u ? h.zw : h.xy;
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

// Weights 4j .. 4j + 3 of a block (j < 8) as q - 16: the nibbles of word j % 4 (the high ones
// for j >= 4) and bits 4j .. 4j + 3 of qh, one per byte.
static inline float4 fmt_q5(uint4 q, uint qh, uint j) {
    const uint t = (qh >> (4u * j)) & 15u;
    const uint hb = (t & 1u) | ((t & 2u) << 7) | ((t & 4u) << 14) | ((t & 8u) << 21);
    return u8x4(((q[j % 4u] >> (4u * (j / 4u))) & 0x0f0f0f0fu) | (hb << 4)) - float4(16.0f);
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.h.y & 0xffffu);
    const uint qh = w.h.x;
    const float lo = (dot(fmt_q5(w.q, qh, 0u), x.a[0]) + dot(fmt_q5(w.q, qh, 1u), x.a[1])) + (dot(fmt_q5(w.q, qh, 2u), x.a[2]) + dot(fmt_q5(w.q, qh, 3u), x.a[3]));
    const float hi = (dot(fmt_q5(w.q, qh, 4u), x.b[0]) + dot(fmt_q5(w.q, qh, 5u), x.b[1])) + (dot(fmt_q5(w.q, qh, 6u), x.b[2]) + dot(fmt_q5(w.q, qh, 7u), x.b[3]));
    return d * (lo + hi);
}
