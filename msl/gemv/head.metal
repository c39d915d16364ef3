// The weight-matrix family's Native f32-activation GEMV (mm_gemv_<format>), hand-written MSL for
// wgpu's passthrough path: y[y_off + r] = sum_c w[r, c] * x[c] for the chunk's rows r < n.
//
// One program per format, assembled in Rust (src/formats/mod.rs, `native_gemv!`) from this head
// (params, team, sums, decode helpers, epilogue), the format's decode part msl/gemv/fmt_<name>.metal
// (the analogue of wgsl/fmt_<name>.wgsl), the row driver msl/gemv/rows.metal and one thin kernel
// per entry point. A decode part defines, with the names of the WGSL part contract:
//   struct FmtRow, FmtRow fmt_load(p, wq, base, item): one row's loads at one item (loads only);
//   struct FmtX, FmtX fmt_x(p, x, item): the item's activations, shared by the ROWS rows;
//   float fmt_dot(FmtRow w, FmtX x): the row's partial dot over the item.
// Every other name a part declares starts with `fmt_` or `Fmt`.
//
// WGSL twin (same algorithm, same Params, same bindings, same GPU layout): wgsl/team_subgroup.wgsl
// + wgsl/mm_common.wgsl + wgsl/mm_gemv.wgsl + wgsl/fmt_<name>.wgsl + wgsl/mm_items.wgsl +
// wgsl/mm_gemv_acc.wgsl + wgsl/mm_rows.wgsl with WG = 128, ROWS = 2 or 4, UNROLL = 1 and
// TEAM_SG = 0 (a team is the threadgroup). A team owns ROWS rows at a time (rows past n clamped
// for loading, never written); its threads stride over the items, the rows' loads issued before
// the activations and the arithmetic; the ROWS partial dots live in one float4, one simd_sum per
// simdgroup and row block, partials folded through threadgroup memory.
// Entry points: mm_gemv_<name>_r2, mm_gemv_<name>_r4 (ROWS = 2, 4; the twin's EPI = 0: store), and
// the fused epilogues of each: _acc (EPI = 1, y[y_off + r] += dot, the residual add), _swiglu
// (EPI = 2, the matrix holds (gate, up) row pairs: y[(y_off + 2i) / 2] = silu(dot_2i) * dot_2i+1,
// silu(g) = g / (1 + exp(-g))) and _geglu (EPI = 3, the same with gelu_tanh(dot_2i)), applied by
// thread 0 after the team's sum.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size from
// the PipelineDesc (up to 1024 threads); threadgroup memory: 128 float4.

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

// Decode helpers for the format parts (not `static`: a part uses some of them, and clang warns of
// unused static functions).

// float4(a, b, c, d), spelled with component stores.
inline float4 f4(float a, float b, float c, float d) {
    float4 v;
    v.x = a;
    v.y = b;
    v.z = c;
    v.w = d;
    return v;
}

inline float hsum(float4 v) {
    return (v.x + v.y) + (v.z + v.w);
}

// v (< 2^23) as a float, exactly: OR-ed into the mantissa of 2^23.
inline float exact(uint v) {
    return as_type<float>(v | 0x4b000000u) - 8388608.0f;
}

// The bits sh .. sh + width - 1 of w (mask = 2^width - 1) as a float, exactly.
inline float field(uint w, uint sh, uint mask) {
    return exact((w >> sh) & mask);
}

// The four bytes of w (byte 0 first) as unsigned integers.
inline float4 u8x4(uint w) {
    return f4(exact(w & 255u), exact((w >> 8) & 255u), exact((w >> 16) & 255u), exact(w >> 24));
}

// Byte i (0..3) of w as a signed integer, exactly.
inline float sbyte(uint w, uint i) {
    return float(as_type<int>(w << (24u - 8u * i)) >> 24);
}

// The four bytes of w as signed integers (byte 0 first).
inline float4 i8x4(uint w) {
    return f4(sbyte(w, 0u), sbyte(w, 1u), sbyte(w, 2u), sbyte(w, 3u));
}

// One f16 (low 16 bits of b) as f32, exactly, with integer ops (subnormals kept; scales are
// finite).
inline float f16_exact(uint b) {
    const uint e = (b >> 10) & 31u;
    const uint m = (b & 1023u) | (e != 0u ? 1024u : 0u);
    const float mf = as_type<float>(m | 0x4b000000u) - 8388608.0f;
    const float p2 = as_type<float>((max(e, 1u) + 102u) << 23);
    const float v = mf * p2;
    return (b & 0x8000u) != 0u ? -v : v;
}

// One f16 (low 16 bits of b) as f32, exactly: subnormals, infinities and NaN included.
inline float f16_full(uint b) {
    const uint e = (b >> 10) & 31u;
    const uint sign = (b & 0x8000u) << 16;
    return e == 31u ? as_type<float>(sign | 0x7f800000u | ((b & 1023u) << 13)) : f16_exact(b);
}

// x of columns 4c4 .. 4c4 + 3, zero at columns >= k (the twin's mm_x4): for the float formats,
// whose k is any; the block formats' k is a multiple of their block, so their x loads are in range.
inline float4 x4(constant MmParams& p, device const float4* x, uint c4) {
    const float4 v = x[min(c4, p.k4 - 1u)];
    const uint c = 4u * c4;
    return f4(c < p.k ? v.x : 0.0f, c + 1u < p.k ? v.y : 0.0f, c + 2u < p.k ? v.z : 0.0f, c + 3u < p.k ? v.w : 0.0f);
}

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

// ---- the format's decode part follows ----
