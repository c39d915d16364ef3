
// ---- Q6_K decode (mirrors wgsl/fmt_q6_k.wgsl; layout: src/formats/q6_k.rs) ----
// w = (d * sc) * (q - 32). Per block 13 uint4 - 8 of ql (uint4 u = ql words u, 8 + u, 16 + u,
// 24 + u), 4 of qh (uint4 v = qh words 2v, 8 + 2v, 2v + 1, 9 + 2v), 1 of the 16 int8 scales -
// then the row's f16 d (block 2i: low half of word i). An item is u = item % 8 of block item / 8:
// positions 4u .. 4u + 3 of the eight 32-weight quarters (half h, quarter s: low nibbles of ql
// word 16h + 8(s % 2) + u, high nibbles for s >= 2; 2-bit highs at shift 2s of qh word 8h + u;
// scale byte 8h + 2s + u / 4): 16-byte loads, consecutive for consecutive items; eight float4 x
// loads shared by the ROWS rows; per row d * (sc0 . dots0 + sc1 . dots1) over the eight quarters.
// k is a multiple of 256: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q6_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 74bcd589b9062904

struct FmtRow {
    uint4 ql;
    uint2 qh;
    uint4 sc;
    uint dw;  // the word holding the block's d
    uint hi;  // 1: d is its high half
    uint o;   // u / 4: the scale byte within a quarter's pair
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint blk = item / 8u;
    const uint u = item % 8u;
    const uint bb = base + 13u * blk;
    const uint4 h = wq[bb + 8u + u / 2u];
    FmtRow r;
    r.ql = wq[bb + u];
    r.qh = (u & 1u) != 0u ? h.zw : h.xy;
    r.sc = wq[bb + 12u];
    // The d words follow the row's p.k4 / 64 blocks of 13 uint4.
    r.dw = wq[base + 13u * (p.k4 / 64u) + blk / 8u][(blk % 8u) / 2u];
    r.hi = blk & 1u;
    r.o = u / 4u;
    return r;
}

struct FmtX {
    float4 q[8];  // quarters 0..3 of half 0, then of half 1
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    const uint c = 64u * (item / 8u) + item % 8u;
    FmtX r;
    for (uint j = 0; j < 8u; ++j) {
        r.q[j] = x[c + 8u * j];
    }
    return r;
}

// q - 32 of the four positions of quarter s: l = its ql word, h = its qh word.
static inline float4 fmt_q6(uint l, uint h, uint s) {
    return u8x4(((l >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((h >> (2u * s)) & 0x03030303u) << 4)) - float4(32.0f);
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hi != 0u ? w.dw >> 16 : w.dw & 0xffffu);
    const uint o = w.o;
    // Scales of quarters 0..3 of half h: bytes 8h + {0, 2, 4, 6} + o.
    const float4 sc0 = f4(sbyte(w.sc.x, o), sbyte(w.sc.x, 2u + o), sbyte(w.sc.y, o), sbyte(w.sc.y, 2u + o));
    const float4 sc1 = f4(sbyte(w.sc.z, o), sbyte(w.sc.z, 2u + o), sbyte(w.sc.w, o), sbyte(w.sc.w, 2u + o));
    const float4 d0 = f4(dot(fmt_q6(w.ql.x, w.qh.x, 0u), x.q[0]), dot(fmt_q6(w.ql.y, w.qh.x, 1u), x.q[1]), dot(fmt_q6(w.ql.x, w.qh.x, 2u), x.q[2]),
                         dot(fmt_q6(w.ql.y, w.qh.x, 3u), x.q[3]));
    const float4 d1 = f4(dot(fmt_q6(w.ql.z, w.qh.y, 0u), x.q[4]), dot(fmt_q6(w.ql.w, w.qh.y, 1u), x.q[5]), dot(fmt_q6(w.ql.z, w.qh.y, 2u), x.q[6]),
                         dot(fmt_q6(w.ql.w, w.qh.y, 3u), x.q[7]));
    return d * (dot(sc0, d0) + dot(sc1, d1));
}
