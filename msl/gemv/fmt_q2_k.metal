
// ---- Q2_K decode (mirrors wgsl/fmt_q2_k.wgsl; layout: src/formats/q2_k.rs) ----
// w = (d * sc) * q - dmin * m: both products exact, one rounding (as on the CPU). Per block 5
// uint4: the 16 scale bytes (low nibble: scale, high nibble: min of a 16-weight sub-block), then
// 4 of qs (uint4 v = qs words 2v, 8 + 2v, 2v + 1, 9 + 2v); after the row's blocks, one word per
// block (f16 d | f16 dmin << 16). An item is u of a block (32 weights): positions 4u .. 4u + 3
// of the eight 32-weight quarters (half h, quarter s: weights 128h + 32s + 4u ..), whose 2-bit
// codes sit at shift 2s of qs word 8h + u; sub-block 8h + 2s + u / 4. The dot factors the
// scales out: d sum sc s - dmin sum m sx. k is a multiple of 256: every x load is in range.
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   mm_gemv_q2_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 8c0de503781c3810

struct FmtRow {
    uint2 qs;  // qs words u, 8 + u
    uint4 sc;  // the block's scale bytes
    uint dm;   // d | dmin << 16
    uint o;    // u / 4
};

static inline FmtRow fmt_load(constant MmParams& p, device const uint4* wq, uint base, uint item) {
    const uint blk = item / 8u;
    const uint u = item % 8u;
    const uint bb = base + 5u * blk;
    const uint4 q = wq[bb + 1u + u / 2u];
    FmtRow r;
    r.qs = (u & 1u) != 0u ? q.zw : q.xy;
    r.sc = wq[bb];
    // The heads follow the row's p.k4 / 64 blocks of 5 uint4.
    r.dm = wq[base + 5u * (p.k4 / 64u) + blk / 4u][blk % 4u];
    r.o = u / 4u;
    return r;
}

struct FmtX {
    float4 q[8];  // quarters 0..3 of half 0, then of half 1
    float4 sx0;   // their sums
    float4 sx1;
};

static inline FmtX fmt_x(constant MmParams& p, device const float4* x, uint item) {
    const uint c = 64u * (item / 8u) + item % 8u;
    FmtX r;
    for (uint s = 0; s < 8u; ++s) {
        r.q[s] = x[c + 8u * s];
    }
    r.sx0 = f4(hsum(r.q[0]), hsum(r.q[1]), hsum(r.q[2]), hsum(r.q[3]));
    r.sx1 = f4(hsum(r.q[4]), hsum(r.q[5]), hsum(r.q[6]), hsum(r.q[7]));
    return r;
}

// The 2-bit codes of quarter s from its qs word.
static inline float4 fmt_q2(uint w, uint s) {
    return u8x4((w >> (2u * s)) & 0x03030303u);
}

// The nibbles at shift sh (0: scales, 4: mins) of the four quarters of a half: bytes o and
// 2 + o of its words a (quarters 0, 1) and b (quarters 2, 3).
static inline float4 fmt_pick(uint a, uint b, uint o, uint sh) {
    return f4(field(a, 8u * o + sh, 15u), field(a, 8u * (2u + o) + sh, 15u), field(b, 8u * o + sh, 15u), field(b, 8u * (2u + o) + sh, 15u));
}

static inline float fmt_dot(FmtRow w, FmtX x) {
    const float d = f16_exact(w.dm & 0xffffu);
    const float dmin = f16_exact(w.dm >> 16);
    const float4 d0 = f4(dot(fmt_q2(w.qs.x, 0u), x.q[0]), dot(fmt_q2(w.qs.x, 1u), x.q[1]), dot(fmt_q2(w.qs.x, 2u), x.q[2]), dot(fmt_q2(w.qs.x, 3u), x.q[3]));
    const float4 d1 = f4(dot(fmt_q2(w.qs.y, 0u), x.q[4]), dot(fmt_q2(w.qs.y, 1u), x.q[5]), dot(fmt_q2(w.qs.y, 2u), x.q[6]), dot(fmt_q2(w.qs.y, 3u), x.q[7]));
    const float4 sc0 = fmt_pick(w.sc.x, w.sc.y, w.o, 0u);
    const float4 sc1 = fmt_pick(w.sc.z, w.sc.w, w.o, 0u);
    const float4 m0 = fmt_pick(w.sc.x, w.sc.y, w.o, 4u);
    const float4 m1 = fmt_pick(w.sc.z, w.sc.w, w.o, 4u);
    return d * (dot(sc0, d0) + dot(sc1, d1)) - dmin * (dot(m0, x.sx0) + dot(m1, x.sx1));
}
