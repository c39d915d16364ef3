
// ---- Q5_K decode (mirrors wgsl/fmt_q5_k.wgsl; layout: src/formats/q5_k.rs) ----
// w = d * sc_j * q - dmin * m_j, q = 5-bit code. Per block 11 uint4: the head (f16 d | f16 dmin
// << 16, the 12 scale bytes, as Q4_K); uint4s 1..8 = the nibble words transposed (component pp
// of uint4 1 + wi: positions 4wi .. 4wi + 3 of sub-blocks 2pp (low nibbles), 2pp + 1 (high));
// uint4s 9, 10 = the qh words (0, 4, 1, 5), (2, 6, 3, 7) (qh word wi: positions 4wi .. 4wi + 3,
// bit j = sub-block j). An item is quad u of a block (64 weights): positions 4u .. 4u + 3 (a)
// and 4u + 16 .. 4u + 19 (b) of the eight sub-blocks; 16-byte loads, consecutive for
// consecutive items. The dot factors the scales out: d sum sc_j s_j - dmin sum m_j sx_j.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q5_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 199f0346645678f7

struct FmtRow {
    uint4 hd;
    uint4 qa;  // nibble words of positions 4u .. (component pp: sub-blocks 2pp, 2pp + 1)
    uint4 qb;  // positions 4u + 16 ..
    uint2 qh;  // qh words u (a) and 4 + u (b)
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint bb = base + 11u * (item / 4u);
    const uint u = item % 4u;
    const uint4 h = wq[bb + 9u + u / 2u];
    FmtRow r;
    r.hd = wq[bb];
    r.qa = wq[bb + 1u + u];
    r.qb = wq[bb + 5u + u];
    r.qh = (u & 1u) != 0u ? h.zw : h.xy;
    return r;
}

// x of sub-block j: a[j] = positions 4u .. 4u + 3, b[j] = 4u + 16 ..; sx[j] = their sum.
struct FmtX {
    float4 a[8];
    float4 b[8];
    float sx[8];
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    // x float4 of sub-block j, positions 4u .. 4u + 3: 64 blk + 8 j + u; positions 4u + 16 ..: + 4.
    const uint c = (item / 4u) * 64u + item % 4u;
    FmtX r;
    for (uint j = 0; j < 8u; ++j) {
        r.a[j] = x[c + 8u * j];
        r.b[j] = x[c + 8u * j + 4u];
        r.sx[j] = hsum(r.a[j] + r.b[j]);
    }
    return r;
}

// The 5-bit codes of four positions of sub-block j: nw = the nibble word of its pair, hw = the
// qh word of those positions.
static inline float4 fmt_q5(uint nw, uint hw, uint j) {
    return u8x4(((nw >> (4u * (j & 1u))) & 0x0f0f0f0fu) | (((hw >> j) & 0x01010101u) << 4));
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hd.x & 0xffffu);
    const float dmin = f16_exact(w.hd.x >> 16);
    // j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j = 4 + i: sc = (s[8 + i] & 15) | ((s[i] >> 6) << 4),
    // m = (s[8 + i] >> 4) | ((s[4 + i] >> 6) << 4). s[0..3] = hd.y, s[4..7] = hd.z, s[8..11] = hd.w.
    const uint sc47 = (w.hd.w & 0x0f0f0f0fu) | ((w.hd.y >> 2) & 0x30303030u);
    const uint m47 = ((w.hd.w >> 4) & 0x0f0f0f0fu) | ((w.hd.z >> 2) & 0x30303030u);
    float ssc = 0.0f;
    float smn = 0.0f;
    for (uint j = 0; j < 4u; ++j) {
        const float s0 = dot(fmt_q5(w.qa[j / 2u], w.qh.x, j), x.a[j]) + dot(fmt_q5(w.qb[j / 2u], w.qh.y, j), x.b[j]);
        const float s1 = dot(fmt_q5(w.qa[2u + j / 2u], w.qh.x, 4u + j), x.a[4u + j]) + dot(fmt_q5(w.qb[2u + j / 2u], w.qh.y, 4u + j), x.b[4u + j]);
        ssc += field(w.hd.y, 8u * j, 63u) * s0 + field(sc47, 8u * j, 63u) * s1;
        smn += field(w.hd.z, 8u * j, 63u) * x.sx[j] + field(m47, 8u * j, 63u) * x.sx[4u + j];
    }
    return d * ssc - dmin * smn;
}
