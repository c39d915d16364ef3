// Split-K decode attention, partial pass, native tier (hand-written MSL for wgpu's passthrough
// path). Twin: wgsl/attn_decode_subgroup.wgsl (the Subgroup variant's teams kernel, entry main)
// with WG = 128, B = min(4, 32 / PPL), PF = false (no prefetch of the next step's loads: the
// Native plan never sets it) and L, GB as below. The passes around it stay WGSL for the
// Native variant: attn_append.wgsl (RoPE + KV write) before, attn_merge.wgsl (log-sum-exp merge of
// the partials) after; neither is a simdgroup path.
//
// Same algorithm, Params and bindings as the twin (see the WGSL for the derivation). In short: one
// threadgroup = one KV head x up to GB query heads of its GQA group x one chunk of keys; its 128
// threads form KG = 128 / L teams of L lanes. A K/V row is NP 16-byte pieces (8 f16 or 4 f32);
// lane `lane` owns pieces lane, lane + L, ... (PPL of them). Team `team` takes B keys per step
// (key t + b * KG + team), issues all their K and V loads first, dots each K piece with its q pieces
// (registers, pre-scaled by scale * log2 e), completes the dots over the team's lanes, runs its own
// online softmax (log2 domain) and accumulates P V into the O columns it owns. No barrier in the
// key loop on the shuffle path. At the end the teams are combined in threadgroup memory and the
// threadgroup writes one partial row per head (O not normalised, m, l) for attn_merge.wgsl.
//
// Sizes. The params carry no head_dim, GB, L or B (the twin takes them as pipeline overrides,
// which MSL passthrough cannot set), so:
//   * head_dim and the K/V element type are compile-time: one entry point per (type, head_dim),
//     attn_decode_{f32,f16}_d{64,80,96,128,256} (every row is whole 16-byte pieces). Other head
//     dims have no entry point: the Rust plan (decode_plan) runs them with the Subgroup variant.
//   * L = min(NP rounded up to a power of two, SIMD_W) with SIMD_W = 32, Apple's simdgroup width;
//     PPL = ceil(NP / L), B = min(4, 32 / PPL), GBX = min(8, 16 / PPL) (the twin's register bounds
//     B * PPL <= 32, GB * PPL <= 16). The Rust plan on Metal uses the same L and B (fixed, no
//     tuning knobs for Native) and WG = 128.
//   * GB (query heads per threadgroup) is derived at run time as ceil(group / gblocks); the Rust
//     plan picks GB as that fixed point (so gblocks = ceil(group / GB) and back agree) and checks
//     GB <= GBX, GB * head_dim <= TO_LEN and KG * GB <= TML_LEN (the static arrays below). Register
//     loops run to GBX with the heads past this block skipped by a threadgroup-uniform test, so
//     every register array index is a compile-time constant after unrolling.
//
// Simdgroups (lanes_begin): the team butterfly uses simd_shuffle_xor with masks 1 .. L / 2, right
// only if a team lies inside one simdgroup. The lowest active lane of each simdgroup records its
// width (0 if the simdgroup is partial or the width not a power of two) at sizes[simdgroup index];
// after a barrier thread 0 folds ALL entries: only if every simdgroup is full and all share one
// power-of-two width S >= L does the kernel take flat = simdgroup index * S + lane in simdgroup
// (teams = L consecutive flat indices, inside one simdgroup) and the shuffle path. Otherwise flat =
// thread index and every team sum goes through threadgroup memory (team_sum_tg: 8 values per round,
// 2 barriers per round; loop bounds are threadgroup-uniform). So it is right for any simdgroup
// width (Apple GPUs run 32: the shuffle path; a Mac2-family GPU of width 8 or 16 would take the
// threadgroup path for L > its width).
//
// Precision: f16 K/V are loaded as 16-byte uint4 pieces and converted half -> float (as_type to
// half2); all arithmetic is f32. wgpu's passthrough compiles with Metal's default fast math
// (exp2 as in the twin). Not yet run on Apple hardware.
//
// Passthrough conventions (see src/native.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer, no arrayLength;
// threadgroup of WG = 128 threads; static threadgroup memory per kernel: 129 uint + 128 float2 +
// 2048 float (9.5 KiB; `scratch` is the team-sum buffer in the key loop, then the combined O).
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   attn_decode_{f32,f16}_d{64,80,96,128,256}: twin fnv1a64 a9c4dbba6a99f9bf

#include <metal_stdlib>
using namespace metal;

struct AttnDecodeParams {
    uint kv_len;
    uint kv_heads;
    uint heads;
    uint group;       // heads / kv_heads
    uint chunk;       // keys per threadgroup
    uint nchunks;
    uint gblocks;     // ceil(group / GB)
    float scale_log2; // softmax scale * log2(e)
    uint key_lo;      // first key attended (sliding window); chunk c starts at key_lo + c * chunk
    float softcap;    // score soft-cap * log2(e); 0: off
    uint _p0;
    uint _p1;
};

// Threads per threadgroup (the twin's WG for the Native plan).
constant constexpr uint WG = 128;
// Team width bound: Apple's simdgroup width.
constant constexpr uint SIMD_W = 32;
// Most query heads per threadgroup; largest head_dim with an entry point.
constant constexpr uint GB_CAP = 8;
constant constexpr uint D_MAX = 256;
// Most teams (WG / smallest L = 128 / 8) times GB_CAP: team (m, l) slots.
constant constexpr uint TML_LEN = 128;
// Combined O (GB_CAP * D_MAX floats); also RCH * WG floats of team sums in the key loop.
constant constexpr uint TO_LEN = 2048;
constant constexpr uint RCH = 8;
// One entry per simdgroup (at most one per thread), then the result.
constant constexpr uint MAX_SIMDGROUPS = 128;

constant constexpr float NEG = -3.0e38f;

// The twin's softcap (wgsl/attn_softcap.wgsl): c * tanh(s / c) in the log2 domain, c = 0: off.
static inline float softcap(float s, float c) {
    return c > 0.0f ? c * precise::tanh(clamp(s / c, -15.0f, 15.0f)) : s;
}

static constexpr uint pow2_at_least(uint n) {
    uint p = 1u;
    while (p < n) {
        p <<= 1u;
    }
    return p;
}

// Must run first, in every thread of the threadgroup (barriers). True when teams of `lanes`
// consecutive flat = sid * ss + sl indices lie inside one simdgroup (see the header).
static bool lanes_begin(uint lanes, uint li, uint ss, uint sid, uint nsg, threadgroup uint* sizes) {
    const uint members = simd_sum(1u);
    if (simd_prefix_exclusive_sum(1u) == 0u) {
        sizes[sid] = (members == ss && popcount(ss) == 1u) ? ss : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (li == 0u) {
        bool ok = true;
        uint all = 0u;
        for (uint i = 0; i < nsg; ++i) {
            ok = ok && sizes[i] != 0u;
            all |= sizes[i];
        }
        sizes[MAX_SIMDGROUPS] = (ok && popcount(all) == 1u && all >= lanes) ? 1u : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return sizes[MAX_SIMDGROUPS] != 0u;
}

// Elements 0..3 and 4..7 of a 16-byte piece as f32 (f32 pieces: 4 elements, hi = 0).
template <bool F16>
static inline void widen(uint4 w, thread float4& lo, thread float4& hi) {
    if (F16) {
        const half2 a = as_type<half2>(w.x);
        const half2 b = as_type<half2>(w.y);
        const half2 c = as_type<half2>(w.z);
        const half2 d = as_type<half2>(w.w);
        lo.x = float(a.x);
        lo.y = float(a.y);
        lo.z = float(b.x);
        lo.w = float(b.y);
        hi.x = float(c.x);
        hi.y = float(c.y);
        hi.z = float(d.x);
        hi.w = float(d.y);
    } else {
        lo = as_type<float4>(w);
        hi = float4(0.0f);
    }
}

// Sum of s[0..N) over each team of L threads (flat = thread index), through threadgroup memory,
// RCH values per round. Every thread must call it (barriers); every lane of a team gets the same
// sums (same order).
template <uint N, uint L>
static inline void team_sum_tg(thread float* s, uint li, uint team, threadgroup float* red) {
    for (uint x0 = 0; x0 < N; x0 += RCH) {
        for (uint k = 0; k < RCH; ++k) {
            if (x0 + k < N) {
                red[k * WG + li] = s[x0 + k];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint k = 0; k < RCH; ++k) {
            if (x0 + k < N) {
                float acc = 0.0f;
                for (uint r = 0; r < L; ++r) {
                    acc += red[k * WG + team * L + r];
                }
                s[x0 + k] = acc;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

template <bool F16, uint D>
static void decode_teams(constant AttnDecodeParams& p, device const float* q_rot, device const uint4* k_cache,
                         device const uint4* v_cache, device float* part_o, device float2* part_ml, uint3 tg, uint3 ntg,
                         uint li, uint sl, uint ss, uint sid, uint nsg, threadgroup uint* sizes,
                         threadgroup float2* t_ml, threadgroup float* scratch) {
    constexpr uint WORDS = F16 ? D / 2u : D;  // u32 words per K/V row
    constexpr uint NP = WORDS / 4u;           // 16-byte pieces per row
    constexpr uint EP = F16 ? 8u : 4u;        // elements per piece
    constexpr uint L = pow2_at_least(NP) < SIMD_W ? pow2_at_least(NP) : SIMD_W;
    constexpr uint PPL = (NP + L - 1u) / L;
    constexpr uint KG = WG / L;
    constexpr uint B = 32u / PPL < 4u ? 32u / PPL : 4u;
    constexpr uint GBX = 16u / PPL < GB_CAP ? 16u / PPL : GB_CAP;
    static_assert(WORDS % 4u == 0u && D <= D_MAX, "rows must be whole 16-byte pieces");
    static_assert(PPL <= 8u && B * PPL <= 32u && GBX * PPL <= 16u, "register bounds of the twin");
    static_assert(KG * GBX <= TML_LEN && GBX * D <= TO_LEN && RCH * WG <= TO_LEN, "threadgroup arrays");

    const bool shuffle = lanes_begin(L, li, ss, sid, nsg, sizes);
    const uint wg_id = tg.x + tg.y * ntg.x;
    if (wg_id >= p.nchunks * p.gblocks * p.kv_heads) {
        return;  // whole threadgroup
    }
    // KV head fastest: threadgroups running together read neighbouring rows of the cache.
    const uint hk = wg_id % p.kv_heads;
    const uint rest = wg_id / p.kv_heads;
    const uint gb = rest % p.gblocks;
    const uint c = rest / p.gblocks;
    const uint GB = (p.group + p.gblocks - 1u) / p.gblocks;  // the plan's GB (host: <= GBX)
    const uint g0 = gb * GB;
    const uint gbn = min(GB, p.group - g0);  // heads in this block
    const uint h0 = hk * p.group + g0;       // first query head
    const uint key0 = p.key_lo + c * p.chunk;
    const uint key1 = min(p.kv_len, key0 + p.chunk);

    const uint flat = shuffle ? sid * ss + sl : li;
    const uint team = flat / L;
    const uint lane = flat % L;

    // q pieces of this lane: q[(g * PPL + i) * 2 + half], zero past the row or the block, pre-scaled.
    float4 q[GBX * PPL * 2u];
    for (uint g = 0; g < GBX; ++g) {
        for (uint i = 0; i < PPL; ++i) {
            const uint j = lane + i * L;
            float e8[8];
            for (uint e = 0; e < 8u; ++e) {
                float x = 0.0f;
                if (g < gbn && j < NP && e < EP) {
                    x = q_rot[(h0 + g) * D + j * EP + e] * p.scale_log2;
                }
                e8[e] = x;
            }
            float4 lo = float4(0.0f);
            float4 hi = float4(0.0f);
            lo.x = e8[0];
            lo.y = e8[1];
            lo.z = e8[2];
            lo.w = e8[3];
            hi.x = e8[4];
            hi.y = e8[5];
            hi.z = e8[6];
            hi.w = e8[7];
            q[(g * PPL + i) * 2u] = lo;
            q[(g * PPL + i) * 2u + 1u] = hi;
        }
    }
    float m_run[GBX];
    float l_run[GBX];
    float4 o[GBX * PPL * 2u];
    for (uint g = 0; g < GBX; ++g) {
        m_run[g] = NEG;
        l_run[g] = 0.0f;
    }
    for (uint i = 0; i < GBX * PPL * 2u; ++i) {
        o[i] = float4(0.0f);
    }

    for (uint t = key0; t < key1; t += KG * B) {
        // Every K and V load of the step first. Keys past the chunk load the last key (in bounds)
        // and are masked below; pieces past the row load the last piece and meet zero q / are
        // never stored.
        uint4 kp[B * PPL];
        uint4 vp[B * PPL];
        for (uint b = 0; b < B; ++b) {
            const uint key = min(t + b * KG + team, key1 - 1u);
            const uint row = (key * p.kv_heads + hk) * NP;  // in pieces
            for (uint i = 0; i < PPL; ++i) {
                const uint j = min(lane + i * L, NP - 1u);
                kp[b * PPL + i] = k_cache[row + j];
                vp[b * PPL + i] = v_cache[row + j];
            }
        }
        // Partial dots of this lane's pieces, then the sum over the team's lanes.
        float s[B * GBX];
        for (uint b = 0; b < B; ++b) {
            for (uint g = 0; g < GBX; ++g) {
                s[b * GBX + g] = 0.0f;
            }
            for (uint i = 0; i < PPL; ++i) {
                float4 klo;
                float4 khi;
                widen<F16>(kp[b * PPL + i], klo, khi);
                for (uint g = 0; g < GBX; ++g) {
                    if (g < gbn) {
                        float a = dot(q[(g * PPL + i) * 2u], klo);
                        if (F16) {
                            a += dot(q[(g * PPL + i) * 2u + 1u], khi);
                        }
                        s[b * GBX + g] += a;
                    }
                }
            }
        }
        if (shuffle) {
            for (uint mask = 1u; mask < L; mask <<= 1u) {
                for (uint x = 0; x < B * GBX; ++x) {
                    if (x % GBX < gbn) {
                        s[x] += simd_shuffle_xor(s[x], ushort(mask));
                    }
                }
            }
        } else {
            team_sum_tg<B * GBX, L>(s, li, team, scratch);
        }
        for (uint x = 0; x < B * GBX; ++x) {
            s[x] = softcap(s[x], p.softcap);
        }
        // Online softmax per head: one rescale per step; s becomes p.
        for (uint g = 0; g < GBX; ++g) {
            if (g < gbn) {
                float mx = m_run[g];
                for (uint b = 0; b < B; ++b) {
                    if (t + b * KG + team < key1) {
                        mx = max(mx, s[b * GBX + g]);
                    }
                }
                const float alpha = exp2(m_run[g] - mx);
                m_run[g] = mx;
                float sum = 0.0f;
                for (uint b = 0; b < B; ++b) {
                    const float pb = t + b * KG + team < key1 ? exp2(s[b * GBX + g] - mx) : 0.0f;
                    s[b * GBX + g] = pb;
                    sum += pb;
                }
                l_run[g] = l_run[g] * alpha + sum;
                for (uint i = 0; i < 2u * PPL; ++i) {
                    o[g * 2u * PPL + i] *= alpha;
                }
            }
        }
        // O += P V.
        for (uint b = 0; b < B; ++b) {
            for (uint i = 0; i < PPL; ++i) {
                float4 vlo;
                float4 vhi;
                widen<F16>(vp[b * PPL + i], vlo, vhi);
                for (uint g = 0; g < GBX; ++g) {
                    if (g < gbn) {
                        const float pb = s[b * GBX + g];
                        o[(g * PPL + i) * 2u] += pb * vlo;
                        if (F16) {
                            o[(g * PPL + i) * 2u + 1u] += pb * vhi;
                        }
                    }
                }
            }
        }
    }

    // Combine the teams: M = max m, L = sum l 2^(m - M), O = sum O 2^(m - M). The barrier below
    // also ends every use of `scratch` as team-sum memory.
    if (lane == 0u) {
        for (uint g = 0; g < GBX; ++g) {
            if (g < gbn) {
                float2 ml = float2(0.0f);
                ml.x = m_run[g];
                ml.y = l_run[g];
                t_ml[team * GBX + g] = ml;
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float w_own[GBX];
    for (uint g = 0; g < GBX; ++g) {
        float mx = NEG;
        if (g < gbn) {
            for (uint r = 0; r < KG; ++r) {
                mx = max(mx, t_ml[r * GBX + g].x);
            }
        }
        w_own[g] = exp2(m_run[g] - mx);
    }
    // Teams add their weighted O in turn (KG barriers, once per threadgroup).
    for (uint r = 0; r < KG; ++r) {
        if (team == r) {
            for (uint g = 0; g < GBX; ++g) {
                if (g < gbn) {
                    for (uint i = 0; i < PPL; ++i) {
                        const uint j = lane + i * L;
                        if (j < NP) {
                            for (uint e = 0; e < EP; ++e) {
                                const uint idx = g * D + j * EP + e;
                                const float x = w_own[g] * o[(g * PPL + i) * 2u + e / 4u][e % 4u];
                                scratch[idx] = r == 0u ? x : scratch[idx] + x;
                            }
                        }
                    }
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint idx = li; idx < gbn * D; idx += WG) {
        const uint g = idx / D;
        part_o[((h0 + g) * p.nchunks + c) * D + (idx - g * D)] = scratch[idx];
    }
    if (li < gbn) {
        float mx = NEG;
        for (uint r = 0; r < KG; ++r) {
            mx = max(mx, t_ml[r * GBX + li].x);
        }
        float l = 0.0f;
        for (uint r = 0; r < KG; ++r) {
            const float2 ml = t_ml[r * GBX + li];
            l += ml.y * exp2(ml.x - mx);
        }
        float2 ml = float2(0.0f);
        ml.x = mx;
        ml.y = l;
        part_ml[(h0 + li) * p.nchunks + c] = ml;
    }
}

// Entry points: one per (K/V element type, head_dim). Same signature each.

kernel void attn_decode_f32_d64(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<false, 64>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f32_d80(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<false, 80>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f32_d96(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<false, 96>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f32_d128(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                 device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                 device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                 uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                 uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                 uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                 uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<false, 128>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f32_d256(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                 device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                 device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                 uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                 uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                 uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                 uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<false, 256>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f16_d64(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<true, 64>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f16_d80(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<true, 80>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f16_d96(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<true, 96>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f16_d128(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                 device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                 device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                 uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                 uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                 uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                 uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<true, 128>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}

kernel void attn_decode_f16_d256(constant AttnDecodeParams& p [[buffer(0)]], device const float* q_rot [[buffer(1)]],
                                 device const uint4* k_cache [[buffer(2)]], device const uint4* v_cache [[buffer(3)]],
                                 device float* part_o [[buffer(4)]], device float2* part_ml [[buffer(5)]],
                                 uint3 tg [[threadgroup_position_in_grid]], uint3 ntg [[threadgroups_per_grid]],
                                 uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],
                                 uint ss [[threads_per_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                                 uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float2 t_ml[TML_LEN];
    threadgroup float scratch[TO_LEN];
    decode_teams<true, 256>(p, q_rot, k_cache, v_cache, part_o, part_ml, tg, ntg, li, sl, ss, sid, nsg, sizes, t_ml, scratch);
}
