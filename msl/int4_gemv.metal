// INT4 group-quantised GEMV, native tier (hand-written MSL for wgpu's passthrough path).
//   y[r] = sum_c (q[r,c] - zero[r,g]) * scale[r,g] * x[c],  g = c / group_size
//
// WGSL twin (same algorithm, same Params, same bindings, same code layout): wgsl/team_subgroup.wgsl
// + wgsl/interleave.wgsl + wgsl/int4_gemv.wgsl with WG = 128, ROWS = 4 and the same GMODE/GSHIFT.
// One team = one threadgroup owns ROWS consecutive rows at a time, so every x value it loads serves
// ROWS rows. Its threads stride over the rows' uint4s of codes (16-byte loads); in the interleaved
// layout (interleave.wgsl) uint4 v holds natural words w0, w0+s, w0+2s, w0+3s, so consecutive
// threads read consecutive x as well. Nibbles are dequantised by masks alone (in place in the
// mantissa of 2^23, x pre-scaled to match; exact), and zero points go through the sum of each
// word's 8 x values. Each row ends with one simd_sum per simdgroup, then one
// partial per simdgroup is folded through threadgroup memory (team_reduce). The writer of each
// simdgroup's partial is its first active thread (a prefix sum), so no simdgroup width (Apple GPUs
// run 32; wgpu reports 4..64) or full simdgroup is assumed.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; the threadgroup size
// comes from the PipelineDesc (up to 1024 threads); threadgroup memory: ROWS x 128 floats (2 KiB).
// Entry points: int4_gemv_g0 (group_size % 8 == 0: a word never straddles groups; the group of a
// word is a shift when group_size / 8 is a power of two, the twin's GSHIFT) and int4_gemv_g1 (any).
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   int4_gemv_g0, int4_gemv_g1: twin fnv1a64 a294392445dde7ad

#include <metal_stdlib>
using namespace metal;

struct Int4GemvParams {
    uint n;
    uint k;
    uint group_size;
    uint num_groups;
    uint row_vec4s;    // row stride of `codes` in uint4 (32 codes each)
    uint xor_mask;     // 0x88888888 signed, 0 unsigned
    float zero_offset; // 8 signed, 0 unsigned
    uint has_zeros;
};

// Rows per team. The Rust side builds Native keys (and their twins) with rows == ROWS.
constant constexpr uint ROWS = 4;
// Partials per threadgroup: one per simdgroup (1024 threads / width >= 8).
constant constexpr uint MAX_SIMDGROUPS = 128;

struct Team {
    uint lane;    // thread index in the threadgroup
    uint lanes;   // threads in the threadgroup
    uint id;      // team (threadgroup) index over the dispatch
    uint count;   // teams in the dispatch
    uint sg;      // simdgroup index in the threadgroup
    uint nsg;     // simdgroups in the threadgroup
    bool first;   // first active thread of its simdgroup
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

// Sum acc[r] (r < rows) over the team; the sums are left in thread 0's acc. Call in
// threadgroup-uniform control flow.
static inline void team_reduce(thread float* acc, uint rows, threadgroup float* scratch, Team t) {
    for (uint r = 0; r < rows; ++r) {
        const float v = simd_sum(acc[r]);
        if (t.first) {
            scratch[r * MAX_SIMDGROUPS + t.sg] = v;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (t.lane == 0u) {
        for (uint r = 0; r < rows; ++r) {
            float s = 0.0f;
            for (uint q = 0; q < t.nsg; ++q) {
                s += scratch[r * MAX_SIMDGROUPS + q];
            }
            acc[r] = s;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

// Interleaved layout: natural index of component 0 of uint4 v, and the component stride.
static inline uint il_word0(uint v) {
    return ((v >> 5) << 7) + (v & 31u);
}

static inline uint il_stride(uint v, uint vec4s) {
    return min(32u, vec4s - ((v >> 5) << 5));
}

static inline float zero_at(constant Int4GemvParams& p, device const float* zeros, uint gi) {
    if (p.has_zeros != 0u) {
        return zeros[gi] + p.zero_offset;
    }
    return p.zero_offset;
}

// Dequantisation by masks alone: nibble i of a 16-bit half, masked in place and OR-ed into the
// mantissa of 2^23, is the float 2^23 + 16^i * code (exact). Subtracting bias_i = 2^23 + 16^i *
// offset (exact) leaves 16^i * (code - offset); the x values it multiplies were pre-scaled by 16^-i
// (exact). Fast math must not distribute the products over the subtraction (2^23 * x would cancel
// catastrophically); compilers factor rather than distribute, but only a run on Apple hardware
// confirms it.
static inline float mant(uint bits) {
    return as_type<float>(bits | 0x4b000000u);
}

static inline float half_dot(uint h, float4 xs, float4 bias) {
    return (mant(h & 0xfu) - bias.x) * xs.x + (mant(h & 0xf0u) - bias.y) * xs.y
         + (mant(h & 0xf00u) - bias.z) * xs.z + (mant(h & 0xf000u) - bias.w) * xs.w;
}

// sum_e (q_e - offset) * x_e over one word with x pre-scaled (xa: columns 0-3, xb: 4-7).
static inline float word_q(uint w, float4 xa, float4 xb, float4 bias) {
    return half_dot(w, xa, bias) + half_dot(w >> 16, xb, bias);
}

// x pre-scaled by (1, 16^-1, 16^-2, 16^-3), exactly.
static inline float4 prescale(float4 v) {
    float4 r = v;
    r.y *= 0.0625f;
    r.z *= 0.00390625f;
    r.w *= 0.000244140625f;
    return r;
}

// Sum of a word's 8 x values from their pre-scaled forms (undoing the scaling).
static inline float unscaled_sum(float4 xa, float4 xb) {
    const float4 v = xa + xb;
    return v.x + v.y * 16.0f + v.z * 256.0f + v.w * 4096.0f;
}

// Group of natural word w (GMODE 0): a shift when gshift < 32, else a division.
static inline uint word_group(constant Int4GemvParams& p, uint gshift, uint w) {
    return gshift < 32u ? w >> gshift : (w * 8u) / p.group_size;
}

// Column-by-column contribution of natural word wi (any group size, partial words).
static inline float word_slow(constant Int4GemvParams& p, device const float* scales, device const float* zeros,
                              device const float4* x, uint row, uint wi, uint w) {
    float a = 0.0f;
    for (uint e = 0; e < 8u; ++e) {
        const uint c = wi * 8u + e;
        if (c < p.k) {
            const uint gi = row * p.num_groups + c / p.group_size;
            const float q = float((w >> (4u * e)) & 15u);
            a += scales[gi] * (q - zero_at(p, zeros, gi)) * x[c >> 2][c & 3u];
        }
    }
    return a;
}

template <uint GMODE>
static void int4_gemv_body(constant Int4GemvParams& p, device const uint4* codes, device const float* scales,
                           device const float* zeros, device const float4* x, device float* y,
                           threadgroup float* scratch, Team t) {
    const uint vec4s = p.row_vec4s;
    const uint g8 = p.group_size / 8u;
    const uint gshift = (g8 != 0u && (g8 & (g8 - 1u)) == 0u) ? ctz(g8) : 99u;
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    float4 bias = float4(8388608.0f);
    bias.x += p.zero_offset;
    bias.y += p.zero_offset * 16.0f;
    bias.z += p.zero_offset * 256.0f;
    bias.w += p.zero_offset * 4096.0f;
    for (uint rb = t.id; rb < blocks; rb += t.count) {
        const uint row0 = rb * ROWS;
        float acc[ROWS];
        for (uint r = 0; r < ROWS; ++r) {
            acc[r] = 0.0f;
        }
        for (uint v = t.lane; v < vec4s; v += t.lanes) {
            const uint w0 = il_word0(v);
            const uint s = il_stride(v, vec4s);
            if (GMODE == 0u && (w0 + 3u * s) * 8u + 8u <= p.k) {
                const float4 xa0 = prescale(x[2u * w0]);
                const float4 xb0 = prescale(x[2u * w0 + 1u]);
                const float4 xa1 = prescale(x[2u * (w0 + s)]);
                const float4 xb1 = prescale(x[2u * (w0 + s) + 1u]);
                const float4 xa2 = prescale(x[2u * (w0 + 2u * s)]);
                const float4 xb2 = prescale(x[2u * (w0 + 2u * s) + 1u]);
                const float4 xa3 = prescale(x[2u * (w0 + 3u * s)]);
                const float4 xb3 = prescale(x[2u * (w0 + 3u * s) + 1u]);
                // Per-word sums of x for the zero points.
                float xs0 = 0.0f, xs1 = 0.0f, xs2 = 0.0f, xs3 = 0.0f;
                if (p.has_zeros != 0u) {
                    xs0 = unscaled_sum(xa0, xb0);
                    xs1 = unscaled_sum(xa1, xb1);
                    xs2 = unscaled_sum(xa2, xb2);
                    xs3 = unscaled_sum(xa3, xb3);
                }
                const uint g0 = word_group(p, gshift, w0);
                const uint g1 = word_group(p, gshift, w0 + s);
                const uint g2 = word_group(p, gshift, w0 + 2u * s);
                const uint g3 = word_group(p, gshift, w0 + 3u * s);
                for (uint r = 0; r < ROWS; ++r) {
                    const uint row = row0 + r;
                    if (row < p.n) {
                        const uint4 w = codes[row * vec4s + v] ^ p.xor_mask;
                        const uint gb = row * p.num_groups;
                        float d0 = word_q(w.x, xa0, xb0, bias);
                        float d1 = word_q(w.y, xa1, xb1, bias);
                        float d2 = word_q(w.z, xa2, xb2, bias);
                        float d3 = word_q(w.w, xa3, xb3, bias);
                        if (p.has_zeros != 0u) {
                            d0 -= zeros[gb + g0] * xs0;
                            d1 -= zeros[gb + g1] * xs1;
                            d2 -= zeros[gb + g2] * xs2;
                            d3 -= zeros[gb + g3] * xs3;
                        }
                        acc[r] += scales[gb + g0] * d0 + scales[gb + g1] * d1 + scales[gb + g2] * d2 + scales[gb + g3] * d3;
                    }
                }
            } else {
                for (uint r = 0; r < ROWS; ++r) {
                    const uint row = row0 + r;
                    if (row < p.n) {
                        const uint4 w = codes[row * vec4s + v] ^ p.xor_mask;
                        acc[r] += word_slow(p, scales, zeros, x, row, w0, w.x) + word_slow(p, scales, zeros, x, row, w0 + s, w.y)
                                + word_slow(p, scales, zeros, x, row, w0 + 2u * s, w.z) + word_slow(p, scales, zeros, x, row, w0 + 3u * s, w.w);
                    }
                }
            }
        }
        team_reduce(acc, ROWS, scratch, t);
        if (t.lane == 0u) {
            for (uint r = 0; r < ROWS; ++r) {
                if (row0 + r < p.n) {
                    y[row0 + r] = acc[r];
                }
            }
        }
    }
}

kernel void int4_gemv_g0(constant Int4GemvParams& p [[buffer(0)]],
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
    threadgroup float scratch[ROWS * MAX_SIMDGROUPS];
    int4_gemv_body<0u>(p, codes, scales, zeros, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}

kernel void int4_gemv_g1(constant Int4GemvParams& p [[buffer(0)]],
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
    threadgroup float scratch[ROWS * MAX_SIMDGROUPS];
    int4_gemv_body<1u>(p, codes, scales, zeros, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
