// F16 weight-matrix GEMV (the matmul family's mm_gemv_f16), native tier (hand-written MSL for
// wgpu's passthrough path).   y[y_off + r] = sum_c w[r, c] * x[c],  w = an f16 value.
//
// WGSL twin (same algorithm, same Params, same bindings, same GPU layout): wgsl/team_subgroup.wgsl
// + wgsl/mm_common.wgsl + wgsl/mm_gemv.wgsl + wgsl/fmt_f16.wgsl + wgsl/mm_items.wgsl +
// wgsl/mm_gemv_acc.wgsl + wgsl/mm_rows.wgsl with WG = 128, ROWS = 2 or 4, UNROLL = 1 and
// TEAM_SG = 0 (a team is the threadgroup). GPU layout (src/formats/f16.rs): row = halves packed two
// per word (even column low), padded with zeros to 8 weights; an item is one uint4 (8 weights).
// A team owns ROWS rows at a time (rows past n clamped for loading, never written); its threads
// stride over the items (16-byte weight loads, consecutive for consecutive threads, and 2 coalesced
// float4 x loads shared by the ROWS rows), the rows' loads issued before the arithmetic; per row
// and item two float4 dots. Halves are decoded exactly with integer ops (subnormals, infinities
// and NaN: weights are data). Any k >= 1: x is read as float4s (the buffer is padded to 16 bytes)
// and zeroed at columns >= k, as the twin's mm_x4 (the row's padding is zero, x past k may hold
// anything). The ROWS partial dots live in one float4, one simd_sum per simdgroup and row block,
// partials folded through threadgroup memory.
// Entry points: mm_gemv_f16_r2, mm_gemv_f16_r4 (ROWS = 2, 4; the twin's EPI = 0: store), and
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
//   mm_gemv_f16_r{2,4}[_acc|_swiglu|_geglu]: twin fnv1a64 cfc22c22a81c85f0

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

// One f16 (low 16 bits of b) as f32, exactly: subnormals, infinities and NaN included.
static inline float f16_full(uint b) {
    const uint e = (b >> 10) & 31u;
    const uint sign = (b & 0x8000u) << 16;
    return e == 31u ? as_type<float>(sign | 0x7f800000u | ((b & 1023u) << 13)) : f16_exact(b);
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

// The four halves of words a, b (low half first) as floats.
static inline float4 halves(uint a, uint b) {
    return f4(f16_full(a & 0xffffu), f16_full(a >> 16), f16_full(b & 0xffffu), f16_full(b >> 16));
}

// x of columns 4c4 .. 4c4 + 3, zero at columns >= k (the twin's mm_x4).
static inline float4 x4(constant MmParams& p, device const float4* x, uint c4) {
    const float4 v = x[min(c4, p.k4 - 1u)];
    const uint c = 4u * c4;
    return f4(c < p.k ? v.x : 0.0f, c + 1u < p.k ? v.y : 0.0f, c + 2u < p.k ? v.z : 0.0f, c + 3u < p.k ? v.w : 0.0f);
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
static void f16_gemv_body(constant MmParams& p, device const uint4* wq, device const float4* x, device float* y,
                          threadgroup float4* scratch, Team t) {
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        float4 acc = float4(0.0f);
        for (uint i = live ? t.lane : p.items; i < p.items; i += t.lanes) {
            // The rows' weights first, then x.
            uint4 w[ROWS];
            for (uint r = 0; r < ROWS; ++r) {
                w[r] = wq[min(rb * ROWS + r, p.n - 1u) * p.row_vec4s + i];
            }
            const float4 xa = x4(p, x, 2u * i);
            const float4 xb = x4(p, x, 2u * i + 1u);
            for (uint r = 0; r < ROWS; ++r) {
                acc[r] += dot(halves(w[r].x, w[r].y), xa) + dot(halves(w[r].z, w[r].w), xb);
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            store<ROWS, EPI>(p, y, rb * ROWS, tot);
        }
    }
}

kernel void mm_gemv_f16_r2(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<2u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r2_acc(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<2u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r2_swiglu(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<2u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r2_geglu(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<2u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r4(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<4u, 0u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r4_acc(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<4u, 1u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r4_swiglu(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<4u, 2u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void mm_gemv_f16_r4_geglu(constant MmParams& p [[buffer(0)]],
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
    f16_gemv_body<4u, 3u>(p, wq, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
