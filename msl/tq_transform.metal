// TurboQuant transforms, native tier (hand-written MSL for wgpu's passthrough path):
//   tq_quantize    f32 vectors -> 4-bit codes + norm (prefill and decode append)
//   tq_dequantize  codes + norm -> f32 vectors
//   tq_merge       split-K partials -> attention output (after tq_attend)
// Twins: wgsl/tq_subgroup.wgsl + the generated codebook constants + wgsl/tq_transform.wgsl,
// entries quantize / dequantize / merge. Same algorithm, Params and bindings; see the
// WGSL for the layout. In short: a vector of d (power of two, 64..512) coordinates is held by a
// team of lanes = d / 8 threads, lane r holding coordinates 8r..8r+7 as two float4s; a
// threadgroup of 64 holds 64 / lanes vectors. The Walsh-Hadamard butterflies run on the 3 low
// bits of the coordinate index in registers, on the next `bits` bits by simd_shuffle_xor, and on
// the rest through threadgroup memory (ping-pong, one barrier per stage).
//
// Simdgroups (tq_begin): nothing assumes a simdgroup width or how threads map onto simdgroups.
// The lowest active lane of each simdgroup records its width (0 if the simdgroup is partial or
// its width is not a power of two) at sizes[simdgroup index]; after a barrier thread 0 folds ALL
// simdgroups' entries. Only if every simdgroup is full and all share one power-of-two width S is
// the logical index l = simdgroup index * S + lane (so the xor partner of l for a mask below S is
// in the same simdgroup, which simd_shuffle_xor reaches) and bits = log2 S; otherwise l = thread
// index and bits = 0, and every exchange goes through threadgroup memory. So it is right for any
// threadgroup / simdgroup shape (Apple GPUs run 32 wide: l = thread index, bits = 5).
//
// Codebook: TQ_CENTROIDS / TQ_B1..TQ_B7 are the f32 values src/kernels/turboquant/codebook.rs
// generates for the WGSL (tests/msl_bindings.rs checks they are equal, and the twin fingerprint
// below covers the generated snippet).
//
// Precision: wgpu's passthrough compiles with Metal's default fast math. As in the WGSL, the
// quantiser divides by and takes the square root of the norm, and merge calls exp; the Vulkan
// twins run under comparable precision rules (2.5 ulp division, 3 + 2|x| ulp exp). Not yet run
// on Apple hardware.
//
// Passthrough conventions (see src/native.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer, all sizes from the
// params; threadgroups of 64 threads, tq_merge 256 (the twins' @workgroup_size); threadgroup memory:
// tq_quantize / tq_dequantize 2 x 128 float4 + 128 float + 65 uint (4.8 KiB), tq_merge 256 float4 +
// 256 float2 (6 KiB).
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   tq_quantize, tq_dequantize, tq_merge: twin fnv1a64 26f8ec7409fa315a
// (The WGSL's quantize_kv, K and V in one dispatch, has no kernel here: the Native tier records
// two tq_quantize dispatches for it.)

#include <metal_stdlib>
using namespace metal;

struct TqTransformParams {
    uint d;
    uint lanes;     // d / 8
    uint vectors;   // vectors in this dispatch
    uint kv_heads;  // vectors per token (quantise / dequantise)
    uint capacity;  // cache slots per head
    uint pos0;      // logical position of the dispatch's first token
    uint src_off;   // offset of the first source vector in `src`, in float4s
    uint splits;    // merge: split-K partials per head
    uint row;       // merge: floats per partial row (d + 4: max, sum, 2 pad, d outputs)
    float _scale;   // unused
    uint k_wgs;     // quantize_kv (WGSL only; the Native tier quantises K and V in two dispatches)
    uint _p1;
};

constant constexpr uint WG = 64;
// Threads of tq_merge (its twin's @workgroup_size).
constant constexpr uint MERGE_WG = 256;
// One simdgroup-size entry per simdgroup (at most one per thread), then the result.
constant constexpr uint MAX_SIMDGROUPS = 64;

constant constexpr float TQ_CENTROIDS[16] = {
    -2.7325895f, -2.0690172f, -1.6180464f, -1.2562312f, -0.9423405f, -0.6567591f, -0.3880483f, -0.128395f,
    0.128395f, 0.3880483f, 0.6567591f, 0.9423405f, 1.2562312f, 1.6180464f, 2.0690172f, 2.7325895f,
};
constant constexpr float TQ_B1 = 0.25822166f;
constant constexpr float TQ_B2 = 0.5224037f;
constant constexpr float TQ_B3 = 0.7995498f;
constant constexpr float TQ_B4 = 1.0992858f;
constant constexpr float TQ_B5 = 1.4371388f;
constant constexpr float TQ_B6 = 1.8435318f;
constant constexpr float TQ_B7 = 2.4008033f;

struct TqLanes {
    uint wg;     // linear threadgroup index
    uint l;      // logical thread index (a bijection onto 0..WG)
    uint bits;   // low bits of l whose xor partners simd_shuffle_xor reaches (threadgroup-uniform)
};

struct Chunk {
    float4 a;  // coordinates 8r..8r+3
    float4 b;  // coordinates 8r+4..8r+7
    float s;
};

struct Lane {
    uint v;      // vector index in the dispatch (clamped to a valid one for loads)
    uint r;      // rank in the vector's team
    bool valid;  // v was not clamped
};

// Must run first, in every thread of the threadgroup (barriers).
static TqLanes tq_begin(uint3 tg, uint3 ntg, uint li, uint sl, uint ss, uint sid, uint nsg, threadgroup uint* sizes) {
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
        sizes[MAX_SIMDGROUPS] = (ok && popcount(all) == 1u) ? ctz(all) : 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    TqLanes t;
    t.wg = tg.x + tg.y * ntg.x;
    t.bits = sizes[MAX_SIMDGROUPS];
    t.l = t.bits > 0u ? sid * ss + sl : li;
    return t;
}

static inline Lane lane_of(constant TqTransformParams& p, TqLanes t) {
    const uint v = t.wg * (WG / p.lanes) + t.l / p.lanes;
    Lane ln;
    ln.v = min(v, p.vectors - 1u);
    ln.r = t.l % p.lanes;
    ln.valid = v < p.vectors;
    return ln;
}

static inline float4 fwht4(float4 x) {
    const float2 s = x.xy + x.zw;
    const float2 d = x.xy - x.zw;
    float4 y = float4(0.0f);
    y.x = s.x + s.y;
    y.y = s.x - s.y;
    y.z = d.x + d.y;
    y.w = d.x - d.y;
    return y;
}

static inline Chunk bfly(Chunk own, Chunk other, bool upper) {
    Chunk c;
    c.a = upper ? other.a - own.a : own.a + other.a;
    c.b = upper ? other.b - own.b : own.b + other.b;
    c.s = own.s + other.s;
    return c;
}

// Scalar shuffles: Metal rejects simdgroup functions on some vector types.
static inline float4 shx4(float4 v, uint m) {
    float4 r = v;
    r.x = simd_shuffle_xor(v.x, ushort(m));
    r.y = simd_shuffle_xor(v.y, ushort(m));
    r.z = simd_shuffle_xor(v.z, ushort(m));
    r.w = simd_shuffle_xor(v.w, ushort(m));
    return r;
}

// Unnormalised Walsh-Hadamard transform of the team's vector; `s` comes back summed over the team.
// Must be called by every thread of the threadgroup (barriers).
// xa, xb, xs: 2 * WG entries each (ping-pong halves).
static Chunk fwht(constant TqTransformParams& p, Chunk c0, TqLanes t, threadgroup float4* xa, threadgroup float4* xb,
                  threadgroup float* xs) {
    const float4 a = fwht4(c0.a);
    const float4 b = fwht4(c0.b);
    Chunk c;
    c.a = a + b;
    c.b = a - b;
    c.s = c0.s;
    const uint bits = ctz(p.lanes);
    const uint sb = min(t.bits, bits);
    for (uint j = 0; j < sb; ++j) {
        const uint m = 1u << j;
        Chunk o;
        o.a = shx4(c.a, m);
        o.b = shx4(c.b, m);
        o.s = simd_shuffle_xor(c.s, ushort(m));
        c = bfly(c, o, (t.l & m) != 0u);
    }
    uint buf = 0u;
    for (uint j = sb; j < bits; ++j) {
        const uint m = 1u << j;
        const uint i = buf + t.l;
        xa[i] = c.a;
        xb[i] = c.b;
        xs[i] = c.s;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint k = buf + (t.l ^ m);
        Chunk o;
        o.a = xa[k];
        o.b = xb[k];
        o.s = xs[k];
        c = bfly(c, o, (t.l & m) != 0u);
        buf = WG - buf;
    }
    return c;
}

static inline float4 negate_bits(float4 v, uint bits) {
    float4 r = v;
    r.x = (bits & 1u) != 0u ? -v.x : v.x;
    r.y = (bits & 2u) != 0u ? -v.y : v.y;
    r.z = (bits & 4u) != 0u ? -v.z : v.z;
    r.w = (bits & 8u) != 0u ? -v.w : v.w;
    return r;
}

// Negate the coordinates whose sign bit is set (coordinates 8r..8r+7 are bits 8(r%4).. of word r/4).
static inline Chunk apply_signs(device const uint* signs, Chunk c, uint r) {
    const uint bits = signs[r / 4u] >> (8u * (r % 4u));
    Chunk o;
    o.a = negate_bits(c.a, bits);
    o.b = negate_bits(c.b, bits >> 4u);
    o.s = c.s;
    return o;
}

// Nearest centroid: m = number of positive boundaries below |u|; codes are ordered by value
// (8 + m for u >= 0, 7 - m below).
static inline uint code1(float u) {
    const float a = abs(u);
    uint m = a > TQ_B1 ? 1u : 0u;
    m += a > TQ_B2 ? 1u : 0u;
    m += a > TQ_B3 ? 1u : 0u;
    m += a > TQ_B4 ? 1u : 0u;
    m += a > TQ_B5 ? 1u : 0u;
    m += a > TQ_B6 ? 1u : 0u;
    m += a > TQ_B7 ? 1u : 0u;
    return u >= 0.0f ? 8u + m : 7u - m;
}

// Codes of coordinates 8r..8r+7: code of coordinate 8r + k in bits 4k..4k+3.
static inline uint pack8(float4 a, float4 b) {
    return code1(a.x) | code1(a.y) << 4u | code1(a.z) << 8u | code1(a.w) << 12u | code1(b.x) << 16u | code1(b.y) << 20u |
           code1(b.z) << 24u | code1(b.w) << 28u;
}

static inline float4 unpack4(uint w) {
    float4 r = float4(0.0f);
    r.x = TQ_CENTROIDS[w & 15u];
    r.y = TQ_CENTROIDS[(w >> 4u) & 15u];
    r.z = TQ_CENTROIDS[(w >> 8u) & 15u];
    r.w = TQ_CENTROIDS[(w >> 12u) & 15u];
    return r;
}

// Cache vector (head * capacity + slot) of the lane's vector.
static inline uint cache_vector(constant TqTransformParams& p, uint v) {
    const uint token = v / p.kv_heads;
    const uint head = v % p.kv_heads;
    return head * p.capacity + (p.pos0 + token) % p.capacity;
}

kernel void tq_quantize(constant TqTransformParams& p [[buffer(0)]],
                        device const float4* src [[buffer(1)]],
                        device uint* codes [[buffer(2)]],
                        device float* norms [[buffer(3)]],
                        device const uint* signs [[buffer(4)]],
                        device float4* dst [[buffer(5)]],
                        uint3 tg [[threadgroup_position_in_grid]],
                        uint3 ntg [[threadgroups_per_grid]],
                        uint li [[thread_index_in_threadgroup]],
                        uint sl [[thread_index_in_simdgroup]],
                        uint ss [[threads_per_simdgroup]],
                        uint sid [[simdgroup_index_in_threadgroup]],
                        uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float4 xa[2 * WG];
    threadgroup float4 xb[2 * WG];
    threadgroup float xs[2 * WG];
    const TqLanes t = tq_begin(tg, ntg, li, sl, ss, sid, nsg, sizes);
    const Lane ln = lane_of(p, t);
    const uint i = p.src_off + (ln.v * p.d + ln.r * 8u) / 4u;
    Chunk c;
    c.a = src[i];
    c.b = src[i + 1u];
    c.s = 0.0f;
    c = apply_signs(signs, c, ln.r);
    c.s = dot(c.a, c.a) + dot(c.b, c.b);
    c = fwht(p, c, t, xa, xb, xs);
    // u = H D x / |x|: unit vector scaled to norm sqrt(d), coordinates ~ N(0, 1).
    const float norm = sqrt(c.s);
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    const uint word = pack8(c.a * inv, c.b * inv);
    if (ln.valid) {
        const uint cv = cache_vector(p, ln.v);
        codes[cv * p.lanes + ln.r] = word;
        if (ln.r == 0u) {
            norms[cv] = norm;
        }
    }
}

kernel void tq_dequantize(constant TqTransformParams& p [[buffer(0)]],
                          device const float4* src [[buffer(1)]],
                          device uint* codes [[buffer(2)]],
                          device float* norms [[buffer(3)]],
                          device const uint* signs [[buffer(4)]],
                          device float4* dst [[buffer(5)]],
                          uint3 tg [[threadgroup_position_in_grid]],
                          uint3 ntg [[threadgroups_per_grid]],
                          uint li [[thread_index_in_threadgroup]],
                          uint sl [[thread_index_in_simdgroup]],
                          uint ss [[threads_per_simdgroup]],
                          uint sid [[simdgroup_index_in_threadgroup]],
                          uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float4 xa[2 * WG];
    threadgroup float4 xb[2 * WG];
    threadgroup float xs[2 * WG];
    const TqLanes t = tq_begin(tg, ntg, li, sl, ss, sid, nsg, sizes);
    const Lane ln = lane_of(p, t);
    const uint cv = cache_vector(p, ln.v);
    const uint w = codes[cv * p.lanes + ln.r];
    Chunk c;
    c.a = unpack4(w & 0xffffu);
    c.b = unpack4(w >> 16u);
    c.s = 0.0f;
    c = fwht(p, c, t, xa, xb, xs);
    // x = D H (c * norm / sqrt(d)) / sqrt(d)
    const float f = norms[cv] / float(p.d);
    c.a = c.a * f;
    c.b = c.b * f;
    c = apply_signs(signs, c, ln.r);
    if (ln.valid) {
        const uint o = (ln.v * p.d + ln.r * 8u) / 4u;
        dst[o] = c.a;
        dst[o + 1u] = c.b;
    }
}

// One threadgroup of MERGE_WG per head; the partial rows (max, sum, 2 pad, d outputs, already in
// the original domain) are combined by log-sum-exp. Team `team` of d / 4 threads (thread c holding
// output float4 c) folds rows team, team + teams, .. with an online softmax, four rows loaded a
// step; team 0 then combines the teams' (m, l, o) through threadgroup memory.
kernel void tq_merge(constant TqTransformParams& p [[buffer(0)]],
                     device const float4* src [[buffer(1)]],
                     device uint* codes [[buffer(2)]],
                     device float* norms [[buffer(3)]],
                     device const uint* signs [[buffer(4)]],
                     device float4* dst [[buffer(5)]],
                     uint3 tg [[threadgroup_position_in_grid]],
                     uint3 ntg [[threadgroups_per_grid]],
                     uint li [[thread_index_in_threadgroup]]) {
    threadgroup float4 mo[MERGE_WG];
    threadgroup float2 mml[MERGE_WG];
    const uint h = tg.x + tg.y * ntg.x;
    if (h >= p.vectors) {
        return;  // whole threadgroup
    }
    const uint q4 = p.d / 4u;
    const uint teams = MERGE_WG / q4;
    const uint c = li % q4;
    const uint team = li / q4;
    const uint r4 = p.row / 4u;
    const uint rows = h * p.splits;
    float m = -3.0e38f;
    float l = 0.0f;
    float4 o = float4(0.0f);
    uint s = team;
    for (; s + 3u * teams < p.splits; s += 4u * teams) {
        const uint b0 = (rows + s) * r4;
        const uint b1 = b0 + teams * r4;
        const uint b2 = b1 + teams * r4;
        const uint b3 = b2 + teams * r4;
        const float4 a0 = src[b0];
        const float4 a1 = src[b1];
        const float4 a2 = src[b2];
        const float4 a3 = src[b3];
        const float4 o0 = src[b0 + 1u + c];
        const float4 o1 = src[b1 + 1u + c];
        const float4 o2 = src[b2 + 1u + c];
        const float4 o3 = src[b3 + 1u + c];
        const float mx = max(max(m, max(a0.x, a1.x)), max(a2.x, a3.x));
        const float f = exp(m - mx);
        const float e0 = exp(a0.x - mx);
        const float e1 = exp(a1.x - mx);
        const float e2 = exp(a2.x - mx);
        const float e3 = exp(a3.x - mx);
        l = l * f + a0.y * e0 + a1.y * e1 + a2.y * e2 + a3.y * e3;
        o = o * f + o0 * e0 + o1 * e1 + o2 * e2 + o3 * e3;
        m = mx;
    }
    for (; s < p.splits; s += teams) {
        const uint b0 = (rows + s) * r4;
        const float4 a0 = src[b0];
        const float mx = max(m, a0.x);
        const float f = exp(m - mx);
        const float e0 = exp(a0.x - mx);
        l = l * f + a0.y * e0;
        o = o * f + src[b0 + 1u + c] * e0;
        m = mx;
    }
    mo[li] = o;
    mml[li].x = m;
    mml[li].y = l;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (team == 0u) {
        float mt = mml[0].x;
        for (uint k = 1; k < teams; ++k) {
            mt = max(mt, mml[k * q4].x);
        }
        float lt = 0.0f;
        float4 ot = float4(0.0f);
        for (uint k = 0; k < teams; ++k) {
            const float2 ml = mml[k * q4 + c];
            const float e = exp(ml.x - mt);
            lt += ml.y * e;
            ot += mo[k * q4 + c] * e;
        }
        dst[h * q4 + c] = ot / lt;
    }
}
