// Q4_K weight-matrix GEMV (the matmul family's mm_gemv_q4_k), native tier (hand-written MSL for
// wgpu's passthrough path).   y[y_off + r] = sum_c w[r, c] * x[c],  w = d * sc_j * q - dmin * m_j.
//
// WGSL twin (same algorithm, same Params, same bindings, same GPU layout): wgsl/team_subgroup.wgsl
// + wgsl/mm_common.wgsl + wgsl/mm_gemv.wgsl + wgsl/fmt_q4_k.wgsl + wgsl/mm_items.wgsl +
// wgsl/mm_rows.wgsl with WG = 128, ROWS = 2 or 4, UNROLL = 1 and TEAM_SG = 0 (a team is the
// threadgroup). GPU layout (src/formats/q4k.rs): per block 9 uint4 - the head (f16 d | f16 dmin << 16,
// then the 12 scale bytes), then the nibble words transposed (component pp of uint4 1 + wi holds
// positions 4wi .. 4wi + 3 of sub-blocks 2pp (low nibbles) and 2pp + 1 (high)); blocks of a row
// contiguous, row r at uint4 r * row_vec4s. An item is a quad (64 weights): quad u of block b = the
// head and uint4s 1 + u and 5 + u (positions 4u..4u+3 and 4u+16..4u+19 of all eight sub-blocks), so
// consecutive threads load consecutive uint4s of weights and of x and each weight byte is read once.
// A team owns ROWS rows at a time (rows past n clamped for loading, never written); its threads
// stride over the quads, the rows' loads issued before x and the arithmetic. Per row, with
// s_j = sum q_i x_i and sx_j = sum x_i over the thread's positions of sub-block j:
//   sum_i (d sc_j q_i - dmin m_j) x_i = d * sum_j sc_j s_j - dmin * sum_j m_j sx_j,
// the x sums shared by the ROWS rows. Small integers become floats by OR-ing them into the mantissa
// of a power of two (exact). The ROWS partial dots live in one float4, one simd_sum per simdgroup and
// row block, partials folded through threadgroup memory. k is a multiple of 256 (the block), so the
// quads cover exactly k columns and every x load is in range.
// Entry points: mm_gemv_q4_k_r2, mm_gemv_q4_k_r4 (ROWS = 2, 4; the twin's EPI = 0: store), and
// the fused epilogues of each: _acc (EPI = 1, y[y_off + r] += dot, the residual add), _swiglu
// (EPI = 2, the matrix holds (gate, up) row pairs: y[(y_off + 2i) / 2] = silu(dot_2i) * dot_2i+1,
// silu(g) = g / (1 + exp(-g))) and _geglu (EPI = 3, the same with gelu_tanh(dot_2i)), applied by
// thread 0 after the team's sum.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size from
// the PipelineDesc (up to 1024 threads); threadgroup memory: 128 float4.
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   mm_gemv_q4_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 411fcff6d1006cfc

#include <metal_stdlib>
using namespace metal;

// The matmul family's Params (wgsl/mm_common.wgsl), field for field.
struct MmParams {
    uint n;          // rows this dispatch computes (one row chunk of the matrix)
    uint k;          // columns
    uint k4;         // ceil(k / 4)
    uint items;      // GEMV items per row
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

// 6-bit value in bits sh..sh+5 of w, exactly.
static inline float six(uint w, uint sh) {
    return as_type<float>(((w >> sh) & 0x3fu) | 0x4b000000u) - 8388608.0f;
}

// Nibble in bits sh..sh+3 of w, exactly.
static inline float nib(uint w, uint sh) {
    return as_type<float>(((w >> sh) & 15u) | 0x4b000000u) - 8388608.0f;
}

// Sub-block dots (lo: sub-block 2pp, hi: 2pp + 1) of words a (positions 4u..) and b (4u + 16..).
static inline float2 pair_dot(uint a, uint b, float4 la, float4 ha, float4 lb, float4 hb) {
    float2 s;
    s.x = nib(a, 0u) * la.x + nib(a, 8u) * la.y + nib(a, 16u) * la.z + nib(a, 24u) * la.w
        + (nib(b, 0u) * lb.x + nib(b, 8u) * lb.y + nib(b, 16u) * lb.z + nib(b, 24u) * lb.w);
    s.y = nib(a, 4u) * ha.x + nib(a, 12u) * ha.y + nib(a, 20u) * ha.z + nib(a, 28u) * ha.w
        + (nib(b, 4u) * hb.x + nib(b, 12u) * hb.y + nib(b, 20u) * hb.z + nib(b, 28u) * hb.w);
    return s;
}

static inline float hsum(float4 v) {
    return (v.x + v.y) + (v.z + v.w);
}

// The gated unit of a (gate, up) pair (the twin's mm_glu): EPI 2 SwiGLU, silu(g) * u with
// silu(g) = g / (1 + exp(-g)); EPI 3 GeGLU, gelu_tanh(g) * u with gelu_tanh(g) = g / 2 * (1 +
// tanh(v)) computed as the equal g / (1 + exp(-2v)), v = sqrt(2 / pi) * (g + 0.044715 g^3).
template <uint EPI>
static inline float glu(float g, float u) {
    if (EPI == 3u) {
        return g / (1.0f + exp(-1.5957691216057308f * (g + 0.044715f * g * g * g))) * u;
    }
    return g / (1.0f + exp(-g)) * u;
}

// The epilogue of rows r0 .. r0 + ROWS - 1 (the twin's mm_store, wgsl/mm_gemv_acc.wgsl): EPI 0
// stores, 1 adds to y (a residual add), 2 and 3 store the SwiGLU / GeGLU of the (gate, up) row pairs.
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

template <uint ROWS, uint EPI>
static void q4_k_gemv_body(constant MmParams& p, device const uint4* wq, device const float4* x, device float* y,
                           threadgroup float4* scratch, Team t) {
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        float4 acc = float4(0.0f);
        for (uint i = live ? t.lane : p.items; i < p.items; i += t.lanes) {
            const uint u = i & 3u;
            // The rows' heads and codes first, then x.
            uint4 hd[ROWS];
            uint4 qa[ROWS];
            uint4 qb[ROWS];
            for (uint r = 0; r < ROWS; ++r) {
                const uint bb = min(rb * ROWS + r, p.n - 1u) * p.row_vec4s + 9u * (i >> 2);
                hd[r] = wq[bb];
                qa[r] = wq[bb + 1u + u];
                qb[r] = wq[bb + 5u + u];
            }
            // x of sub-block j, positions 4u..4u+3: uint4 64 blk + 8 j + u; positions 4u+16..: + 4.
            const uint xb = (i >> 2) * 64u + u;
            float4 la[4];
            float4 lb[4];
            float4 ha[4];
            float4 hb[4];
            float sx[8];
            for (uint pp = 0; pp < 4u; ++pp) {
                la[pp] = x[xb + 16u * pp];
                lb[pp] = x[xb + 16u * pp + 4u];
                ha[pp] = x[xb + 16u * pp + 8u];
                hb[pp] = x[xb + 16u * pp + 12u];
                sx[2u * pp] = hsum(la[pp] + lb[pp]);
                sx[2u * pp + 1u] = hsum(ha[pp] + hb[pp]);
            }
            for (uint r = 0; r < ROWS; ++r) {
                const float d = f16_exact(hd[r].x & 0xffffu);
                const float dmin = f16_exact(hd[r].x >> 16);
                // j < 4: sc = s[j] & 63, m = s[j+4] & 63; j = 4 + i: sc = (s[8+i] & 15) | ((s[i] >> 6) << 4),
                // m = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4). s[0..3] = hd.y, s[4..7] = hd.z, s[8..11] = hd.w.
                const uint sc47 = (hd[r].w & 0x0f0f0f0fu) | ((hd[r].y >> 2) & 0x30303030u);
                const uint m47 = ((hd[r].w >> 4) & 0x0f0f0f0fu) | ((hd[r].z >> 2) & 0x30303030u);
                float2 s[4];
                s[0] = pair_dot(qa[r].x, qb[r].x, la[0], ha[0], lb[0], hb[0]);
                s[1] = pair_dot(qa[r].y, qb[r].y, la[1], ha[1], lb[1], hb[1]);
                s[2] = pair_dot(qa[r].z, qb[r].z, la[2], ha[2], lb[2], hb[2]);
                s[3] = pair_dot(qa[r].w, qb[r].w, la[3], ha[3], lb[3], hb[3]);
                float ssc = 0.0f;
                float smn = 0.0f;
                for (uint j = 0; j < 4u; ++j) {
                    ssc += six(hd[r].y, 8u * j) * s[j / 2u][j % 2u] + six(sc47, 8u * j) * s[2u + j / 2u][j % 2u];
                    smn += six(hd[r].z, 8u * j) * sx[j] + six(m47, 8u * j) * sx[4u + j];
                }
                acc[r] += d * ssc - dmin * smn;
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            store<ROWS, EPI>(p, y, rb * ROWS, tot);
        }
    }
}

kernel void mm_gemv_q4_k_r2(constant MmParams& p [[buffer(0)]],
                            device const uint4* wq [[buffer(1)]],
                            device const float4* x [[buffer(2)]],
                            device float* y [[buffer(3)]],
                            uint3 tg [[threadgroup_position_in_grid]],
                            uint3 ntg [[threadgroups_per_grid]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint3 tptg [[threads_per_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]],
                            uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<2u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r2_acc(constant MmParams& p [[buffer(0)]],
                                device const uint4* wq [[buffer(1)]],
                                device const float4* x [[buffer(2)]],
                                device float* y [[buffer(3)]],
                                uint3 tg [[threadgroup_position_in_grid]],
                                uint3 ntg [[threadgroups_per_grid]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint3 tptg [[threads_per_threadgroup]],
                                uint sg [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<2u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r2_swiglu(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const float4* x [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<2u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r2_geglu(constant MmParams& p [[buffer(0)]],
                                  device const uint4* wq [[buffer(1)]],
                                  device const float4* x [[buffer(2)]],
                                  device float* y [[buffer(3)]],
                                  uint3 tg [[threadgroup_position_in_grid]],
                                  uint3 ntg [[threadgroups_per_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint3 tptg [[threads_per_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<2u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r4(constant MmParams& p [[buffer(0)]],
                            device const uint4* wq [[buffer(1)]],
                            device const float4* x [[buffer(2)]],
                            device float* y [[buffer(3)]],
                            uint3 tg [[threadgroup_position_in_grid]],
                            uint3 ntg [[threadgroups_per_grid]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint3 tptg [[threads_per_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]],
                            uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<4u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r4_acc(constant MmParams& p [[buffer(0)]],
                                device const uint4* wq [[buffer(1)]],
                                device const float4* x [[buffer(2)]],
                                device float* y [[buffer(3)]],
                                uint3 tg [[threadgroup_position_in_grid]],
                                uint3 ntg [[threadgroups_per_grid]],
                                uint tid [[thread_index_in_threadgroup]],
                                uint3 tptg [[threads_per_threadgroup]],
                                uint sg [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<4u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r4_swiglu(constant MmParams& p [[buffer(0)]],
                                   device const uint4* wq [[buffer(1)]],
                                   device const float4* x [[buffer(2)]],
                                   device float* y [[buffer(3)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint3 ntg [[threadgroups_per_grid]],
                                   uint tid [[thread_index_in_threadgroup]],
                                   uint3 tptg [[threads_per_threadgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<4u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q4_k_r4_geglu(constant MmParams& p [[buffer(0)]],
                                  device const uint4* wq [[buffer(1)]],
                                  device const float4* x [[buffer(2)]],
                                  device float* y [[buffer(3)]],
                                  uint3 tg [[threadgroup_position_in_grid]],
                                  uint3 ntg [[threadgroups_per_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint3 tptg [[threads_per_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    q4_k_gemv_body<4u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
