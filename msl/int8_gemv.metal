// INT8 GEMV, native tier (hand-written MSL for wgpu's passthrough path).
//   y[r] = sum_c (q[r,c] - zero) * scale * x[c],  scale/zero per tensor or per row
//
// WGSL twin (same algorithm, same Params, same bindings, same code layout): wgsl/team_subgroup.wgsl
// + wgsl/interleave.wgsl + wgsl/int8_gemv.wgsl with WG = 128, ROWS = 4, UNROLL = 1 and TEAM_SG = 0
// (a team is the threadgroup). Same structure as msl/int4_gemv.metal: a team owns ROWS rows at a
// time (rows past n clamped for loading, never written), threads stride over the interleaved
// uint4s of codes (16-byte loads, coalesced x), the leading full uint4s take the fast path, the
// ROWS partial dots live in one float4, one simd_sum per simdgroup and row block, partials folded
// through threadgroup memory. Signed codes become unsigned by XOR 0x80 per byte and a code offset
// of 128; byte i of a 16-bit half is dequantised by a mask alone (OR-ed into the bits of
// 2^(23 - 8i): 2^(23 - 8i) + byte, exact). The zero point goes through the sum of x: each thread
// subtracts zero * (its share of sum x) before the team sum, and y = scale * sum.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size
// from the PipelineDesc (up to 1024 threads); threadgroup memory: 128 float4.
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   int8_gemv: twin fnv1a64 b7a7a990cf320b00

#include <metal_stdlib>
using namespace metal;

struct Int8GemvParams {
    uint n;
    uint k;
    uint row_vec4s;     // row stride of `codes` in uint4 (16 codes each)
    uint xor_mask;      // 0x80808080 signed, 0 unsigned
    float zero_offset;  // 128 signed, 0 unsigned
    uint per_row;       // 1: scales/zeros have n entries, 0: one entry
    uint _p0;
    uint _p1;
};

// Rows per team (at most 4: one float4 accumulator). The Rust side builds Native keys (and their
// twins) with rows == ROWS.
constant constexpr uint ROWS = 4;
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

static inline uint il_word0(uint v) {
    return ((v >> 5) << 7) + (v & 31u);
}

static inline uint il_stride(uint v, uint vec4s) {
    return min(32u, vec4s - ((v >> 5) << 5));
}

// Leading uint4s of a row whose four words hold 4 columns < k each.
static inline uint full_vec4s(constant Int8GemvParams& p, uint vec4s) {
    const uint lastv = ((vec4s - 1u) >> 5) << 5;
    const uint s = vec4s - lastv;
    const uint lastw = lastv * 4u;
    const uint kw = p.k / 4u;
    const uint lim = kw > lastw + 3u * s ? kw - lastw - 3u * s : 0u;
    return lastv + min(lim, s);
}

// dot(q - offset, x) for the 4 bytes of w by masks alone; bias = (2^23, 2^15, 2^23, 2^15) + offset.
static inline float byte_dot(uint w, float4 bias, float4 xv) {
    const float b0 = as_type<float>((w & 0xffu) | 0x4b000000u) - bias.x;
    const float b1 = as_type<float>((w & 0xff00u) | 0x47000000u) - bias.y;
    const float b2 = as_type<float>(((w >> 16) & 0xffu) | 0x4b000000u) - bias.z;
    const float b3 = as_type<float>(((w >> 16) & 0xff00u) | 0x47000000u) - bias.w;
    return fma(b3, xv.w, fma(b2, xv.z, fma(b1, xv.y, b0 * xv.x)));
}

static inline float vec4_dot(uint4 c, float4 bias, float4 x0, float4 x1, float4 x2, float4 x3) {
    return byte_dot(c.x, bias, x0) + byte_dot(c.y, bias, x1) + byte_dot(c.z, bias, x2) + byte_dot(c.w, bias, x3);
}

// Column by column (partial words): sum over the valid columns of word wi of (q - offset) * x.
static inline float word_slow(constant Int8GemvParams& p, device const float4* x, uint wi, uint w) {
    float a = 0.0f;
    for (uint e = 0; e < 4u; ++e) {
        const uint c = wi * 4u + e;
        if (c < p.k) {
            a += (float((w >> (8u * e)) & 255u) - p.zero_offset) * x[c >> 2][c & 3u];
        }
    }
    return a;
}

static inline float x_slow(constant Int8GemvParams& p, device const float4* x, uint wi) {
    float a = 0.0f;
    for (uint e = 0; e < 4u; ++e) {
        const uint c = wi * 4u + e;
        if (c < p.k) {
            a += x[c >> 2][c & 3u];
        }
    }
    return a;
}

kernel void int8_gemv(constant Int8GemvParams& p [[buffer(0)]],
                      device const uint4* codes [[buffer(1)]],
                      device const float* scales [[buffer(2)]],
                      device const float* zeros [[buffer(3)]],
                      device const float4* x [[buffer(4)]],
                      device float* y [[buffer(5)]],
                      uint3 tg [[threadgroup_position_in_grid]],
                      uint3 ntg [[threadgroups_per_grid]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint3 tptg [[threads_per_threadgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    const Team t = make_team(tg, ntg, tid, tptg, sg, nsg);
    const uint vec4s = p.row_vec4s;
    const uint full = full_vec4s(p, vec4s);
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    float4 bias;
    bias.x = 8388608.0f + p.zero_offset;
    bias.y = 32768.0f + p.zero_offset;
    bias.z = 8388608.0f + p.zero_offset;
    bias.w = 32768.0f + p.zero_offset;
    // Every team runs the same number of row blocks (team_sum holds barriers).
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        uint4 rows;
        for (uint r = 0; r < 4u; ++r) {
            rows[r] = min(rb * ROWS + r, p.n - 1u);
        }
        float4 acc = float4(0.0f);
        float xsum = 0.0f;
        if (live) {
            for (uint v = t.lane; v < vec4s; v += t.lanes) {
                uint4 c[ROWS];
                for (uint r = 0; r < ROWS; ++r) {
                    c[r] = codes[rows[r] * vec4s + v] ^ p.xor_mask;
                }
                const uint w0 = il_word0(v);
                const uint s = il_stride(v, vec4s);
                if (v < full) {
                    const float4 x0 = x[w0];
                    const float4 x1 = x[w0 + s];
                    const float4 x2 = x[w0 + 2u * s];
                    const float4 x3 = x[w0 + 3u * s];
                    const float4 x4 = x0 + x1 + x2 + x3;
                    xsum += x4.x + x4.y + x4.z + x4.w;
                    for (uint r = 0; r < ROWS; ++r) {
                        acc[r] += vec4_dot(c[r], bias, x0, x1, x2, x3);
                    }
                } else {
                    xsum += x_slow(p, x, w0) + x_slow(p, x, w0 + s) + x_slow(p, x, w0 + 2u * s) + x_slow(p, x, w0 + 3u * s);
                    for (uint r = 0; r < ROWS; ++r) {
                        acc[r] += word_slow(p, x, w0, c[r].x) + word_slow(p, x, w0 + s, c[r].y)
                                + word_slow(p, x, w0 + 2u * s, c[r].z) + word_slow(p, x, w0 + 3u * s, c[r].w);
                    }
                }
            }
        }
        const uint4 zi = p.per_row != 0u ? rows : uint4(0u);
        for (uint r = 0; r < 4u; ++r) {
            acc[r] -= zeros[zi[r]] * xsum;
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            const uint r0 = rb * ROWS;
            for (uint r = 0; r < ROWS; ++r) {
                if (r0 + r < p.n) {
                    y[r0 + r] = scales[zi[r]] * tot[r];
                }
            }
        }
    }
}
