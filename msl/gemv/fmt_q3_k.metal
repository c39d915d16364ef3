
// ---- Q3_K decode (mirrors wgsl/fmt_q3_k.wgsl; layout: src/formats/q3_k.rs) ----
// w = (d * scale) * code, exact in f32. Per block 7 uint4 (112 bytes): uint4 0 = the 12 packed
// scale bytes and f16 d (low half of .w); uint4s 1..4 = qs (uint4 v = qs words 2v, 8 + 2v,
// 2v + 1, 9 + 2v); uint4s 5, 6 = the 8 hmask words. An item is u of a block (32 weights):
// positions 4u .. 4u + 3 of the eight 32-weight quarters (half h, quarter s: weights
// 128h + 32s + 4u ..), whose low 2 bits sit at shift 2s of qs word 8h + u and high bit at bit
// 4h + s of hmask word u; code = low - 4 when the high bit is clear, else low; sub-block
// 8h + 2s + u / 4. k is a multiple of 256: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q3_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 94b59ebbf8c55175

struct FmtRow {
    uint4 hd;  // scale words 0..2, d
    uint2 qs;  // qs words u, 8 + u
    uint hm;   // hmask word u
    uint o;    // u / 4
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint bb = base + 7u * (item / 8u);
    const uint u = item % 8u;
    const uint4 q = wq[bb + 1u + u / 2u];
    FmtRow r;
    r.hd = wq[bb];
    r.qs = (u & 1u) != 0u ? q.zw : q.xy;
    r.hm = wq[bb + 5u + u / 4u][u % 4u];
    r.o = u / 4u;
    return r;
}

struct FmtX {
    float4 q[8];  // quarters 0..3 of half 0, then of half 1
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    const uint c = 64u * (item / 8u) + item % 8u;
    FmtX r;
    for (uint s = 0; s < 8u; ++s) {
        r.q[s] = x[c + 8u * s];
    }
    return r;
}

// The codes of quarter (h, s) from its qs word q and the hmask word hm.
static inline float4 fmt_q3(uint q, uint hm, uint h, uint s) {
    return u8x4(((q >> (2u * s)) & 0x03030303u) | (((hm >> (4u * h + s)) & 0x01010101u) << 2)) - float4(4.0f);
}

// The 6-bit scales of sub-blocks 4g .. 4g + 3, minus 32: low nibbles from byte (4g) % 8 ..
// (high nibbles for g >= 2), 2 high bits at shift 2g of bytes 8 .. 11.
static inline float4 fmt_scales4(uint4 hd, uint g) {
    const uint lo = (hd[g % 2u] >> (4u * (g / 2u))) & 0x0f0f0f0fu;
    const uint hi = (hd.z >> (2u * g)) & 0x03030303u;
    return u8x4(lo | (hi << 4)) - float4(32.0f);
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hd.w & 0xffffu);
    const uint o = w.o;
    const float4 g0 = fmt_scales4(w.hd, 0u);
    const float4 g1 = fmt_scales4(w.hd, 1u);
    const float4 g2 = fmt_scales4(w.hd, 2u);
    const float4 g3 = fmt_scales4(w.hd, 3u);
    const float4 sc0 = f4(g0[o], g0[2u + o], g1[o], g1[2u + o]);
    const float4 sc1 = f4(g2[o], g2[2u + o], g3[o], g3[2u + o]);
    const float4 d0 = f4(dot(fmt_q3(w.qs.x, w.hm, 0u, 0u), x.q[0]), dot(fmt_q3(w.qs.x, w.hm, 0u, 1u), x.q[1]), dot(fmt_q3(w.qs.x, w.hm, 0u, 2u), x.q[2]),
                         dot(fmt_q3(w.qs.x, w.hm, 0u, 3u), x.q[3]));
    const float4 d1 = f4(dot(fmt_q3(w.qs.y, w.hm, 1u, 0u), x.q[4]), dot(fmt_q3(w.qs.y, w.hm, 1u, 1u), x.q[5]), dot(fmt_q3(w.qs.y, w.hm, 1u, 2u), x.q[6]),
                         dot(fmt_q3(w.qs.y, w.hm, 1u, 3u), x.q[7]));
    return d * (dot(sc0, d0) + dot(sc1, d1));
}
