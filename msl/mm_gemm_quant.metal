// Weight-matrix GEMM for m > 1 (the matmul family's mm_gemm_<fmt>) of the quantised formats Q4_K,
// Q6_K and Q8_0, native tier (hand-written MSL for wgpu's passthrough path), on 8x8 simdgroup
// matrices.   y[i, y_off + r] = sum_c x[i, c] * w[r, c]  (y row stride ldy).
//
// WGSL twin (same plan, same Params, same bindings, same GPU layout, same outputs and split-K
// partials): wgsl/mm_common.wgsl + wgsl/fmt_<fmt>.wgsl + wgsl/mm_gemm.wgsl +
// wgsl/splitk_tile.wgsl, the Portable GEMM of the format (128 threads). The twin computes in f32;
// this kernel rounds the operands to half as the Matrix GEMM does (the tests hold both to the
// Matrix GEMM's error bound, on weights within half's range).
//
// Plan: threadgroup wg = split * tiles + tile computes the 32 (x rows) x 64 (weight rows) output
// tile of its tile index over the 32-column K slices split * sps .. (as splitk_tile.wgsl), and
// writes y[(split * m + row) * ldy + y_off + col] (splits == 1: y is the output). Per slice, the x
// slice (32 x 32, float4 loads coalesced along the row, rounded to half) and the exactly
// dequantised weight slice (64 rows x 32 columns from the format's w4, the same function as its
// WGSL part's fmt_w4, rounded to half; stored column-major so it loads as the K x N operand) are
// staged in threadgroup memory; then each of the 4 simdgroups (2 x 2 over the tile) multiplies
// its 16 x 32 block: per 8 columns of K, 2 x-tiles and 4 weight-tiles (simdgroup_half8x8) into
// 2 x 4 float accumulators (simdgroup_float8x8). Rows and columns past m, n and k stage as zeros;
// the accumulators go through threadgroup memory and every store is bounds-checked.
// k is a multiple of 32 for these formats, so x rows start on a float4.
// Entry points: mm_gemm_q4_k, mm_gemm_q6_k, mm_gemm_q8_0.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size from
// the PipelineDesc (128 threads: 4 simdgroups of 32); threadgroup memory: 1280 + 2304 halves of
// slices and 2048 floats of output tile (15 KiB).
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   mm_gemm_q4_k: twin fnv1a64 8797564981eb3cc9
//   mm_gemm_q6_k: twin fnv1a64 2e6d20ab1bd39cfd
//   mm_gemm_q8_0: twin fnv1a64 ce725686bead7969

#include <metal_stdlib>
using namespace metal;

// The matmul family's Params (wgsl/mm_common.wgsl), field for field.
struct MmParams {
    uint n;          // rows this dispatch computes (one row chunk of the matrix)
    uint k;          // columns
    uint k4;         // ceil(k / 4)
    uint items;      // GEMV items per row
    uint row_vec4s;  // row stride in wq
    uint y_off;      // the chunk's first row: output column offset
    uint m;          // input rows
    uint ldy;        // output row stride (the matrix's n)
    uint tiles_n;    // 64-row tiles of this chunk
    uint sps;        // 32-column slices per split
    uint splits;     // K splits
    uint xs;         // q8 GEMM: stride of the activation records' planes (unused here)
};

// The tile (the twin's TM, TN, TK) and the threadgroup arrays' row strides in halves.
constant constexpr uint TM = 32;
constant constexpr uint TN = 64;
constant constexpr uint TK = 32;
constant constexpr uint LDX = 40;  // xs: [TM rows][TK columns + 8]
constant constexpr uint LDW = 72;  // ws: [TK columns][TN rows + 8]
constant constexpr uint THREADS = 128;

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

// Byte i (0..3) of w.
static inline uint ubyte(uint w, uint i) {
    return (w >> (8u * i)) & 255u;
}

// Format tags: the entry point picks the weight dequantiser.
struct Q4K {};
struct Q6K {};
struct Q80 {};

// Weights 4c4 .. 4c4 + 3 of the row at wq[base ..], exactly: each format's fmt_w4.

// Q4_K (src/formats/q4k.rs): per block 9 uint4, the head (d | dmin << 16, 12 scale bytes), then
// the nibble words transposed (component pp of uint4 1 + wi = positions 4wi .. 4wi + 3 of
// sub-blocks 2pp (low nibbles) and 2pp + 1 (high)). Column 4c4: sub-block j = (c4 % 64) / 8,
// wi = c4 % 8. w = (d * sc_j) * q - dmin * m_j.
static inline float4 w4(Q4K, device const uint4* wq, uint base, uint c4, constant MmParams& p) {
    const uint bb = base + 9u * (c4 / 64u);
    const uint j = (c4 % 64u) / 8u;
    const uint wi = c4 % 8u;
    const uint4 hd = wq[bb];
    const float d = f16_exact(hd.x & 0xffffu);
    const float dmin = f16_exact(hd.x >> 16);
    // j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j = 4 + i: sc = (s[8 + i] & 15) | ((s[i] >> 6) << 4),
    // m = (s[8 + i] >> 4) | ((s[4 + i] >> 6) << 4)  (s = the 12 scale bytes: hd.y, hd.z, hd.w).
    const uint i = j & 3u;
    const uint sc = j < 4u ? ubyte(hd.y, i) & 63u : (ubyte(hd.w, i) & 15u) | ((ubyte(hd.y, i) >> 6) << 4);
    const uint mn = j < 4u ? ubyte(hd.z, i) & 63u : (ubyte(hd.w, i) >> 4) | ((ubyte(hd.z, i) >> 6) << 4);
    const uint word = wq[bb + 1u + wi][j / 2u] >> ((j & 1u) * 4u);
    const float a = d * float(sc);
    const float b = -(dmin * float(mn));
    return f4(fma(float(word & 15u), a, b), fma(float((word >> 8) & 15u), a, b), fma(float((word >> 16) & 15u), a, b),
              fma(float((word >> 24) & 15u), a, b));
}

// Q6_K (src/formats/q6_k.rs): per block 13 uint4 - 8 of ql (uint4 u = ql words u, 8 + u, 16 + u,
// 24 + u), 4 of qh (uint4 v = qh words 2v, 8 + 2v, 2v + 1, 9 + 2v), 1 of the 16 int8 scales - then
// the row's f16 d (block 2i: low half of word i). Column 4c4 = position i = 128h + 32s + 4u of
// block c4 / 64. w = (d * sc) * (q - 32).
static inline float4 w4(Q6K, device const uint4* wq, uint base, uint c4, constant MmParams& p) {
    const uint blk = c4 / 64u;
    const uint i = 4u * (c4 % 64u);
    const uint h = i / 128u;
    const uint s = (i % 128u) / 32u;
    const uint u = (i % 32u) / 4u;
    const uint bb = base + 13u * blk;
    const uint l = wq[bb + u][2u * h + (s & 1u)];
    const uint hw = wq[bb + 8u + u / 2u][2u * (u & 1u) + h];
    const uint sb = i / 16u;
    const float sc = sbyte(wq[bb + 12u][sb / 4u], sb % 4u);
    const uint dw = wq[base + 13u * (p.k4 / 64u) + blk / 8u][(blk % 8u) / 2u];
    const float d = f16_exact((blk & 1u) != 0u ? dw >> 16 : dw & 0xffffu);
    const uint q = ((l >> (4u * (s / 2u))) & 0x0f0f0f0fu) | (((hw >> (2u * s)) & 0x03030303u) << 4);
    const float ds = d * sc;
    return f4(ds * (float(ubyte(q, 0u)) - 32.0f), ds * (float(ubyte(q, 1u)) - 32.0f), ds * (float(ubyte(q, 2u)) - 32.0f),
              ds * (float(ubyte(q, 3u)) - 32.0f));
}

// Q8_0 (src/formats/q8_0.rs): row = its k code bytes (k / 16 uint4s), then the k / 32 f16 scales
// (block 2i: low half of word i). w = d * q.
static inline float4 w4(Q80, device const uint4* wq, uint base, uint c4, constant MmParams& p) {
    const uint b = c4 / 8u;
    const uint sw = wq[base + p.k4 / 4u + b / 8u][(b % 8u) / 2u];
    const float d = f16_exact((b & 1u) != 0u ? sw >> 16 : sw & 0xffffu);
    const uint q = wq[base + c4 / 4u][c4 % 4u];
    return f4(d * sbyte(q, 0u), d * sbyte(q, 1u), d * sbyte(q, 2u), d * sbyte(q, 3u));
}

template <class F>
static void gemm_body(constant MmParams& p, device const uint4* wq, device const float4* x, device float* y,
                      threadgroup half* xs, threadgroup half* ws, threadgroup float* cs, uint wg, uint li, uint sg) {
    // The work unit (splitk_tile.wgsl): a threadgroup past tiles * splits exits as a whole.
    const uint tiles = ((p.m + TM - 1u) / TM) * p.tiles_n;
    const uint split = wg / tiles;
    const uint tile = wg - split * tiles;
    if (wg >= tiles * p.splits) {
        return;
    }
    const uint m0 = (tile / p.tiles_n) * TM;
    const uint n0 = (tile % p.tiles_n) * TN;
    // This simdgroup's 16 x 32 block of the tile.
    const uint sm = 16u * (sg / 2u);
    const uint sn = 32u * (sg % 2u);
    simdgroup_float8x8 acc[8];
    for (uint a = 0; a < 8u; ++a) {
        acc[a] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    // Weight staging: thread li fills columns 16hh .. 16hh + 15 of the slice, row n0 + wr.
    const uint wr = li / 2u;
    const uint hh = li % 2u;
    const uint wrow = n0 + wr;
    const uint wbase = min(wrow, p.n - 1u) * p.row_vec4s;
    const uint slices = (p.k4 + 7u) / 8u;
    const uint s_end = min(slices, (split + 1u) * p.sps);
    for (uint s = split * p.sps; s < s_end; ++s) {
        for (uint e = li; e < TM * 8u; e += THREADS) {
            const uint i = e / 8u;
            const uint c4 = e % 8u;
            float4 v = float4(0.0f);
            if (m0 + i < p.m && s * 8u + c4 < p.k4) {
                v = x[(m0 + i) * p.k4 + s * 8u + c4];
            }
            threadgroup half* d = xs + i * LDX + 4u * c4;
            d[0] = half(v.x);
            d[1] = half(v.y);
            d[2] = half(v.z);
            d[3] = half(v.w);
        }
        for (uint v4 = 0; v4 < 4u; ++v4) {
            const uint c4 = s * 8u + 4u * hh + v4;
            float4 w = float4(0.0f);
            if (wrow < p.n && c4 < p.k4) {
                w = w4(F(), wq, wbase, c4, p);
            }
            threadgroup half* d = ws + (16u * hh + 4u * v4) * LDW + wr;
            d[0] = half(w.x);
            d[LDW] = half(w.y);
            d[2u * LDW] = half(w.z);
            d[3u * LDW] = half(w.w);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < TK; kk += 8u) {
            simdgroup_half8x8 a0;
            simdgroup_half8x8 a1;
            simdgroup_half8x8 b[4];
            simdgroup_load(a0, xs + sm * LDX + kk, LDX);
            simdgroup_load(a1, xs + (sm + 8u) * LDX + kk, LDX);
            for (uint j = 0; j < 4u; ++j) {
                simdgroup_load(b[j], ws + kk * LDW + sn + 8u * j, LDW);
            }
            for (uint j = 0; j < 4u; ++j) {
                simdgroup_multiply_accumulate(acc[j], a0, b[j], acc[j]);
                simdgroup_multiply_accumulate(acc[4u + j], a1, b[j], acc[4u + j]);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint a = 0; a < 8u; ++a) {
        simdgroup_store(acc[a], cs + (sm + 8u * (a / 4u)) * TN + sn + 8u * (a % 4u), TN);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = li; e < TM * TN; e += THREADS) {
        const uint row = m0 + e / TN;
        const uint col = n0 + e % TN;
        if (row < p.m && col < p.n) {
            y[(split * p.m + row) * p.ldy + p.y_off + col] = cs[e];
        }
    }
}

kernel void mm_gemm_q4_k(constant MmParams& p [[buffer(0)]],
                         device const uint4* wq [[buffer(1)]],
                         device const float4* x [[buffer(2)]],
                         device float* y [[buffer(3)]],
                         uint3 tg [[threadgroup_position_in_grid]],
                         uint3 ntg [[threadgroups_per_grid]],
                         uint li [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half xs[TM * LDX];
    threadgroup half ws[TK * LDW];
    threadgroup float cs[TM * TN];
    gemm_body<Q4K>(p, wq, x, y, xs, ws, cs, tg.x + tg.y * ntg.x, li, sg);
}

kernel void mm_gemm_q6_k(constant MmParams& p [[buffer(0)]],
                         device const uint4* wq [[buffer(1)]],
                         device const float4* x [[buffer(2)]],
                         device float* y [[buffer(3)]],
                         uint3 tg [[threadgroup_position_in_grid]],
                         uint3 ntg [[threadgroups_per_grid]],
                         uint li [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half xs[TM * LDX];
    threadgroup half ws[TK * LDW];
    threadgroup float cs[TM * TN];
    gemm_body<Q6K>(p, wq, x, y, xs, ws, cs, tg.x + tg.y * ntg.x, li, sg);
}

kernel void mm_gemm_q8_0(constant MmParams& p [[buffer(0)]],
                         device const uint4* wq [[buffer(1)]],
                         device const float4* x [[buffer(2)]],
                         device float* y [[buffer(3)]],
                         uint3 tg [[threadgroup_position_in_grid]],
                         uint3 ntg [[threadgroups_per_grid]],
                         uint li [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half xs[TM * LDX];
    threadgroup half ws[TK * LDW];
    threadgroup float cs[TM * TN];
    gemm_body<Q80>(p, wq, x, y, xs, ws, cs, tg.x + tg.y * ntg.x, li, sg);
}
