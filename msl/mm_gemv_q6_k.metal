// Q6_K weight-matrix GEMV (the matmul family's mm_gemv_q6_k), native tier (hand-written MSL for
// wgpu's passthrough path).   y[y_off + r] = sum_c w[r, c] * x[c],  w = (d * sc) * (q - 32).
//
// WGSL twin (same algorithm, same Params, same bindings, same GPU layout): wgsl/team_subgroup.wgsl
// + wgsl/mm_common.wgsl + wgsl/mm_gemv.wgsl + wgsl/fmt_q6_k.wgsl + wgsl/mm_rows.wgsl with WG = 128,
// ROWS = 2 or 4, UNROLL = 1 and TEAM_SG = 0 (a team is the threadgroup). GPU layout
// (src/formats/q6_k.rs): per block 13 uint4 - 8 of ql (uint4 u = ql words u, 8 + u, 16 + u,
// 24 + u), 4 of qh (uint4 v = qh words 2v, 8 + 2v, 2v + 1, 9 + 2v), 1 of the 16 int8 scales -
// then the row's f16 d (block 2i: low half of word i). An item is u = item % 8 of block item / 8:
// positions 4u .. 4u + 3 of the eight 32-weight quarters (half h, quarter s: low nibbles of ql
// word 16h + 8(s % 2) + u, high nibbles for s >= 2; 2-bit highs at shift 2s of qh word 8h + u;
// scale byte 8h + 2s + u / 4). A team owns ROWS rows at a time (rows past n clamped for
// loading, never written); its threads stride over the items (16-byte loads, consecutive for
// consecutive threads; eight coalesced float4 x loads shared by the ROWS rows), the rows' loads
// issued before the arithmetic; per row and item d * (sc0 . dots0 + sc1 . dots1) over the eight
// quarters; the ROWS partial dots live in one float4, one simd_sum per simdgroup and row block,
// partials folded through threadgroup memory. k is a multiple of 256 (the block), so items cover
// exactly k columns and every x load is in range.
// Entry points: mm_gemv_q6_k_r2, mm_gemv_q6_k_r4 (ROWS = 2, 4; the twin's EPI = 0: store), and
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
//   mm_gemv_q6_k_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 4b67f739024a4ae2

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

// float4(a, b, c, d), spelled with component stores.
static inline float4 f4(float a, float b, float c, float d) {
    float4 v;
    v.x = a;
    v.y = b;
    v.z = c;
    v.w = d;
    return v;
}

// Byte i (0..3) of w as a signed integer, exactly.
static inline float sbyte(uint w, uint i) {
    return float(as_type<int>(w << (24u - 8u * i)) >> 24);
}

// q - 32 of the four positions of quarter s: l = its ql word, h = its qh word.
static inline float4 q6(uint l, uint h, uint s) {
    const uint c = ((l >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((h >> (2u * s)) & 0x03030303u) << 4);
    return f4(float(c & 255u), float((c >> 8) & 255u), float((c >> 16) & 255u), float(c >> 24)) - float4(32.0f);
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
static void q6_k_gemv_body(constant MmParams& p, device const uint4* wq, device const float4* x, device float* y,
                           threadgroup float4* scratch, Team t) {
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    const uint nb = p.k4 / 64u;  // blocks per row; their d follow the 13 * nb block uint4s
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        float4 acc = float4(0.0f);
        for (uint i = live ? t.lane : p.items; i < p.items; i += t.lanes) {
            const uint blk = i / 8u;
            const uint u = i % 8u;
            // The rows' codes, scales and d words first, then x.
            uint4 ql[ROWS];
            uint2 qh[ROWS];
            uint4 sc[ROWS];
            uint dw[ROWS];
            for (uint r = 0; r < ROWS; ++r) {
                const uint row = min(rb * ROWS + r, p.n - 1u) * p.row_vec4s;
                const uint bb = row + 13u * blk;
                ql[r] = wq[bb + u];
                const uint4 h = wq[bb + 8u + u / 2u];
                qh[r] = (u & 1u) != 0u ? h.zw : h.xy;
                sc[r] = wq[bb + 12u];
                dw[r] = wq[row + 13u * nb + blk / 8u][(blk % 8u) / 2u];
            }
            const uint c = 64u * blk + u;
            float4 xs[8];
            for (uint j = 0; j < 8u; ++j) {
                xs[j] = x[c + 8u * j];
            }
            const uint o = u / 4u;
            for (uint r = 0; r < ROWS; ++r) {
                const float d = f16_exact((blk & 1u) != 0u ? dw[r] >> 16 : dw[r] & 0xffffu);
                // Scales of quarters 0..3 of half h: bytes 8h + {0, 2, 4, 6} + o.
                const float4 sc0 = f4(sbyte(sc[r].x, o), sbyte(sc[r].x, 2u + o), sbyte(sc[r].y, o), sbyte(sc[r].y, 2u + o));
                const float4 sc1 = f4(sbyte(sc[r].z, o), sbyte(sc[r].z, 2u + o), sbyte(sc[r].w, o), sbyte(sc[r].w, 2u + o));
                const float4 d0 = f4(dot(q6(ql[r].x, qh[r].x, 0u), xs[0]), dot(q6(ql[r].y, qh[r].x, 1u), xs[1]),
                                     dot(q6(ql[r].x, qh[r].x, 2u), xs[2]), dot(q6(ql[r].y, qh[r].x, 3u), xs[3]));
                const float4 d1 = f4(dot(q6(ql[r].z, qh[r].y, 0u), xs[4]), dot(q6(ql[r].w, qh[r].y, 1u), xs[5]),
                                     dot(q6(ql[r].z, qh[r].y, 2u), xs[6]), dot(q6(ql[r].w, qh[r].y, 3u), xs[7]));
                acc[r] += d * (dot(sc0, d0) + dot(sc1, d1));
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            store<ROWS, EPI>(p, y, rb * ROWS, tot);
        }
    }
}

kernel void mm_gemv_q6_k_r2(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<2u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r2_acc(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<2u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r2_swiglu(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<2u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r2_geglu(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<2u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r4(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<4u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r4_acc(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<4u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r4_swiglu(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<4u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_q6_k_r4_geglu(constant MmParams& p [[buffer(0)]],
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
    q6_k_gemv_body<4u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
