
// ---- Q4_1 decode (mirrors wgsl/fmt_q4_1.wgsl; layout: src/formats/q4_1.rs) ----
// w = d * q + m. Row = k / 32 uint4s of code bytes (block b: uint4 b), then one head word per
// block (f16 d | f16 m << 16). An item is one block (32 weights): byte t holds weights t (low
// nibble) and t + 16 (high nibble); a 16-byte code load, consecutive for consecutive items, and
// the head word. The dot is d sum q x + m sum x. k is a multiple of 32: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q4_1_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 4b950d61003ad9be

struct FmtRow {
    uint4 q;
    uint h;  // d | m << 16
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    FmtRow r;
    r.q = wq[base + item];
    r.h = wq[base + p.k4 / 8u + item / 4u][item % 4u];
    return r;
}

struct FmtX {
    float4 a[4];  // weights 0 .. 15
    float4 b[4];  // weights 16 .. 31
    float sx;     // the sum of the 32
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    FmtX r;
    for (uint t = 0; t < 4u; ++t) {
        r.a[t] = x[8u * item + t];
        r.b[t] = x[8u * item + 4u + t];
    }
    r.sx = hsum(((r.a[0] + r.a[1]) + (r.a[2] + r.a[3])) + ((r.b[0] + r.b[1]) + (r.b[2] + r.b[3])));
    return r;
}

// The low (shift 0) or high (shift 4) nibbles of the four bytes of w.
static inline float4 fmt_q4(uint w, uint shift) {
    return u8x4((w >> shift) & 0x0f0f0f0fu);
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.h & 0xffffu);
    const float m = f16_exact(w.h >> 16);
    const float lo = (dot(fmt_q4(w.q.x, 0u), x.a[0]) + dot(fmt_q4(w.q.y, 0u), x.a[1])) + (dot(fmt_q4(w.q.z, 0u), x.a[2]) + dot(fmt_q4(w.q.w, 0u), x.a[3]));
    const float hi = (dot(fmt_q4(w.q.x, 4u), x.b[0]) + dot(fmt_q4(w.q.y, 4u), x.b[1])) + (dot(fmt_q4(w.q.z, 4u), x.b[2]) + dot(fmt_q4(w.q.w, 4u), x.b[3]));
    return d * (lo + hi) + m * x.sx;
}
