// INT4 group-quantised GEMV, native tier (hand-written MSL for wgpu's passthrough path).
//   y[r] = sum_c (q[r,c] - zero[r,g]) * scale[r,g] * x[c],  g = c / group_size
//
// WGSL twin (same algorithm, same Params, same bindings, same code layout): wgsl/team_subgroup.wgsl
// + wgsl/interleave.wgsl + wgsl/int4_gemv.wgsl with WG = 128, ROWS = 4, UNROLL = 1, TEAM_SG = 0
// (a team is the threadgroup) and the same GMODE/GSHIFT. A team owns ROWS consecutive rows at a
// time (rows past n clamped to n - 1 for loading, never written), so every x value it loads serves
// ROWS rows. Its threads stride over the rows' uint4s of codes (16-byte loads); in the interleaved
// layout (interleave.wgsl) uint4 v holds natural words w0, w0+s, w0+2s, w0+3s, so consecutive
// threads read consecutive x as well. The leading "full" uint4s (every word holds 8 columns < k)
// take the fast path; the rest go column by column. Nibble i of a 16-bit half is dequantised by a
// mask alone: OR-ed into the bits of 2^(23 - 4i) it is 2^(23 - 4i) + code (exact), minus
// 2^(23 - 4i) + offset; zero points go through the sum of each word's 8 x values. The partial
// dots of the ROWS rows live in one float4; each row block ends with one simd_sum per simdgroup,
// then one partial per simdgroup is folded through threadgroup memory (team_sum). The writer of
// each simdgroup's partial is its first active thread (a prefix sum), so no simdgroup width (Apple
// GPUs run 32; wgpu reports 4..64) or full simdgroup is assumed.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; the threadgroup size
// comes from the PipelineDesc (up to 1024 threads); threadgroup memory: 128 float4 (2 KiB).
// Entry points: int4_gemv_g0 (group_size % 8 == 0: a word never straddles groups; the group of a
// word is a shift when group_size / 8 is a power of two, the twin's GSHIFT) and int4_gemv_g1 (any).
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   int4_gemv_g0, int4_gemv_g1: twin fnv1a64 719ce42497634015

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

// Rows per team (at most 4: one float4 accumulator). The Rust side builds Native keys (and their
// twins) with rows == ROWS.
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

// Group of natural word w (GMODE 0): a shift when gshift < 32, else a division.
static inline uint word_group(constant Int4GemvParams& p, uint gshift, uint w) {
    return gshift < 32u ? w >> gshift : (w * 8u) / p.group_size;
}

// Number of leading uint4s of a row whose four words hold 8 columns < k each.
static inline uint full_vec4s(constant Int4GemvParams& p, uint vec4s) {
    const uint lastv = ((vec4s - 1u) >> 5) << 5;  // first uint4 of the last block
    const uint s = vec4s - lastv;                  // its stride
    const uint lastw = lastv * 4u;                 // its first natural word
    const uint kw = p.k / 8u;                      // words with 8 valid columns
    const uint lim = kw > lastw + 3u * s ? kw - lastw - 3u * s : 0u;
    return lastv + min(lim, s);
}

// Nibble i (0..3) of a 16-bit half OR-ed into the bits of 2^(23 - 4i): 2^(23 - 4i) + code, exact.
// bias_i = 2^(23 - 4i) + offset. Fast math must not reassociate the subtraction with the products
// (compilers factor rather than distribute; only a run on Apple hardware confirms it).
static inline float half_dot(uint h, float4 xv, float4 bias, float acc) {
    const float m0 = as_type<float>((h & 0xfu) | 0x4b000000u) - bias.x;
    const float m1 = as_type<float>((h & 0xf0u) | 0x49000000u) - bias.y;
    const float m2 = as_type<float>((h & 0xf00u) | 0x47000000u) - bias.z;
    const float m3 = as_type<float>((h & 0xf000u) | 0x45000000u) - bias.w;
    return fma(m3, xv.w, fma(m2, xv.z, fma(m1, xv.y, fma(m0, xv.x, acc))));
}

// sum_e (q_e - offset) * x_e over one word (xa: x of columns 0-3, xb: 4-7).
static inline float word_q(uint w, float4 xa, float4 xb, float4 bias) {
    return half_dot(w >> 16, xb, bias, half_dot(w, xa, bias, 0.0f));
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

// One word position of a uint4 for the ROWS rows: codes cw and scales sw (component r: row r), x of
// the word's columns, its group gj; the rows' partial dots.
static inline float4 word_rows(constant Int4GemvParams& p, device const float* zeros, uint4 cw, float4 sw,
                               float4 xa, float4 xb, uint gj, uint4 rows, float4 bias) {
    float4 d;
    for (uint r = 0; r < ROWS; ++r) {
        d[r] = word_q(cw[r], xa, xb, bias);
    }
    if (p.has_zeros != 0u) {
        const float4 xs = xa + xb;
        const float xsum = xs.x + xs.y + xs.z + xs.w;
        for (uint r = 0; r < ROWS; ++r) {
            d[r] -= zeros[rows[r] * p.num_groups + gj] * xsum;
        }
    }
    return sw * d;
}

// Partial dots of the ROWS rows over full uint4 v (GMODE 0).
static inline float4 vec4_fast(constant Int4GemvParams& p, device const uint4* codes, device const float* scales,
                               device const float* zeros, device const float4* x, uint gshift, uint4 rows, uint v, float4 bias) {
    const uint vec4s = p.row_vec4s;
    const uint w0 = il_word0(v);
    const uint s = il_stride(v, vec4s);
    uint4 g;
    for (uint j = 0; j < 4u; ++j) {
        g[j] = word_group(p, gshift, w0 + j * s);
    }
    // Per word position j: the codes and scales of the ROWS rows (component r: row r).
    uint4 cw[4];
    float4 sw[4];
    for (uint r = 0; r < ROWS; ++r) {
        const uint4 c = codes[rows[r] * vec4s + v] ^ p.xor_mask;
        for (uint j = 0; j < 4u; ++j) {
            cw[j][r] = c[j];
            sw[j][r] = scales[rows[r] * p.num_groups + g[j]];
        }
    }
    const float4 xa0 = x[2u * w0];
    const float4 xb0 = x[2u * w0 + 1u];
    const float4 xa1 = x[2u * (w0 + s)];
    const float4 xb1 = x[2u * (w0 + s) + 1u];
    const float4 xa2 = x[2u * (w0 + 2u * s)];
    const float4 xb2 = x[2u * (w0 + 2u * s) + 1u];
    const float4 xa3 = x[2u * (w0 + 3u * s)];
    const float4 xb3 = x[2u * (w0 + 3u * s) + 1u];
    float4 a = word_rows(p, zeros, cw[0], sw[0], xa0, xb0, g.x, rows, bias);
    a += word_rows(p, zeros, cw[1], sw[1], xa1, xb1, g.y, rows, bias);
    a += word_rows(p, zeros, cw[2], sw[2], xa2, xb2, g.z, rows, bias);
    a += word_rows(p, zeros, cw[3], sw[3], xa3, xb3, g.w, rows, bias);
    return a;
}

// Partial dots of the ROWS rows over any uint4 v, column by column.
static inline float4 vec4_slow(constant Int4GemvParams& p, device const uint4* codes, device const float* scales,
                               device const float* zeros, device const float4* x, uint4 rows, uint v) {
    const uint w0 = il_word0(v);
    const uint s = il_stride(v, p.row_vec4s);
    float4 a = float4(0.0f);
    for (uint r = 0; r < ROWS; ++r) {
        const uint4 w = codes[rows[r] * p.row_vec4s + v] ^ p.xor_mask;
        a[r] = word_slow(p, scales, zeros, x, rows[r], w0, w.x) + word_slow(p, scales, zeros, x, rows[r], w0 + s, w.y)
             + word_slow(p, scales, zeros, x, rows[r], w0 + 2u * s, w.z) + word_slow(p, scales, zeros, x, rows[r], w0 + 3u * s, w.w);
    }
    return a;
}

template <uint GMODE>
static void int4_gemv_body(constant Int4GemvParams& p, device const uint4* codes, device const float* scales,
                           device const float* zeros, device const float4* x, device float* y,
                           threadgroup float4* scratch, Team t) {
    const uint vec4s = p.row_vec4s;
    const uint g8 = p.group_size / 8u;
    const uint gshift = (g8 != 0u && (g8 & (g8 - 1u)) == 0u) ? ctz(g8) : 99u;
    const uint full = GMODE == 0u ? full_vec4s(p, vec4s) : 0u;
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    float4 bias;
    bias.x = 8388608.0f + p.zero_offset;
    bias.y = 524288.0f + p.zero_offset;
    bias.z = 32768.0f + p.zero_offset;
    bias.w = 2048.0f + p.zero_offset;
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        uint4 rows;
        for (uint r = 0; r < 4u; ++r) {
            rows[r] = min(rb * ROWS + r, p.n - 1u);
        }
        float4 acc = float4(0.0f);
        if (live) {
            uint v0 = 0;
            for (; v0 + t.lanes <= full; v0 += t.lanes) {
                acc += vec4_fast(p, codes, scales, zeros, x, gshift, rows, v0 + t.lane, bias);
            }
            for (uint v = v0 + t.lane; v < vec4s; v += t.lanes) {
                if (v < full) {
                    acc += vec4_fast(p, codes, scales, zeros, x, gshift, rows, v, bias);
                } else {
                    acc += vec4_slow(p, codes, scales, zeros, x, rows, v);
                }
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            const uint r0 = rb * ROWS;
            for (uint r = 0; r < ROWS; ++r) {
                if (r0 + r < p.n) {
                    y[r0 + r] = tot[r];
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
    threadgroup float4 scratch[MAX_SIMDGROUPS];
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
    threadgroup float4 scratch[MAX_SIMDGROUPS];
    int4_gemv_body<1u>(p, codes, scales, zeros, x, y, scratch, make_team(tg, ntg, tid, tptg, sg, nsg));
}
