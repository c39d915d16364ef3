// TurboQuant decode attention, split-K pass, native tier (hand-written MSL for wgpu's passthrough
// path): tq_attend. Twin: wgsl/tq_subgroup.wgsl + the generated codebook constants +
// wgsl/tq_attention.wgsl, entry attend. The passes around it (rotate the query, merge the
// partials and rotate back) are tq_rotate / tq_merge in msl/tq_transform.metal.
//
// Same algorithm, Params and bindings as the twin (see the WGSL for the derivation): one
// threadgroup of 128 per (kv head, quad of up to 4 query heads sharing it, split of up to 512
// visible logical positions, slot = position % capacity). The quad's 4 queries sit side by side in
// a float4 per coordinate, so every code is decoded once for all of them.
//   K phase: one thread per pair of keys (sharing each q' load), q' and the 16 centroids in
//            threadgroup memory; scores kept in threadgroup memory.
//   softmax: max over the split, p = exp(s - max), sum; p pre-multiplied by the V norm.
//   V phase: thread (w, stripe) owns code word w (8 coordinates) and every stripe-th key (four
//            keys a step); the stripes are summed in threadgroup memory at the end, two
//            coordinates a round.
// Output row per (head, split): [max, sum, -, -, o'[d]] (unnormalised; the pad is not written).
//
// Reductions (tq_reduce4): simd_max / simd_sum of scalars (Metal rejects simdgroup reductions on
// some vector types), the lowest active lane of each simdgroup stores its partial at
// red[simdgroup index], and after a barrier every thread folds ALL simdgroups' partials in index
// order. Right for any simdgroup width and for partial simdgroups. tq_begin is the same as in
// msl/tq_transform.metal (this kernel needs only the linear threadgroup index from it, but runs
// it as the twin does).
//
// Codebook: TQ_CENTROIDS as in msl/tq_transform.metal (checked equal to codebook.rs by
// tests/msl_bindings.rs). Fast math (wgpu's default): exp as in the twin. Not yet run on Apple
// hardware.
//
// Passthrough conventions (see src/native.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup of 128
// threads; threadgroup memory: 512 + 512 + 128 float4, 129 uint, 16 float (18.6 KiB).
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   tq_attend: twin fnv1a64 ccd6d95d49bbda58

#include <metal_stdlib>
using namespace metal;

struct TqAttendParams {
    uint kv_heads;
    uint heads;
    uint d;
    uint capacity;
    uint lo;         // first visible logical position
    uint count;      // visible positions
    uint split_len;  // positions per split, <= SPLIT_MAX
    uint splits;
    uint group;      // query heads per kv head
    uint quads;      // ceil(group / 4)
    float kscale;    // softmax scale / sqrt(d)
    float vscale;    // 1 / sqrt(d)
    uint row;        // floats per partial row (d + 4)
    uint _p0;
    uint _p1;
    uint _p2;
};

constant constexpr uint ATT_WG = 128;
constant constexpr uint SPLIT_MAX = 512;
constant constexpr uint MAX_DIM = 512;
// One entry per simdgroup (at most one per thread).
constant constexpr uint MAX_SIMDGROUPS = 128;

constant constexpr float TQ_CENTROIDS[16] = {
    -2.7325895f, -2.0690172f, -1.6180464f, -1.2562312f, -0.9423405f, -0.6567591f, -0.3880483f, -0.128395f,
    0.128395f, 0.3880483f, 0.6567591f, 0.9423405f, 1.2562312f, 1.6180464f, 2.0690172f, 2.7325895f,
};

struct TqLanes {
    uint wg;     // linear threadgroup index
    uint sid;    // simdgroup index
    uint nsg;    // simdgroups in the threadgroup
    bool first;  // lowest active lane of its simdgroup
};

// Must run first, in every thread of the threadgroup (barriers). As in msl/tq_transform.metal;
// the logical index it derives there is not used here, only the simdgroup facts.
static TqLanes tq_begin(uint3 tg, uint3 ntg, uint li, uint ss, uint sid, uint nsg, threadgroup uint* sizes) {
    const uint members = simd_sum(1u);
    const bool first = simd_prefix_exclusive_sum(1u) == 0u;
    if (first) {
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
    t.sid = sid;
    t.nsg = nsg;
    t.first = first;
    return t;
}

// Max or sum of a float4 over the threadgroup; every thread gets it. Every thread must call it.
static float4 tq_reduce4(float4 v, TqLanes t, bool is_max, threadgroup float4* red) {
    float4 r = v;
    if (is_max) {
        r.x = simd_max(v.x);
        r.y = simd_max(v.y);
        r.z = simd_max(v.z);
        r.w = simd_max(v.w);
    } else {
        r.x = simd_sum(v.x);
        r.y = simd_sum(v.y);
        r.z = simd_sum(v.z);
        r.w = simd_sum(v.w);
    }
    if (t.first) {
        red[t.sid] = r;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float4 acc = red[0];
    for (uint i = 1; i < t.nsg; ++i) {
        const float4 b = red[i];
        acc = is_max ? max(acc, b) : acc + b;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return acc;
}

// Scores of two keys (float4 over the quad's heads) from their code vectors cv and cv2: every q'
// load from threadgroup memory serves both.
static inline void key_dots(constant TqAttendParams& p, device const uint4* kcodes, threadgroup const float4* qv,
                            threadgroup const float* lut, uint cv, uint cv2, thread float4& a, thread float4& a2) {
    const uint w4 = p.d / 32u;
    a = float4(0.0f);
    a2 = float4(0.0f);
    for (uint c = 0; c < w4; ++c) {
        const uint4 w = kcodes[cv * w4 + c];
        const uint4 w2 = kcodes[cv2 * w4 + c];
        for (uint e = 0; e < 4u; ++e) {
            const uint x = w[e];
            const uint y = w2[e];
            const uint i0 = c * 32u + e * 8u;
            for (uint k = 0; k < 8u; ++k) {
                const float4 q = qv[i0 + k];
                a += lut[(x >> (4u * k)) & 15u] * q;
                a2 += lut[(y >> (4u * k)) & 15u] * q;
            }
        }
    }
}

// Cache vector of the split's position j (j < count <= capacity): the slots run on from `first`
// (slot of the split's first position) and wrap at most once.
static inline uint slot(constant TqAttendParams& p, uint head, uint first, uint j) {
    const uint s = first + j;
    return head + (s >= p.capacity ? s - p.capacity : s);
}

kernel void tq_attend(constant TqAttendParams& p [[buffer(0)]],
                      device const float* qrot [[buffer(1)]],
                      device const uint4* kcodes [[buffer(2)]],
                      device const float* knorms [[buffer(3)]],
                      device const uint* vcodes [[buffer(4)]],
                      device const float* vnorms [[buffer(5)]],
                      device float* partial [[buffer(6)]],
                      uint3 tg [[threadgroup_position_in_grid]],
                      uint3 ntg [[threadgroups_per_grid]],
                      uint li [[thread_index_in_threadgroup]],
                      uint ss [[threads_per_simdgroup]],
                      uint sid [[simdgroup_index_in_threadgroup]],
                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup uint sizes[MAX_SIMDGROUPS + 1];
    threadgroup float4 red[MAX_SIMDGROUPS];
    threadgroup float4 qv[MAX_DIM];
    threadgroup float4 sc[SPLIT_MAX];
    threadgroup float lut[16];
    const TqLanes t = tq_begin(tg, ntg, li, ss, sid, nsg, sizes);
    const uint wg = t.wg;
    if (wg >= p.kv_heads * p.quads * p.splits) {
        return;  // whole threadgroup
    }
    const uint split = wg % p.splits;
    const uint kvh = wg / p.splits / p.quads;
    const uint quad = (wg / p.splits) % p.quads;
    const uint h0 = kvh * p.group + quad * 4u;
    const uint nh = min(4u, p.group - quad * 4u);

    if (li < 16u) {
        lut[li] = TQ_CENTROIDS[li];
    }
    for (uint i = li; i < p.d; i += ATT_WG) {
        float4 v = float4(0.0f);
        for (uint g = 0; g < nh; ++g) {
            v[g] = qrot[(h0 + g) * p.d + i];
        }
        qv[i] = v;
    }
    const uint t0 = split * p.split_len;
    const uint n = min(p.split_len, p.count - t0);
    const uint head = kvh * p.capacity;
    const uint first = (p.lo + t0) % p.capacity;
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // K phase: thread li scores keys j = li and j + h (h = ceil(n / 2)).
    const uint h = (n + 1u) / 2u;
    float4 mloc = float4(-3.0e38f);
    for (uint j = li; j < h; j += ATT_WG) {
        const uint j2 = j + h;
        const bool has2 = j2 < n;
        const uint cv = slot(p, head, first, j);
        const uint cv2 = has2 ? slot(p, head, first, j2) : cv;
        float4 a = float4(0.0f);
        float4 a2 = float4(0.0f);
        key_dots(p, kcodes, qv, lut, cv, cv2, a, a2);
        const float4 s = a * (p.kscale * knorms[cv]);
        sc[j] = s;
        mloc = max(mloc, s);
        if (has2) {
            const float4 s2 = a2 * (p.kscale * knorms[cv2]);
            sc[j2] = s2;
            mloc = max(mloc, s2);
        }
    }
    const float4 m = tq_reduce4(mloc, t, true, red);

    // Softmax weights (the reduction's barriers make sc visible).
    float4 lloc = float4(0.0f);
    for (uint j = li; j < n; j += ATT_WG) {
        const float4 e = exp(sc[j] - m);
        lloc += e;
        sc[j] = e * (p.vscale * vnorms[slot(p, head, first, j)]);
    }
    const float4 l = tq_reduce4(lloc, t, false, red);

    // V phase: four keys per step (four code loads in flight).
    const uint words = p.d / 8u;
    const uint stripes = ATT_WG / words;
    const uint w = li % words;
    float4 acc[8];
    for (uint k = 0; k < 8u; ++k) {
        acc[k] = float4(0.0f);
    }
    uint j = li / words;
    for (; j + 3u * stripes < n; j += 4u * stripes) {
        uint wd[4];
        float4 pj[4];
        for (uint u = 0; u < 4u; ++u) {
            wd[u] = vcodes[slot(p, head, first, j + u * stripes) * words + w];
        }
        for (uint u = 0; u < 4u; ++u) {
            pj[u] = sc[j + u * stripes];
        }
        for (uint u = 0; u < 4u; ++u) {
            for (uint k = 0; k < 8u; ++k) {
                acc[k] += lut[(wd[u] >> (4u * k)) & 15u] * pj[u];
            }
        }
    }
    for (; j < n; j += stripes) {
        const uint w0 = vcodes[slot(p, head, first, j) * words + w];
        const float4 p0 = sc[j];
        for (uint k = 0; k < 8u; ++k) {
            acc[k] += lut[(w0 >> (4u * k)) & 15u] * p0;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Two coordinates a round: thread li's at sc[li] and sc[ATT_WG + li].
    for (uint k = 0; k < 8u; k += 2u) {
        sc[li] = acc[k];
        sc[ATT_WG + li] = acc[k + 1u];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (li < words) {
            float4 o = float4(0.0f);
            float4 o2 = float4(0.0f);
            for (uint s = 0; s < stripes; ++s) {
                o += sc[s * words + li];
                o2 += sc[ATT_WG + s * words + li];
            }
            for (uint g = 0; g < nh; ++g) {
                const uint r = ((h0 + g) * p.splits + split) * p.row + 4u + 8u * li + k;
                partial[r] = o[g];
                partial[r + 1u] = o2[g];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (li < nh) {
        const uint r = ((h0 + li) * p.splits + split) * p.row;
        partial[r] = m[li];
        partial[r + 1u] = l[li];
    }
}
