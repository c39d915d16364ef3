// INT8 GEMV, native tier (hand-written MSL for wgpu's passthrough path).
//   y[r] = sum_c (q[r,c] - zero) * scale * x[c],  scale/zero per tensor or per row
//
// WGSL twin (same algorithm, same Params, same bindings, same code layout): wgsl/team_subgroup.wgsl
// + wgsl/interleave.wgsl + wgsl/int8_gemv.wgsl with WG = 128 and ROWS = 4. Same structure as
// msl/int4_gemv.metal: one team = one threadgroup owning ROWS rows at a time, threads striding over
// the interleaved uint4s of codes (16-byte loads, coalesced x), one simd_sum per row and simdgroup,
// partials folded through threadgroup memory. Signed codes become unsigned by XOR 0x80 per byte and
// a code offset of 128; bytes are dequantised by masks alone (in place in the mantissa of 2^23, x
// pre-scaled to match; exact); the
// zero point is applied once per row, y = scale * (sum (q - offset) x - zero * sum x), with sum x
// reduced alongside the rows (slot ROWS of the accumulators).
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size
// from the PipelineDesc (up to 1024 threads); threadgroup memory: (ROWS + 1) x 128 floats.
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   int8_gemv: twin fnv1a64 ae02e37d230b9ea2

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

// Rows per team. The Rust side builds Native keys (and their twins) with rows == ROWS.
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

// Sum acc[r] (r < rows) over the team; the sums are left in thread 0's acc. Threadgroup-uniform
// control flow.
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

static inline uint il_word0(uint v) {
    return ((v >> 5) << 7) + (v & 31u);
}

static inline uint il_stride(uint v, uint vec4s) {
    return min(32u, vec4s - ((v >> 5) << 5));
}

static inline float mant(uint bits) {
    return as_type<float>(bits | 0x4b000000u);
}

// dot(q - offset, x) for the 4 bytes of w by masks alone: bytes 0/1 of a 16-bit half, masked in
// place and OR-ed into the mantissa of 2^23, are 2^23 + 256^i * byte (exact); bias = 2^23 + 256^i *
// offset; xv = x of bytes (0, 1, 2, 3) pre-scaled as (x0, x1/256, x2, x3/256) (exact). (Fast math
// must not distribute the products over the subtraction; see msl/int4_gemv.metal.)
static inline float byte_dot(uint w, float4 bias, float4 xv) {
    const uint h = w >> 16;
    return (mant(w & 0xffu) - bias.x) * xv.x + (mant(w & 0xff00u) - bias.y) * xv.y
         + (mant(h & 0xffu) - bias.z) * xv.z + (mant(h & 0xff00u) - bias.w) * xv.w;
}

// x pre-scaled by (1, 1/256, 1, 1/256), exactly.
static inline float4 prescale(float4 v) {
    float4 r = v;
    r.y *= 0.00390625f;
    r.w *= 0.00390625f;
    return r;
}

// Column by column (partial words): returns sum (q - offset) * x and adds x to *xsum when count_x.
static inline float byte_slow(constant Int8GemvParams& p, device const float4* x, uint wi, uint w,
                              thread float* xsum, bool count_x) {
    float a = 0.0f;
    for (uint e = 0; e < 4u; ++e) {
        const uint c = wi * 4u + e;
        if (c < p.k) {
            const float xv = x[c >> 2][c & 3u];
            a += (float((w >> (8u * e)) & 255u) - p.zero_offset) * xv;
            if (count_x) {
                *xsum += xv;
            }
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
    threadgroup float scratch[(ROWS + 1) * MAX_SIMDGROUPS];
    const Team t = make_team(tg, ntg, tid, tptg, sg, nsg);
    const uint vec4s = p.row_vec4s;
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    float4 bias = float4(8388608.0f);
    bias.x += p.zero_offset;
    bias.y += p.zero_offset * 256.0f;
    bias.z += p.zero_offset;
    bias.w += p.zero_offset * 256.0f;
    for (uint rb = t.id; rb < blocks; rb += t.count) {
        const uint row0 = rb * ROWS;
        float acc[ROWS + 1];
        for (uint r = 0; r < ROWS; ++r) {
            acc[r] = 0.0f;
        }
        float xsum = 0.0f;
        for (uint v = t.lane; v < vec4s; v += t.lanes) {
            const uint w0 = il_word0(v);
            const uint s = il_stride(v, vec4s);
            if ((w0 + 3u * s) * 4u + 4u <= p.k) {
                const float4 x0 = x[w0];
                const float4 x1 = x[w0 + s];
                const float4 x2 = x[w0 + 2u * s];
                const float4 x3 = x[w0 + 3u * s];
                const float4 x4 = x0 + x1 + x2 + x3;
                xsum += x4.x + x4.y + x4.z + x4.w;
                const float4 y0 = prescale(x0);
                const float4 y1 = prescale(x1);
                const float4 y2 = prescale(x2);
                const float4 y3 = prescale(x3);
                for (uint r = 0; r < ROWS; ++r) {
                    const uint row = row0 + r;
                    if (row < p.n) {
                        const uint4 w = codes[row * vec4s + v] ^ p.xor_mask;
                        acc[r] += byte_dot(w.x, bias, y0) + byte_dot(w.y, bias, y1) + byte_dot(w.z, bias, y2) + byte_dot(w.w, bias, y3);
                    }
                }
            } else {
                for (uint r = 0; r < ROWS; ++r) {
                    const uint row = row0 + r;
                    // Row r == 0 always exists (row0 < n), so the columns are walked once for xsum.
                    if (row < p.n) {
                        const uint4 w = codes[row * vec4s + v] ^ p.xor_mask;
                        const bool first = r == 0u;
                        acc[r] += byte_slow(p, x, w0, w.x, &xsum, first) + byte_slow(p, x, w0 + s, w.y, &xsum, first)
                                + byte_slow(p, x, w0 + 2u * s, w.z, &xsum, first) + byte_slow(p, x, w0 + 3u * s, w.w, &xsum, first);
                    }
                }
            }
        }
        acc[ROWS] = xsum;
        team_reduce(acc, ROWS + 1u, scratch, t);
        if (t.lane == 0u) {
            for (uint r = 0; r < ROWS; ++r) {
                const uint row = row0 + r;
                if (row < p.n) {
                    const uint i = p.per_row != 0u ? row : 0u;
                    y[row] = scales[i] * (acc[r] - zeros[i] * acc[ROWS]);
                }
            }
        }
    }
}
