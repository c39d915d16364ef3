
// ---- Q4_K decode (mirrors wgsl/fmt_q4_k.wgsl; layout: src/formats/q4k.rs) ----
// w = d * sc_j * q - dmin * m_j. Per block 9 uint4: the head (f16 d | f16 dmin << 16, then the 12
// scale bytes), then the nibble words transposed (component pp of uint4 1 + wi holds positions
// 4wi .. 4wi + 3 of sub-blocks 2pp (low nibbles) and 2pp + 1 (high)). An item is a quad (64
// weights): quad u of block b = the head and uint4s 1 + u and 5 + u (positions 4u .. 4u + 3 and
// 4u + 16 .. 4u + 19 of all eight sub-blocks), so consecutive threads load consecutive uint4s of
// weights and of x and each weight byte is read once. With s_j = sum q_i x_i and sx_j = sum x_i
// over the item's positions of sub-block j:
//   sum_i (d sc_j q_i - dmin m_j) x_i = d * sum_j sc_j s_j - dmin * sum_j m_j sx_j,
// the x sums shared by the ROWS rows. k is a multiple of 256: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q4_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 399df8007b326b92

struct FmtRow {
    uint4 hd;
    uint4 qa;  // nibble words of positions 4u .. (component pp: sub-blocks 2pp, 2pp + 1)
    uint4 qb;  // positions 4u + 16 ..
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint bb = base + 9u * (item >> 2);
    const uint u = item & 3u;
    FmtRow r;
    r.hd = wq[bb];
    r.qa = wq[bb + 1u + u];
    r.qb = wq[bb + 5u + u];
    return r;
}

// x of sub-blocks 2pp (l) and 2pp + 1 (h), positions 4u .. 4u + 3 (a) and 4u + 16 .. (b); sx[j]
// = the sum over sub-block j's eight positions.
struct FmtX {
    float4 la[4];
    float4 lb[4];
    float4 ha[4];
    float4 hb[4];
    float sx[8];
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    // x of sub-block j, positions 4u .. 4u + 3: float4 64 blk + 8 j + u; positions 4u + 16 ..: + 4.
    const uint xb = (item >> 2) * 64u + (item & 3u);
    FmtX r;
    for (uint pp = 0; pp < 4u; ++pp) {
        r.la[pp] = x[xb + 16u * pp];
        r.lb[pp] = x[xb + 16u * pp + 4u];
        r.ha[pp] = x[xb + 16u * pp + 8u];
        r.hb[pp] = x[xb + 16u * pp + 12u];
        r.sx[2u * pp] = hsum(r.la[pp] + r.lb[pp]);
        r.sx[2u * pp + 1u] = hsum(r.ha[pp] + r.hb[pp]);
    }
    return r;
}

// Sub-block dots (lo: sub-block 2pp, hi: 2pp + 1) of words a (positions 4u ..) and b (4u + 16 ..).
static inline float2 fmt_pair_dot(uint a, uint b, float4 la, float4 ha, float4 lb, float4 hb) {
    float2 s;
    s.x = field(a, 0u, 15u) * la.x + field(a, 8u, 15u) * la.y + field(a, 16u, 15u) * la.z + field(a, 24u, 15u) * la.w
        + (field(b, 0u, 15u) * lb.x + field(b, 8u, 15u) * lb.y + field(b, 16u, 15u) * lb.z + field(b, 24u, 15u) * lb.w);
    s.y = field(a, 4u, 15u) * ha.x + field(a, 12u, 15u) * ha.y + field(a, 20u, 15u) * ha.z + field(a, 28u, 15u) * ha.w
        + (field(b, 4u, 15u) * hb.x + field(b, 12u, 15u) * hb.y + field(b, 20u, 15u) * hb.z + field(b, 28u, 15u) * hb.w);
    return s;
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.hd.x & 0xffffu);
    const float dmin = f16_exact(w.hd.x >> 16);
    // j < 4: sc = s[j] & 63, m = s[j+4] & 63; j = 4 + i: sc = (s[8+i] & 15) | ((s[i] >> 6) << 4),
    // m = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4). s[0..3] = hd.y, s[4..7] = hd.z, s[8..11] = hd.w.
    const uint sc47 = (w.hd.w & 0x0f0f0f0fu) | ((w.hd.y >> 2) & 0x30303030u);
    const uint m47 = ((w.hd.w >> 4) & 0x0f0f0f0fu) | ((w.hd.z >> 2) & 0x30303030u);
    float2 s[4];
    for (uint pp = 0; pp < 4u; ++pp) {
        s[pp] = fmt_pair_dot(w.qa[pp], w.qb[pp], x.la[pp], x.ha[pp], x.lb[pp], x.hb[pp]);
    }
    float ssc = 0.0f;
    float smn = 0.0f;
    for (uint j = 0; j < 4u; ++j) {
        ssc += field(w.hd.y, 8u * j, 63u) * s[j / 2u][j % 2u] + field(sc47, 8u * j, 63u) * s[2u + j / 2u][j % 2u];
        smn += field(w.hd.z, 8u * j, 63u) * x.sx[j] + field(m47, 8u * j, 63u) * x.sx[4u + j];
    }
    return d * ssc - dmin * smn;
}
