// TurboQuant decode attention, split-K pass, native tier (hand-written MSL for wgpu's passthrough
// path): tq_attend. Twin: wgsl/tq_subgroup.wgsl + the generated codebook constants +
// wgsl/tq_attention.wgsl, entry attend. The pass after it (merge the partials) is tq_merge in
// msl/tq_transform.metal.
//
// Same algorithm, Params and bindings as the twin (see the WGSL for the derivation): one
// threadgroup of 128 per (kv head, quad of up to 4 query heads sharing it, split of up to 512
// visible logical positions, slot = position % capacity). The quad's 4 queries sit side by side in
// a float4 per coordinate, so every code is decoded once for all of them.
//   rotate:  q with K's signs into sh[0..d], Walsh-Hadamard transformed in place (wht).
//   K phase: one thread per pair of keys (sharing each q' load), q' and the 16 centroids in
//            threadgroup memory; scores kept in threadgroup memory (sh[512..]), the V norms
//            fetched alongside the K codes.
//   softmax: max over the split, p = exp(s - max), sum; p pre-multiplied by the V norm.
//   V phase: thread (w, stripe) owns code word w (8 coordinates) and every stripe-th key, four
//            keys a step, the next step's four words loaded before this step's arithmetic (the
//            first four before the softmax).
//   output:  the stripes summed in threadgroup memory, transformed back (wht), V's signs.
// Output row per (head, split): [max, sum, -, -, o[d]] (unnormalised, original domain; the pad is
// not written).
//
// Reductions (tq_reduce4): simd_max / simd_sum of scalars (Metal rejects simdgroup reductions on
// some vector types), the lowest active lane of each simdgroup stores its partial at
// red[simdgroup index], and after a barrier every thread folds ALL simdgroups' partials in index
// order. Right for any simdgroup width and for partial simdgroups (tq_lanes, the twin's, checks
// nothing about the simdgroup shape).
//
// Codebook: TQ_CENTROIDS as in msl/tq_transform.metal (checked equal to codebook.rs by
// tests/msl_bindings.rs). Fast math (wgpu's default): exp as in the twin. Not yet run on Apple
// hardware.
//
// Passthrough conventions (see src/native.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup of 128
// threads; threadgroup memory: 1024 + 128 float4, 512 + 16 float (20.1 KiB).
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   tq_attend: twin fnv1a64 5365b8e9b4b954a5

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
    float kscale;    // softmax scale / d
    float vscale;    // 1 / d
    uint row;        // floats per partial row (d + 4)
    uint _p0;
    uint _p1;
    uint _p2;
};

constant constexpr uint ATT_WG = 128;
constant constexpr uint SPLIT_MAX = 512;
// Scores and softmax weights live at sh[SC + j].
constant constexpr uint SC = 512;
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

// The twin's tq_lanes: the simdgroup facts tq_reduce4 needs (no check of the simdgroup shape).
static TqLanes tq_lanes(uint3 tg, uint3 ntg, uint sid, uint nsg) {
    TqLanes t;
    t.wg = tg.x + tg.y * ntg.x;
    t.sid = sid;
    t.nsg = nsg;
    t.first = simd_prefix_exclusive_sum(1u) == 0u;
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

static inline bool sign_bit(device const uint* signs, uint i) {
    return ((signs[i / 32u] >> (i % 32u)) & 1u) != 0u;
}

// Unnormalised Walsh-Hadamard transform of sh[0..d] (each float4 lane a separate vector): the
// three low index bits in registers (8 consecutive coordinates per thread), the others in place
// in threadgroup memory, one barrier per bit. Every thread must call it; it begins and ends with a
// barrier.
static void wht(constant TqAttendParams& p, threadgroup float4* sh, uint li) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (li < p.d / 8u) {
        const uint b = li * 8u;
        const float4 x0 = sh[b] + sh[b + 1u];
        const float4 x1 = sh[b] - sh[b + 1u];
        const float4 x2 = sh[b + 2u] + sh[b + 3u];
        const float4 x3 = sh[b + 2u] - sh[b + 3u];
        const float4 x4 = sh[b + 4u] + sh[b + 5u];
        const float4 x5 = sh[b + 4u] - sh[b + 5u];
        const float4 x6 = sh[b + 6u] + sh[b + 7u];
        const float4 x7 = sh[b + 6u] - sh[b + 7u];
        const float4 y0 = x0 + x2;
        const float4 y1 = x1 + x3;
        const float4 y2 = x0 - x2;
        const float4 y3 = x1 - x3;
        const float4 y4 = x4 + x6;
        const float4 y5 = x5 + x7;
        const float4 y6 = x4 - x6;
        const float4 y7 = x5 - x7;
        sh[b] = y0 + y4;
        sh[b + 1u] = y1 + y5;
        sh[b + 2u] = y2 + y6;
        sh[b + 3u] = y3 + y7;
        sh[b + 4u] = y0 - y4;
        sh[b + 5u] = y1 - y5;
        sh[b + 6u] = y2 - y6;
        sh[b + 7u] = y3 - y7;
    }
    for (uint m = 8u; m < p.d; m <<= 1u) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint t = li; t < p.d / 2u; t += ATT_WG) {
            const uint lo = t & (m - 1u);
            const uint i = ((t - lo) << 1u) | lo;
            const float4 a = sh[i];
            const float4 b = sh[i + m];
            sh[i] = a + b;
            sh[i + m] = a - b;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
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

// The V phase's keys of one thread: j = s0 + st * k for k = 0, 1, .. while j < n.
struct VKeys {
    uint head;
    uint first;
    uint n;
    uint s0;
    uint st;
    uint words;
    uint w;
};

// Code word of the thread's k-th key (past the split's end: its last key, weight 0).
static inline uint v_word(constant TqAttendParams& p, device const uint* vcodes, VKeys v, uint k) {
    const uint j = min(v.s0 + v.st * k, v.n - 1u);
    return vcodes[slot(p, v.head, v.first, j) * v.words + v.w];
}

static inline float4 v_weight(threadgroup const float4* sh, VKeys v, uint k) {
    const uint j = v.s0 + v.st * k;
    return j < v.n ? sh[SC + min(j, SPLIT_MAX - 1u)] : float4(0.0f);
}

static inline void v_fold(thread float4* acc, threadgroup const float* lut, uint word, float4 pj) {
    for (uint k = 0; k < 8u; ++k) {
        acc[k] += lut[(word >> (4u * k)) & 15u] * pj;
    }
}

kernel void tq_attend(constant TqAttendParams& p [[buffer(0)]],
                      device const float* q [[buffer(1)]],
                      device const uint4* kcodes [[buffer(2)]],
                      device const float* knorms [[buffer(3)]],
                      device const uint* vcodes [[buffer(4)]],
                      device const float* vnorms [[buffer(5)]],
                      device float* partial [[buffer(6)]],
                      device const uint* ksigns [[buffer(7)]],
                      device const uint* vsigns [[buffer(8)]],
                      uint3 tg [[threadgroup_position_in_grid]],
                      uint3 ntg [[threadgroups_per_grid]],
                      uint li [[thread_index_in_threadgroup]],
                      uint sid [[simdgroup_index_in_threadgroup]],
                      uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float4 red[MAX_SIMDGROUPS];
    threadgroup float4 sh[1024];
    threadgroup float vn[SPLIT_MAX];
    threadgroup float lut[16];
    const TqLanes t = tq_lanes(tg, ntg, sid, nsg);
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
            v[g] = q[(h0 + g) * p.d + i];
        }
        sh[i] = sign_bit(ksigns, i) ? -v : v;
    }
    const uint t0 = split * p.split_len;
    const uint n = min(p.split_len, p.count - t0);
    const uint head = kvh * p.capacity;
    const uint first = (p.lo + t0) % p.capacity;
    wht(p, sh, li);  // sh[0..d] = H D_K q (the 1 / sqrt(d) is in kscale)

    // K phase: thread li scores keys j = li and j + h (h = ceil(n / 2)).
    const uint h = (n + 1u) / 2u;
    float4 mloc = float4(-3.0e38f);
    for (uint j = li; j < h; j += ATT_WG) {
        const uint j2 = j + h;
        const bool has2 = j2 < n;
        const uint cv = slot(p, head, first, j);
        const uint cv2 = has2 ? slot(p, head, first, j2) : cv;
        vn[j] = p.vscale * vnorms[cv];
        const float vn2 = p.vscale * vnorms[cv2];
        float4 a = float4(0.0f);
        float4 a2 = float4(0.0f);
        key_dots(p, kcodes, sh, lut, cv, cv2, a, a2);
        const float4 s = a * (p.kscale * knorms[cv]);
        sh[SC + j] = s;
        mloc = max(mloc, s);
        if (has2) {
            vn[j2] = vn2;
            const float4 s2 = a2 * (p.kscale * knorms[cv2]);
            sh[SC + j2] = s2;
            mloc = max(mloc, s2);
        }
    }
    // The V phase's first four code words, loaded while the softmax runs.
    const uint words = p.d / 8u;
    VKeys vk;
    vk.head = head;
    vk.first = first;
    vk.n = n;
    vk.s0 = li / words;
    vk.st = ATT_WG / words;
    vk.words = words;
    vk.w = li % words;
    uint w0 = v_word(p, vcodes, vk, 0u);
    uint w1 = v_word(p, vcodes, vk, 1u);
    uint w2 = v_word(p, vcodes, vk, 2u);
    uint w3 = v_word(p, vcodes, vk, 3u);
    const float4 m = tq_reduce4(mloc, t, true, red);

    // Softmax weights (the reduction's barriers make the scores and vn visible).
    float4 lloc = float4(0.0f);
    for (uint j = li; j < n; j += ATT_WG) {
        const float4 e = exp(sh[SC + j] - m);
        lloc += e;
        sh[SC + j] = e * vn[j];
    }
    const float4 l = tq_reduce4(lloc, t, false, red);

    // V phase: four keys a step; the next step's words are loaded before this step's arithmetic.
    float4 acc[8];
    for (uint k = 0; k < 8u; ++k) {
        acc[k] = float4(0.0f);
    }
    const uint keys = vk.s0 < n ? (n - vk.s0 + vk.st - 1u) / vk.st : 0u;
    for (uint k = 0; k < keys; k += 4u) {
        const uint n0 = v_word(p, vcodes, vk, k + 4u);
        const uint n1 = v_word(p, vcodes, vk, k + 5u);
        const uint n2 = v_word(p, vcodes, vk, k + 6u);
        const uint n3 = v_word(p, vcodes, vk, k + 7u);
        v_fold(acc, lut, w0, v_weight(sh, vk, k));
        v_fold(acc, lut, w1, v_weight(sh, vk, k + 1u));
        v_fold(acc, lut, w2, v_weight(sh, vk, k + 2u));
        v_fold(acc, lut, w3, v_weight(sh, vk, k + 3u));
        w0 = n0;
        w1 = n1;
        w2 = n2;
        w3 = n3;
    }

    // Sum the stripes: thread li's 8 coordinates at sh[stripe * d + 8 w + k] (stripes * d = 1024),
    // then each coordinate's owner sums them into sh[coordinate].
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint b = vk.s0 * p.d + 8u * vk.w;
    for (uint k = 0; k < 8u; ++k) {
        sh[b + k] = acc[k];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = li; i < p.d; i += ATT_WG) {
        float4 o = sh[i];
        for (uint s = 1u; s < vk.st; ++s) {
            o += sh[s * p.d + i];
        }
        sh[i] = o;
    }
    wht(p, sh, li);  // sh[0..d] = H o'
    for (uint i = li; i < p.d; i += ATT_WG) {
        const float4 v = sh[i];
        const float4 o = sign_bit(vsigns, i) ? -v : v;
        for (uint g = 0; g < nh; ++g) {
            partial[((h0 + g) * p.splits + split) * p.row + 4u + i] = o[g];
        }
    }
    if (li < nh) {
        const uint r = ((h0 + li) * p.splits + split) * p.row;
        partial[r] = m[li];
        partial[r + 1u] = l[li];
    }
}
