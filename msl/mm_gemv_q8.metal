// Weight-matrix GEMV on int8 activations (the matmul family's mm_gemv_q8_<fmt>: the model's decode
// step, whose activations are quantised once per vector) for the formats with an integer dot:
// Q4_K, Q6_K, Q8_0 and Q4_0, native tier (hand-written MSL for wgpu's passthrough path).
//   y[y_off + r] (op)= sum_c w[r, c] * dx_b(c) * xq[c]
// with the epilogue (op) of the entry point: store, residual add (`_acc`), or the SwiGLU /
// GeGLU of (gate, up) row pairs (`_swiglu`: y[(y_off + 2i) / 2] = silu(dot_2i) * dot_2i+1, silu(g)
// = g / (1 + exp(-g)); `_geglu`: the same with GELU's tanh approximation).
//
// WGSL twin (same algorithm, same Params, same bindings, same GPU layouts): wgsl/team_subgroup.wgsl
// + wgsl/mm_common.wgsl + wgsl/mm_gemv_qk.wgsl + wgsl/fmt_<fmt>.wgsl + wgsl/mm_gemv_acc.wgsl +
// wgsl/mm_rows.wgsl with WG = 128, ROWS = 2 or 4, UNROLL = 1, TEAM_SG = 0 (a team is the
// threadgroup) and EPI = 0 (store), 1 (accumulate), 2 (SwiGLU) or 3 (GeGLU). One body for every
// format, the format picked by the entry point (per format a row struct, its loads (load_row) and
// its dot (dot_row), ported from the part's fmt_qload / fmt_qdot).
//
// Activations (src/kernels/q8, MmQx in wgsl/mm_common.wgsl): an item is a quad, 64 columns of a
// 256-column block (p.items = k / 64): positions 4u..4u+3 ("a") and 4u+16..4u+19 ("b") of its
// eight 32-column sub-blocks j, u = quad % 4. Record t of quad qd lies at uint4 t * items + qd
// (struct of arrays: consecutive threads on consecutive quads load consecutive 16-byte records):
// t = 0..3 the i8x4 codes of (sub-block 2t, a), (2t, b), (2t+1, a), (2t+1, b); t = 4, 5 the
// sub-blocks' scales dx_j; t = 6, 7 fl(dx_j * the sum of the quad's 8 codes of sub-block j).
// A team owns ROWS rows at a time (rows past n clamped for loading, never written); its threads
// stride over the quads, the ROWS rows' weight loads issued first, then the quad's 8 records,
// whose 32 codes are turned into floats once and shared by the ROWS rows. Per row and sub-block
// the twin's exact integer dot D_j = sum q_i xq_i (dot4I8Packed) is computed here as f32 products
// and sums of small integers: every code is exact in f32 and every partial sum is below 2^24
// (at most 8 products of |q| <= 128 and |xq| <= 127), so D_j is exact whatever the order of the
// sums or the contractions (fast math included) and equals the twin's. Apple GPUs have no DP4A;
// f32 FMAs are their fast path. The f32 combination of D_j with the scales follows the twin.
// Small integers become floats by OR-ing them into the mantissa of 2^23 (exact). The ROWS partial
// dots live in one float4, one simd_sum per simdgroup and row block, partials folded through
// threadgroup memory; thread 0 applies the epilogue.
// k is a multiple of 256, so the quads cover exactly k columns and every load is in range.
// Entry points: mm_gemv_q8_<fmt>_r<rows>[_acc|_swiglu|_geglu] for fmt in q4_k, q6_k, q8_0, q4_0 and
// rows 2, 4.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size from
// the PipelineDesc (128 threads); threadgroup memory: 128 float4.
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   mm_gemv_q8_q4_k_*: twin fnv1a64 c156c5dfb0f00ece
//   mm_gemv_q8_q6_k_*: twin fnv1a64 c683754a39ee56c6
//   mm_gemv_q8_q8_0_*: twin fnv1a64 1bf1aff9e544042e
//   mm_gemv_q8_q4_0_*: twin fnv1a64 3018b13b88c8d026

#include <metal_stdlib>
using namespace metal;

// The matmul family's Params (wgsl/mm_common.wgsl), field for field.
struct MmParams {
    uint n;          // rows this dispatch computes (one row chunk of the matrix)
    uint k;          // columns
    uint k4;         // ceil(k / 4)
    uint items;      // quads per row (k / 64)
    uint row_vec4s;  // row stride in wq
    uint y_off;      // the chunk's first row: output offset
    uint m;
    uint ldy;
    uint tiles_n;
    uint sps;
    uint splits;
    uint xs;         // q8 GEMM: stride of the activation records' planes (unused here)
};

// Partials per threadgroup: one per simdgroup (1024 threads / width >= 8).
constant constexpr uint MAX_SIMDGROUPS = 128;

struct Team {
    uint lane;
    uint lanes;
    uint id;
    uint count;
    uint sg;
    uint nsg;
    bool first;
};

static inline Team make_team(uint3 tg, uint3 ntg, uint tid, uint3 tptg, uint sg, uint nsg) {
    Team t;
    t.lane = tid;
    t.lanes = tptg.x * tptg.y * tptg.z;
    t.id = tg.x + tg.y * ntg.x;
    t.count = ntg.x * ntg.y;
    t.sg = sg;
    t.nsg = nsg;
    t.first = simd_prefix_exclusive_sum(1u) == 0u;
    return t;
}

// Sum v over the team; the sum is valid in thread 0. Call in threadgroup-uniform control flow.
static inline float4 team_sum(float4 v, threadgroup float4* scratch, Team t) {
    float4 s;
    s.x = simd_sum(v.x);
    s.y = simd_sum(v.y);
    s.z = simd_sum(v.z);
    s.w = simd_sum(v.w);
    if (t.first) {
        scratch[t.sg] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float4 r = float4(0.0f);
    if (t.lane == 0u) {
        for (uint q = 0; q < t.nsg; ++q) {
            r += scratch[q];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return r;
}

// One f16 (low 16 bits of b) as f32, exactly, with integer ops (subnormals kept).
static inline float f16_exact(uint b) {
    const uint e = (b >> 10) & 31u;
    const uint m = (b & 1023u) | (e != 0u ? 1024u : 0u);
    const float mf = as_type<float>(m | 0x4b000000u) - 8388608.0f;
    const float p2 = as_type<float>((max(e, 1u) + 102u) << 23);
    const float v = mf * p2;
    return (b & 0x8000u) != 0u ? -v : v;
}

// Bits sh.. of w under `mask` (an integer below 2^23) minus `bias`, exactly.
static inline float bits(uint w, uint sh, uint mask, float bias) {
    return as_type<float>(((w >> sh) & mask) | 0x4b000000u) - (8388608.0f + bias);
}

// Byte i of w at bits sh + 8i (i = 0..3) under `mask`, minus `bias`, as exact floats.
static inline float4 bytes4(uint w, uint sh, uint mask, float bias) {
    float4 v;
    v.x = bits(w, sh, mask, bias);
    v.y = bits(w, sh + 8u, mask, bias);
    v.z = bits(w, sh + 16u, mask, bias);
    v.w = bits(w, sh + 24u, mask, bias);
    return v;
}

// The four bytes of w as signed integers (two's complement: flip the sign bit, subtract 128).
static inline float4 i8x4(uint w) {
    return bytes4(w ^ 0x80808080u, 0u, 0xffu, 128.0f);
}

// Signed byte at bits sh..sh+7 of w.
static inline float i8(uint w, uint sh) {
    return bits(w ^ (0x80u << sh), sh, 0xffu, 128.0f);
}

// The activations of one quad: codes as floats, scales and scaled code sums (see the header).
struct Qx {
    float4 a[8];  // sub-block j, positions 4u .. 4u + 3
    float4 b[8];  // sub-block j, positions 4u + 16 .. 4u + 19
    float4 d03;   // dx_j, j = 0..3
    float4 d47;
    float4 s03;   // fl(dx_j * sum of the quad's codes of sub-block j)
    float4 s47;
};

static inline Qx load_x(device const uint4* xk, uint quads, uint qd) {
    uint4 c[4];
    for (uint t = 0; t < 4u; ++t) {
        c[t] = xk[t * quads + qd];
    }
    Qx x;
    x.d03 = as_type<float4>(xk[4u * quads + qd]);
    x.d47 = as_type<float4>(xk[5u * quads + qd]);
    x.s03 = as_type<float4>(xk[6u * quads + qd]);
    x.s47 = as_type<float4>(xk[7u * quads + qd]);
    for (uint t = 0; t < 4u; ++t) {
        x.a[2u * t] = i8x4(c[t].x);
        x.b[2u * t] = i8x4(c[t].y);
        x.a[2u * t + 1u] = i8x4(c[t].z);
        x.b[2u * t + 1u] = i8x4(c[t].w);
    }
    return x;
}

// sum_j dx_j * v_j over the eight sub-blocks.
static inline float scaled(float4 v03, float4 v47, thread const Qx& x) {
    return dot(v03, x.d03) + dot(v47, x.d47);
}

// ---- Q4_K (wgsl/fmt_q4_k.wgsl; layout src/formats/q4k.rs): per block 9 uint4, the head (f16 d |
// f16 dmin << 16, 12 scale bytes) and the nibble words transposed (component pp of uint4 1 + wi:
// positions 4wi .. 4wi + 3 of sub-blocks 2pp (low nibbles) and 2pp + 1 (high)). Quad u of a block:
// the head and uint4s 1 + u (positions 4u..) and 5 + u (4u + 16..). Per sub-block j with scale
// sc_j, min m_j: sum_i (d sc_j q_i - dmin m_j) dx_j xq_i = d sc_j dx_j D_j - dmin m_j (dx_j S_j).
struct Q4KRow {
    uint4 hd;
    uint4 qa;
    uint4 qb;
};

static inline void load_row(thread Q4KRow& r, device const uint4* wq, uint base, uint qd, constant MmParams& p) {
    const uint bb = base + 9u * (qd >> 2);
    const uint u = qd & 3u;
    r.hd = wq[bb];
    r.qa = wq[bb + 1u + u];
    r.qb = wq[bb + 5u + u];
}

static inline float dot_row(Q4KRow w, thread const Qx& x) {
    const float d = f16_exact(w.hd.x & 0xffffu);
    const float dmin = f16_exact(w.hd.x >> 16);
    // j < 4: sc = s[j] & 63, m = s[j+4] & 63; j = 4 + i: sc = (s[8+i] & 15) | ((s[i] >> 6) << 4),
    // m = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4). s[0..3] = hd.y, s[4..7] = hd.z, s[8..11] = hd.w.
    const uint sc47 = (w.hd.w & 0x0f0f0f0fu) | ((w.hd.y >> 2) & 0x30303030u);
    const uint m47 = ((w.hd.w >> 4) & 0x0f0f0f0fu) | ((w.hd.z >> 2) & 0x30303030u);
    float4 dd[2];
    for (uint h = 0; h < 2u; ++h) {
        // Pairs pp = 2h, 2h + 1: sub-blocks 4h .. 4h + 3.
        float4 v;
        v.x = dot(bytes4(w.qa[2u * h], 0u, 15u, 0.0f), x.a[4u * h]) + dot(bytes4(w.qb[2u * h], 0u, 15u, 0.0f), x.b[4u * h]);
        v.y = dot(bytes4(w.qa[2u * h], 4u, 15u, 0.0f), x.a[4u * h + 1u]) + dot(bytes4(w.qb[2u * h], 4u, 15u, 0.0f), x.b[4u * h + 1u]);
        v.z = dot(bytes4(w.qa[2u * h + 1u], 0u, 15u, 0.0f), x.a[4u * h + 2u]) + dot(bytes4(w.qb[2u * h + 1u], 0u, 15u, 0.0f), x.b[4u * h + 2u]);
        v.w = dot(bytes4(w.qa[2u * h + 1u], 4u, 15u, 0.0f), x.a[4u * h + 3u]) + dot(bytes4(w.qb[2u * h + 1u], 4u, 15u, 0.0f), x.b[4u * h + 3u]);
        dd[h] = v;
    }
    const float s = dot(bytes4(w.hd.y, 0u, 63u, 0.0f), dd[0] * x.d03) + dot(bytes4(sc47, 0u, 63u, 0.0f), dd[1] * x.d47);
    const float m = dot(bytes4(w.hd.z, 0u, 63u, 0.0f), x.s03) + dot(bytes4(m47, 0u, 63u, 0.0f), x.s47);
    return d * s - dmin * m;
}

// ---- Q6_K (wgsl/fmt_q6_k.wgsl; layout src/formats/q6_k.rs): per block 13 uint4, 8 of ql (uint4
// u = ql words u, 8 + u, 16 + u, 24 + u), 4 of qh (uint4 v = qh words 2v, 8 + 2v, 2v + 1, 9 + 2v),
// 1 of the 16 int8 scales; after the row's blocks, its f16 d (block 2i: low half of word i). Quad u
// of a block = the format's items u (positions 4u .., scale 2j of sub-block j) and u + 4 (4u + 16
// .., scale 2j + 1). Codes c in 0..63: sum (c - 32) xq exactly; then d * sum_j dx_j (sc_2j D_j,a
// + sc_2j+1 D_j,b).
struct Q6KRow {
    uint4 qla;  // ql words of item u
    uint4 qlb;  // of item u + 4
    uint2 qha;  // qh words of item u
    uint2 qhb;
    uint4 sc;   // the block's scales
    uint dw;    // the word holding d
    uint hi;    // 1: d is its high half
};

static inline void load_row(thread Q6KRow& r, device const uint4* wq, uint base, uint qd, constant MmParams& p) {
    const uint blk = qd / 4u;
    const uint u = qd % 4u;
    const uint bb = base + 13u * blk;
    r.qla = wq[bb + u];
    r.qlb = wq[bb + u + 4u];
    const uint4 ha = wq[bb + 8u + u / 2u];
    const uint4 hb = wq[bb + 10u + u / 2u];
    const bool odd = (u & 1u) != 0u;
    r.qha = odd ? ha.zw : ha.xy;
    r.qhb = odd ? hb.zw : hb.xy;
    r.sc = wq[bb + 12u];
    r.dw = wq[base + 13u * (p.k4 / 64u) + blk / 8u][(blk % 8u) / 2u];
    r.hi = blk & 1u;
}
// c - 32 of the four codes of sub-block j (quarter s of half h) from ql word l and qh word q.
static inline float4 q6_codes(uint4 ql, uint2 qh, uint j) {
    const uint h = j / 4u;
    const uint s = j % 4u;
    const uint c = ((ql[2u * h + (s & 1u)] >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((qh[h] >> (2u * s)) & 0x03030303u) << 4);
    return bytes4(c, 0u, 63u, 32.0f);
}

static inline float dot_row(Q6KRow w, thread const Qx& x) {
    const float d = f16_exact(w.hi != 0u ? w.dw >> 16 : w.dw & 0xffffu);
    float t[8];
    for (uint j = 0; j < 8u; ++j) {
        const float da = dot(q6_codes(w.qla, w.qha, j), x.a[j]);
        const float db = dot(q6_codes(w.qlb, w.qhb, j), x.b[j]);
        const uint sw = w.sc[j / 2u];
        const uint sh = 16u * (j % 2u);
        t[j] = i8(sw, sh) * da + i8(sw, sh + 8u) * db;
    }
    float4 t03;
    float4 t47;
    t03.x = t[0];
    t03.y = t[1];
    t03.z = t[2];
    t03.w = t[3];
    t47.x = t[4];
    t47.y = t[5];
    t47.z = t[6];
    t47.w = t[7];
    return d * scaled(t03, t47, x);
}

// ---- Q8_0 (wgsl/fmt_q8_0.wgsl; layout src/formats/q8_0.rs): the row's code bytes (k / 16 uint4),
// then its k / 32 f16 scales. Quad u of 256-column group g: component u of code uint4s 16g + 2j
// (positions 4u ..) and 16g + 2j + 1 (4u + 16 ..) of its eight blocks j; the blocks' scales are
// the halves of scale uint4 g. sum_j d_j dx_j D_j.
struct Q8_0Row {
    uint a[8];
    uint b[8];
    uint4 sc;  // d of blocks 2i (low half) and 2i + 1 (high half) in word i
};

static inline void load_row(thread Q8_0Row& r, device const uint4* wq, uint base, uint qd, constant MmParams& p) {
    const uint g = qd / 4u;
    const uint u = qd % 4u;
    const uint v = base + 16u * g;
    for (uint j = 0; j < 8u; ++j) {
        r.a[j] = wq[v + 2u * j][u];
        r.b[j] = wq[v + 2u * j + 1u][u];
    }
    r.sc = wq[base + p.k4 / 4u + g];
}

static inline float dot_row(Q8_0Row w, thread const Qx& x) {
    float4 d03;
    float4 d47;
    float4 i03;
    float4 i47;
    for (uint j = 0; j < 4u; ++j) {
        d03[j] = f16_exact((w.sc[j / 2u] >> (16u * (j % 2u))) & 0xffffu);
        d47[j] = f16_exact((w.sc[2u + j / 2u] >> (16u * (j % 2u))) & 0xffffu);
        i03[j] = dot(i8x4(w.a[j]), x.a[j]) + dot(i8x4(w.b[j]), x.b[j]);
        i47[j] = dot(i8x4(w.a[4u + j]), x.a[4u + j]) + dot(i8x4(w.b[4u + j]), x.b[4u + j]);
    }
    return dot(d03 * x.d03, i03) + dot(d47 * x.d47, i47);
}

// ---- Q4_0 (wgsl/fmt_q4_0.wgsl; layout src/formats/q4_0.rs): k / 32 uint4 of code bytes (block b:
// uint4 b; byte t holds weights t (low nibble) and t + 16 (high)), then the k / 32 f16 scales.
// Quad u of group g = word u of blocks 8g + j: low nibbles positions 4u .., high nibbles 4u + 16 ..
// Codes 0..15: sum (c - 8) xq exactly; then sum_j d_j dx_j D_j.
struct Q4_0Row {
    uint w[8];
    uint4 sc;  // d of blocks 2i (low half) and 2i + 1 (high half) in word i
};

static inline void load_row(thread Q4_0Row& r, device const uint4* wq, uint base, uint qd, constant MmParams& p) {
    const uint g = qd / 4u;
    const uint u = qd % 4u;
    const uint v = base + 8u * g;
    for (uint j = 0; j < 8u; ++j) {
        r.w[j] = wq[v + j][u];
    }
    r.sc = wq[base + p.k4 / 8u + g];
}

static inline float dot_row(Q4_0Row w, thread const Qx& x) {
    float4 d03;
    float4 d47;
    float4 i03;
    float4 i47;
    for (uint j = 0; j < 4u; ++j) {
        d03[j] = f16_exact((w.sc[j / 2u] >> (16u * (j % 2u))) & 0xffffu);
        d47[j] = f16_exact((w.sc[2u + j / 2u] >> (16u * (j % 2u))) & 0xffffu);
        i03[j] = dot(bytes4(w.w[j], 0u, 15u, 8.0f), x.a[j]) + dot(bytes4(w.w[j], 4u, 15u, 8.0f), x.b[j]);
        i47[j] = dot(bytes4(w.w[4u + j], 0u, 15u, 8.0f), x.a[4u + j]) + dot(bytes4(w.w[4u + j], 4u, 15u, 8.0f), x.b[4u + j]);
    }
    return dot(d03 * x.d03, i03) + dot(d47 * x.d47, i47);
}

// ---- The GEMV.

// The gated unit of a (gate, up) pair (the twin's mm_glu): EPI 2 SwiGLU, silu(g) * u with
// silu(g) = g / (1 + exp(-g)); EPI 3 GeGLU, gelu_tanh(g) * u with gelu_tanh(g) = g / 2 * (1 +
// tanh(v)) computed as the equal g / (1 + exp(-2v)), v = sqrt(2 / pi) * (g + 0.044715 g^3).
// g / (1 + exp(e)) without an infinity on the way, as the twin's: with t = exp(-|e|), g / (1 + t)
// for e <= 0 and g t / (1 + t) for e > 0 (fast-math division may turn g / inf into NaN).
template <uint EPI>
static inline float glu(float g, float u) {
    const float e = EPI == 3u ? -1.5957691216057308f * (g + 0.044715f * g * g * g) : -g;
    const float t = exp(-abs(e));
    return (e > 0.0f ? g * t : g) / (1.0f + t) * u;
}

// The epilogue of rows r0 .. r0 + ROWS - 1 (the twin's mm_store).
template <uint ROWS, uint EPI>
static inline void store(constant MmParams& p, device float* y, uint r0, float4 tot) {
    const uint o = p.y_off + r0;
    if (EPI >= 2u) {
        y[o / 2u] = glu<EPI>(tot.x, tot.y);
        if (ROWS > 3u && r0 + 2u < p.n) {
            y[o / 2u + 1u] = glu<EPI>(tot.z, tot.w);
        }
        return;
    }
    for (uint r = 0; r < ROWS; ++r) {
        if (r0 + r < p.n) {
            if (EPI == 1u) {
                y[o + r] += tot[r];
            } else {
                y[o + r] = tot[r];
            }
        }
    }
}

template <typename Row, uint ROWS, uint EPI>
static void gemv_q8(constant MmParams& p, device const uint4* wq, device const uint4* xk, device float* y, threadgroup float4* scratch, Team t) {
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        float4 acc = float4(0.0f);
        for (uint i = live ? t.lane : p.items; i < p.items; i += t.lanes) {
            // The rows' weights first, then the quad's activations, shared by the rows.
            Row w[ROWS];
            for (uint r = 0; r < ROWS; ++r) {
                load_row(w[r], wq, min(rb * ROWS + r, p.n - 1u) * p.row_vec4s, i, p);
            }
            const Qx x = load_x(xk, p.items, i);
            for (uint r = 0; r < ROWS; ++r) {
                acc[r] += dot_row(w[r], x);
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            store<ROWS, EPI>(p, y, rb * ROWS, tot);
        }
    }
}

kernel void mm_gemv_q8_q4_k_r2(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 2u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r2_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 2u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r2_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 2u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r2_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 2u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r4(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 4u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r4_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 4u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r4_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 4u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_k_r4_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4KRow, 4u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r2(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 2u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r2_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 2u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r2_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 2u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r2_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 2u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r4(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 4u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r4_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 4u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r4_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 4u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q6_k_r4_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q6KRow, 4u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r2(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 2u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r2_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 2u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r2_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 2u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r2_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 2u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r4(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 4u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r4_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 4u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r4_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 4u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q8_0_r4_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q8_0Row, 4u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r2(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 2u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r2_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 2u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r2_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 2u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r2_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 2u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r4(constant MmParams& p [[buffer(0)]],
                               device const uint4* wq [[buffer(1)]],
                               device const uint4* xk [[buffer(2)]],
                               device float* y [[buffer(3)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint3 ntg [[threadgroups_per_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint3 tptg [[threads_per_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 4u, 0u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r4_acc(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const uint4* xk [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 4u, 1u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r4_swiglu(constant MmParams& p [[buffer(0)]],
                                      device const uint4* wq [[buffer(1)]],
                                      device const uint4* xk [[buffer(2)]],
                                      device float* y [[buffer(3)]],
                                      uint3 tg [[threadgroup_position_in_grid]],
                                      uint3 ntg [[threadgroups_per_grid]],
                                      uint tid [[thread_index_in_threadgroup]],
                                      uint3 tptg [[threads_per_threadgroup]],
                                      uint sg [[simdgroup_index_in_threadgroup]],
                                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 4u, 2u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q8_q4_0_r4_geglu(constant MmParams& p [[buffer(0)]],
                                     device const uint4* wq [[buffer(1)]],
                                     device const uint4* xk [[buffer(2)]],
                                     device float* y [[buffer(3)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint3 ntg [[threadgroups_per_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint3 tptg [[threads_per_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    gemv_q8<Q4_0Row, 4u, 3u>(p, wq, xk, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
