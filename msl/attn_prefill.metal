// Fused RoPE + flash attention prefill, native tier (hand-written MSL for wgpu's passthrough path),
// on 8x8 simdgroup matrices: Q K^T and P V as simdgroup_half8x8 operands into simdgroup_float8x8
// accumulators (simdgroup_multiply_accumulate), one pass over the keys with an online softmax.
//
// WGSL twin (same plan, same Params, same bindings, same outputs): wgsl/attn_prefill_subgroup.wgsl
// + wgsl/attn_prefill_params.wgsl + wgsl/attn_prefill.wgsl, the Subgroup prefill with BQ = 32 on
// Metal (in SPIR-V twin mode the BQ <= 32 it takes on that adapter; its BK, RQ, RK, RO are
// internal to it). The twin computes in f32; this kernel rounds
// Q (rotated, times scale * log2 e), K (rotated), V and the probabilities P to half as the Matrix
// prefill does (wgsl/attn_prefill_matrix.wgsl), with f32 sums: the tests hold it to the Matrix
// prefill's error bound (MATRIX_TOL in src/kernels/attention/cases.rs).
//
// Semantics (the twin's): one threadgroup = one KV head hk x R rows, a row being a (query
// token t, query head of hk's GQA group) pair, row g = t * group + (head - hk * group), so each K/V
// tile in threadgroup memory serves the whole group. Query t sits at absolute position offset + t
// and, when causal, sees keys j <= offset + t (and j < kv_len); with a sliding window W
// (window > 0) only keys j > offset + t - W, the tiles before the block's first window skipped.
// Scores are soft-capped (softcap > 0) before masking. Q is rotated at offset + t; K is
// rotated at its position j unless it comes rotated (rotate_k = 0). Pairs: (2i, 2i + 1), or
// (i, i + D/2) where flags bit 0 is set; (a, b) becomes (a cos - b sin, b cos + a sin) with
// (cos, sin) = table[position * table_half + i]. Threadgroups: row blocks last to first (with a
// causal mask the last blocks see the most keys), each over all KV heads; a threadgroup past
// row_blocks * kv_heads (the grid may be rounded up to 2D) returns at once (uniformly).
// R = ceil(rows / row_blocks) <= BQ = 32 (rows = tokens * group): the host plans row_blocks =
// ceil(rows / BQ') for the twin's BQ' <= 32 (32 on Metal), so the blocks of R rows cover the rows
// exactly as the twin's do, though not always with the same boundaries.
//
// Plan: 128 threads = 4 simdgroups of 32; simdgroup s owns rows 8 s .. 8 s + 7 (rows past R are
// zero Q and are not written). Q is staged once
// (rotated, scaled, half) through threadgroup memory and kept as ND = D / 8 half matrices. Per tile
// of BK keys (32, or 16 at D = 256) the threadgroup stages K (rotated) and V as half into `kv`
// (rows padded to DS = D + 8 halves); each simdgroup then computes its 8 x BK scores S = Q K^T
// (K^T blocks by transposed loads) into its rows of `ss`, and its 32 lanes run the online softmax
// of its 8 rows (4 lanes per row, BK / 4 keys each, the row max combined with simd_shuffle_xor):
// m_new = max(m, tile max), alpha = exp2(m - m_new), P = exp2(S - m_new) (0 where masked) as half
// into `ps`, l = l alpha + sum P (f32, before rounding). When some row's alpha is not 1 after the
// first tile (simd_any: a simdgroup-uniform decision) the ND f32 accumulators are rescaled as
// diag(alpha) O by a float 8x8 product with the diagonal matrix in `dg`. Then O += P V. S, P and
// dg are private to the simdgroup: simdgroup barriers only; two threadgroup barriers per tile
// (tile staged; tile consumed). At the end each lane writes its row's O / l (through `ss`,
// bounds-checked rows).
//
// Sizes. The params carry no head_dim (the twin takes it as a pipeline override, which MSL
// passthrough cannot set): one entry point per head_dim, attn_prefill_d{64,128,256}; other head
// dims have no entry point and run the Subgroup plan (src/kernels/attention/prefill_native.rs).
// The pair layout and the K/V type come in `flags` (the twin's NEOX and KV_F16 overrides), and
// each entry point branches once, uniformly, to the body compiled for them. K and V are u32
// words: an f32 each, or two halves (even element low) for f16. Built for Apple's simdgroup width
// 32: a threadgroup that runs with another width writes NaN (loud, never silently wrong).
//
// Passthrough conventions (see src/native.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer, no arrayLength;
// threadgroup of WG = 128 threads; static threadgroup memory per kernel: 8704 halves of K/V tiles
// (Q staging before the loop), 1024 floats of S, 1024 halves of P, 256 floats of diagonals (24 KiB).
// Not yet run on Apple hardware: executed on the CPU through tests/metal_rt (tests/msl_exec.rs).
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   attn_prefill_d{64,128,256}: twin fnv1a64 2336a43e0bb69933

#include <metal_stdlib>
using namespace metal;

// The prefill Params (wgsl/attn_prefill_params.wgsl), field for field.
struct AttnPrefillParams {
    uint tokens;
    uint heads;
    uint kv_heads;
    uint group;       // heads / kv_heads
    uint kv_len;
    uint offset;
    uint causal;
    uint rotate_k;
    uint row_blocks;  // ceil(tokens * group / BQ)
    uint table_half;  // pairs per table row (= D / 2)
    float scale_log2; // softmax scale * log2(e)
    uint flags;       // bit 0: half-split pairs (NEOX); bit 1: f16 K/V (the twin's overrides)
    uint window;      // sliding window W: query at position P sees keys j > P - W; 0: unlimited
    float softcap;    // score soft-cap * log2(e); 0: off
    uint _p0;
    uint _p1;
};

// Threads per threadgroup and rows per threadgroup (the twin's WG and BQ).
constant constexpr uint WG = 128;
constant constexpr uint BQ = 32;
// Apple's simdgroup width; simdgroups per threadgroup.
constant constexpr uint SIMD_W = 32;
constant constexpr uint NSG = 4;
// Static threadgroup arrays: K and V tiles (the largest of 2 * BK * (D + 8) over the entry points),
// S (NSG x 8 x BK floats), P (NSG x 8 x BK halves), the diagonals (NSG x 8 x 8 floats).
constant constexpr uint KV_LEN = 8704;
constant constexpr uint SS_LEN = 1024;
constant constexpr uint PS_LEN = 1024;
constant constexpr uint DG_LEN = 256;

constant constexpr float NEG = -3.0e38f;

// First key visible to a query at absolute position pos (the twin's window_start).
static inline uint window_start(constant AttnPrefillParams& p, uint pos) {
    return p.window != 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
}

// The twin's softcap (wgsl/attn_softcap.wgsl): c * tanh(s / c) in the log2 domain, c = 0: off.
static inline float softcap(float s, float c) {
    return c > 0.0f ? c * precise::tanh(clamp(s / c, -15.0f, 15.0f)) : s;
}

// Keys per tile at head_dim D.
static constexpr uint tile_keys(uint d) {
    return d <= 128u ? 32u : 16u;
}

// Element e of K or V (u32 words: f32, or two halves with the even element low).
template <bool F16>
static inline float kv_elem(device const uint* src, uint e) {
    if (F16) {
        const half2 h = as_type<half2>(src[e >> 1u]);
        return float((e & 1u) != 0u ? h.y : h.x);
    }
    return as_type<float>(src[e]);
}

// The elements (ex, ey) of rotation pair i.
template <uint D, bool NEOX>
static inline void pair_at(uint i, thread uint& ex, thread uint& ey) {
    ex = NEOX ? i : 2u * i;
    ey = NEOX ? i + D / 2u : 2u * i + 1u;
}

// (a, b) rotated in place by (cos, sin) = cs.
static inline void rot(thread float& a, thread float& b, float2 cs) {
    const float x = a * cs.x - b * cs.y;
    const float y = b * cs.x + a * cs.y;
    a = x;
    b = y;
}

template <bool F16, uint D, bool NEOX>
static void prefill_body(constant AttnPrefillParams& p, device const float* q, device const uint* k, device const uint* v,
                         device const float2* table, device float* out, uint wg, uint li, uint sl, uint ss_w, uint sid,
                         threadgroup half* kv, threadgroup float* ss, threadgroup half* ps, threadgroup float* dg) {
    constexpr uint BK = tile_keys(D);
    constexpr uint DS = D + 8u;      // half row stride of the K / V tiles and the Q staging
    constexpr uint ND = D / 8u;      // column blocks of 8
    constexpr uint NB = BK / 8u;     // key blocks of 8 per tile
    constexpr uint HALF = D / 2u;
    constexpr uint VOFF = BK * DS;   // start of the V tile in kv
    constexpr uint JP = BK / 4u;     // keys per lane in the softmax (4 lanes per row)
    static_assert(D % 8u == 0u && 2u * BK * DS <= KV_LEN && BQ * DS <= KV_LEN, "K/V tiles");
    static_assert(NSG * 8u * BK <= SS_LEN && NSG * 8u * BK <= PS_LEN && NSG * 64u <= DG_LEN, "S, P, diagonals");
    static_assert(NSG * 8u == BQ && NSG * SIMD_W == WG, "simdgroups");

    if (wg >= p.row_blocks * p.kv_heads) {
        return;  // the whole threadgroup
    }
    const uint rbi = wg / p.kv_heads;
    const uint hk = wg - rbi * p.kv_heads;
    const uint rb = p.row_blocks - 1u - rbi;
    const uint rows = p.tokens * p.group;
    // R = ceil(rows / row_blocks) <= BQ rows per threadgroup (the plan's row blocks hold at most
    // BQ rows each, so R <= BQ and every block starts below rows; checked anyway).
    const uint per = min((rows + p.row_blocks - 1u) / p.row_blocks, BQ);
    const uint row0 = rb * per;
    if (row0 >= rows) {
        return;  // the whole threadgroup
    }
    const uint row_end = min(rows, row0 + per);
    const uint last_t = (row_end - 1u) / p.group;
    uint kend = p.kv_len;
    if (p.causal != 0u) {
        kend = min(kend, p.offset + last_t + 1u);
    }
    const uint kbeg = window_start(p, p.offset + row0 / p.group);  // the block's first visible key

    // Q rows row0 .. row0 + 31, rotated at offset + t and scaled, as half (zero past `rows`).
    for (uint idx = li; idx < BQ * HALF; idx += WG) {
        const uint r = idx / HALF;
        const uint i = idx - r * HALF;
        uint ex;
        uint ey;
        pair_at<D, NEOX>(i, ex, ey);
        const uint gr = row0 + r;
        float a = 0.0f;
        float b = 0.0f;
        if (gr < row_end) {
            const uint t = gr / p.group;
            const uint base = (t * p.heads + hk * p.group + (gr - t * p.group)) * D;
            a = q[base + ex];
            b = q[base + ey];
            rot(a, b, table[(p.offset + t) * p.table_half + i]);
            a *= p.scale_log2;
            b *= p.scale_log2;
        }
        kv[r * DS + ex] = half(a);
        kv[r * DS + ey] = half(b);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_half8x8 qm[ND];
    for (uint c = 0; c < ND; ++c) {
        simdgroup_load(qm[c], kv + 8u * sid * DS + 8u * c, DS);
    }
    simdgroup_float8x8 o[ND];
    for (uint c = 0; c < ND; ++c) {
        o[c] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // This lane's softmax row (rr of the simdgroup's 8) and share (keys cq * JP .. + JP - 1).
    const uint rr = sl / 4u;
    const uint cq = sl % 4u;
    const uint gr = row0 + 8u * sid + rr;
    const uint t_r = gr / p.group;
    uint lim = kend;  // keys < lim are visible to this row
    if (p.causal != 0u) {
        lim = min(kend, p.offset + t_r + 1u);
    }
    const uint lo = window_start(p, p.offset + t_r);  // and keys >= lo
    threadgroup float* s_rows = ss + 8u * BK * sid;
    threadgroup half* p_rows = ps + 8u * BK * sid;
    threadgroup float* diag = dg + 64u * sid;
    diag[2u * sl] = 0.0f;
    diag[2u * sl + 1u] = 0.0f;
    float m = NEG;   // the row's running max (log2 domain); NEG until it sees a key
    float l = 0.0f;  // this lane's share of the row's sum of P

    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        // K (rotated unless it comes rotated) and V tiles, half, zero past kend.
        for (uint idx = li; idx < BK * HALF; idx += WG) {
            const uint j = idx / HALF;
            const uint i = idx - j * HALF;
            const uint key = k0 + j;
            uint ex;
            uint ey;
            pair_at<D, NEOX>(i, ex, ey);
            float ka = 0.0f;
            float kb = 0.0f;
            float va = 0.0f;
            float vb = 0.0f;
            if (key < kend) {
                const uint base = (key * p.kv_heads + hk) * D;
                ka = kv_elem<F16>(k, base + ex);
                kb = kv_elem<F16>(k, base + ey);
                if (p.rotate_k != 0u) {
                    rot(ka, kb, table[key * p.table_half + i]);
                }
                va = kv_elem<F16>(v, base + 2u * i);
                vb = kv_elem<F16>(v, base + 2u * i + 1u);
            }
            kv[j * DS + ex] = half(ka);
            kv[j * DS + ey] = half(kb);
            kv[VOFF + j * DS + 2u * i] = half(va);
            kv[VOFF + j * DS + 2u * i + 1u] = half(vb);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // S (8 x BK, log2 domain, unmasked) = Q_s K^T; B(d, j) = K[8 n + j][8 c + d]: transposed loads.
        for (uint n = 0; n < NB; ++n) {
            simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
            for (uint c = 0; c < ND; ++c) {
                simdgroup_half8x8 kt;
                simdgroup_load(kt, kv + 8u * n * DS + 8u * c, DS, ulong2(0), true);
                simdgroup_multiply_accumulate(acc, qm[c], kt, acc);
            }
            simdgroup_store(acc, s_rows + 8u * n, BK);
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        // Online softmax of row rr over this lane's JP keys; the row max over its 4 lanes.
        float sv[JP];
        float mt = NEG;
        for (uint x = 0; x < JP; ++x) {
            const uint j = cq * JP + x;
            sv[x] = k0 + j < lim && k0 + j >= lo ? softcap(s_rows[rr * BK + j], p.softcap) : NEG;
            mt = max(mt, sv[x]);
        }
        mt = max(mt, simd_shuffle_xor(mt, 1));
        mt = max(mt, simd_shuffle_xor(mt, 2));
        const float m_new = max(m, mt);
        // m_new is NEG until the row's first visible key (keys before its window); alpha is 0
        // there (O and l are 0) and 1 while the max holds.
        const float alpha = m_new > NEG ? exp2(m - m_new) : 1.0f;
        float sum = 0.0f;
        for (uint x = 0; x < JP; ++x) {
            const uint j = cq * JP + x;
            const float pj = sv[x] > NEG ? exp2(sv[x] - m_new) : 0.0f;
            sum += pj;
            p_rows[rr * BK + j] = half(pj);
        }
        l = l * alpha + sum;
        m = m_new;
        if (cq == 0u) {
            diag[rr * 9u] = alpha;
        }
        const bool rescale = simd_any(k0 > kbeg && alpha != 1.0f);
        simdgroup_barrier(mem_flags::mem_threadgroup);
        if (rescale) {
            simdgroup_float8x8 dm;
            simdgroup_load(dm, diag, 8);
            for (uint c = 0; c < ND; ++c) {
                simdgroup_multiply(o[c], dm, o[c]);
            }
        }
        // O += P V.
        for (uint n = 0; n < NB; ++n) {
            simdgroup_half8x8 pm;
            simdgroup_load(pm, p_rows + 8u * n, BK);
            for (uint c = 0; c < ND; ++c) {
                simdgroup_half8x8 vm;
                simdgroup_load(vm, kv + VOFF + 8u * n * DS + 8u * c, DS);
                simdgroup_multiply_accumulate(o[c], pm, vm, o[c]);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    // l over the row's 4 lanes; O / l, 8 columns at a time through this simdgroup's rows of ss.
    l += simd_shuffle_xor(l, 1);
    l += simd_shuffle_xor(l, 2);
    float inv_l = 1.0f / l;
    if (ss_w != SIMD_W) {
        inv_l = as_type<float>(0x7fc00000u);
    }
    const uint out_base = (t_r * p.heads + hk * p.group + (gr - t_r * p.group)) * D;
    for (uint c = 0; c < ND; ++c) {
        simdgroup_store(o[c], s_rows, 8);
        simdgroup_barrier(mem_flags::mem_threadgroup);
        if (gr < row_end) {
            out[out_base + 8u * c + 2u * cq] = s_rows[rr * 8u + 2u * cq] * inv_l;
            out[out_base + 8u * c + 2u * cq + 1u] = s_rows[rr * 8u + 2u * cq + 1u] * inv_l;
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
}

kernel void attn_prefill_d64(constant AttnPrefillParams& p [[buffer(0)]], device const float* q [[buffer(1)]],
                             device const uint* k [[buffer(2)]], device const uint* v [[buffer(3)]],
                             device const float2* table [[buffer(4)]], device float* out [[buffer(5)]],
                             uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                             uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                             uint ss_w [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]]) {
    threadgroup half kv[KV_LEN];
    threadgroup float ss[SS_LEN];
    threadgroup half ps[PS_LEN];
    threadgroup float dg[DG_LEN];
    const uint wg = tg.x + tg.y * ntg.x;
    switch (p.flags & 3u) {
        case 0u:
            prefill_body<false, 64, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 1u:
            prefill_body<false, 64, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 2u:
            prefill_body<true, 64, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        default:
            prefill_body<true, 64, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
    }
}

kernel void attn_prefill_d128(constant AttnPrefillParams& p [[buffer(0)]], device const float* q [[buffer(1)]],
                              device const uint* k [[buffer(2)]], device const uint* v [[buffer(3)]],
                              device const float2* table [[buffer(4)]], device float* out [[buffer(5)]],
                              uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                              uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                              uint ss_w [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]]) {
    threadgroup half kv[KV_LEN];
    threadgroup float ss[SS_LEN];
    threadgroup half ps[PS_LEN];
    threadgroup float dg[DG_LEN];
    const uint wg = tg.x + tg.y * ntg.x;
    switch (p.flags & 3u) {
        case 0u:
            prefill_body<false, 128, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 1u:
            prefill_body<false, 128, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 2u:
            prefill_body<true, 128, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        default:
            prefill_body<true, 128, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
    }
}

kernel void attn_prefill_d256(constant AttnPrefillParams& p [[buffer(0)]], device const float* q [[buffer(1)]],
                              device const uint* k [[buffer(2)]], device const uint* v [[buffer(3)]],
                              device const float2* table [[buffer(4)]], device float* out [[buffer(5)]],
                              uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                              uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                              uint ss_w [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]]) {
    threadgroup half kv[KV_LEN];
    threadgroup float ss[SS_LEN];
    threadgroup half ps[PS_LEN];
    threadgroup float dg[DG_LEN];
    const uint wg = tg.x + tg.y * ntg.x;
    switch (p.flags & 3u) {
        case 0u:
            prefill_body<false, 256, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 1u:
            prefill_body<false, 256, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        case 2u:
            prefill_body<true, 256, false>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
        default:
            prefill_body<true, 256, true>(p, q, k, v, table, out, wg, li, sl, ss_w, sid, kv, ss, ps, dg);
            break;
    }
}
