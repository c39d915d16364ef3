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
//   K phase: one thread per four keys (two on splits of at most 256 positions), sharing each
//            q' load; q' and the 16 centroids in threadgroup memory; scores kept in threadgroup
//            memory (sh[512..]). The norms and the first code words (K and V) are loaded before
//            the rotation, the next K words before the current ones' arithmetic.
//   softmax: max over the split, p = exp(s - max); p pre-multiplied by the V norm. The sum of
//            the p's is staged and read at the end (no reduction barrier of its own).
//   V phase: thread (w, stripe) owns code word w (8 coordinates) and every stripe-th key, eight
//            keys a step, the words of three steps ahead loaded before this step's arithmetic
//            (the first eight before the rotation, the next sixteen before the max reduction).
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
// threads; threadgroup memory: 1024 + 128 float4, 512 + 16 float (20.1 KiB): the twin's full
// footprint (turboquant::Footprint::FULL). A device with less threadgroup memory runs the twin's
// compact footprint (WGSL) instead of this kernel.
//
// Twin fingerprint (tests/msl_bindings.rs fails when the twin's WGSL text changes, until the change
// is ported here and the fingerprint updated):
//   tq_attend: twin fnv1a64 68efe5a1c1b19ffe

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

// A sum staged without a barrier: tq_stage_sum4 (every thread) stores its simdgroup's part, and
// after any later barrier tq_staged_sum4 returns the threadgroup's total to whoever asks. `red`
// must not be reused in between.
static void tq_stage_sum4(float4 v, TqLanes t, threadgroup float4* red) {
    float4 r;
    r.x = simd_sum(v.x);
    r.y = simd_sum(v.y);
    r.z = simd_sum(v.z);
    r.w = simd_sum(v.w);
    if (t.first) {
        red[t.sid] = r;
    }
}

static float4 tq_staged_sum4(TqLanes t, threadgroup const float4* red) {
    float4 acc = red[0];
    for (uint i = 1; i < t.nsg; ++i) {
        acc += red[i];
    }
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

// Scores of two keys (float4 over the quad's heads) from their code vectors cv and cv2, whose first
// code words f0, f1 the caller loaded: every q' load from threadgroup memory serves both, and the
// next words are loaded before the current ones' arithmetic.
static inline void key_dots(constant TqAttendParams& p, device const uint4* kcodes, threadgroup const float4* qv,
                            threadgroup const float* lut, uint cv, uint cv2, uint4 f0, uint4 f1, thread float4& a,
                            thread float4& a2) {
    const uint w4 = p.d / 32u;
    a = float4(0.0f);
    a2 = float4(0.0f);
    uint4 w = f0;
    uint4 w2 = f1;
    for (uint c = 0; c < w4; ++c) {
        const uint cn = min(c + 1u, w4 - 1u);
        const uint4 n0 = kcodes[cv * w4 + cn];
        const uint4 n1 = kcodes[cv2 * w4 + cn];
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
        w = n0;
        w2 = n1;
    }
}

// Scores of four keys from their code vectors cv, as key_dots.
static inline void key_dots4(constant TqAttendParams& p, device const uint4* kcodes, threadgroup const float4* qv,
                             threadgroup const float* lut, uint4 cv, thread uint4* f, thread float4* acc) {
    const uint w4 = p.d / 32u;
    uint4 w[4] = {f[0], f[1], f[2], f[3]};
    for (uint t = 0; t < 4u; ++t) {
        acc[t] = float4(0.0f);
    }
    for (uint u = 0; u < w4; ++u) {
        const uint un = min(u + 1u, w4 - 1u);
        uint4 nx[4];
        for (uint t = 0; t < 4u; ++t) {
            nx[t] = kcodes[cv[t] * w4 + un];
        }
        for (uint e = 0; e < 4u; ++e) {
            const uint i0 = u * 32u + e * 8u;
            for (uint k = 0; k < 8u; ++k) {
                const float4 q = qv[i0 + k];
                for (uint t = 0; t < 4u; ++t) {
                    acc[t] += lut[(w[t][e] >> (4u * k)) & 15u] * q;
                }
            }
        }
        for (uint t = 0; t < 4u; ++t) {
            w[t] = nx[t];
        }
    }
}

// Store key j's score (dot * kscale * K norm) and scaled V norm; returns the score.
static inline float4 keep(constant TqAttendParams& p, threadgroup float4* sh, threadgroup float* vn, uint j, float4 dot,
                          float kn, float vnj) {
    const float4 s = dot * (p.kscale * kn);
    sh[SC + j] = s;
    vn[j] = p.vscale * vnj;
    return s;
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
    const uint t0 = split * p.split_len;
    const uint n = min(p.split_len, p.count - t0);
    const uint head = kvh * p.capacity;
    const uint first = (p.lo + t0) % p.capacity;

    // K phase plan: thread li scores keys jk = li + t * h for t < 4, h = ceil(n / 4), where the
    // split has more than 2 * ATT_WG positions, else for t < 2, h = ceil(n / 2). Its norms and
    // first code words are loaded before the queries are rotated.
    const bool quadk = n > 2u * ATT_WG;
    const uint h = quadk ? (n + 3u) / 4u : (n + 1u) / 2u;
    uint4 jk;  // (the multi-scalar vector constructors are spelled with component stores)
    jk.x = li;
    jk.y = li + h;
    jk.z = li + 2u * h;
    jk.w = li + 3u * h;
    const bool live_x = li < h && jk.x < n;
    const bool live_y = jk.y < n;
    const bool live_z = quadk && jk.z < n;
    const bool live_w = quadk && jk.w < n;
    const uint w4 = p.d / 32u;
    uint4 cv = uint4(0u);
    float4 kn = float4(0.0f);
    float4 vv = float4(0.0f);
    uint4 f[4] = {uint4(0u), uint4(0u), uint4(0u), uint4(0u)};
    if (live_x) {
        const uint c0 = slot(p, head, first, jk.x);
        cv.x = c0;
        cv.y = live_y ? slot(p, head, first, jk.y) : c0;
        cv.z = live_z ? slot(p, head, first, jk.z) : c0;
        cv.w = live_w ? slot(p, head, first, jk.w) : c0;
        for (uint u = 0; u < 4u; ++u) {
            kn[u] = knorms[cv[u]];
            vv[u] = vnorms[cv[u]];
        }
        f[0] = kcodes[cv.x * w4];
        f[1] = kcodes[cv.y * w4];
        if (quadk) {
            f[2] = kcodes[cv.z * w4];
            f[3] = kcodes[cv.w * w4];
        }
    }
    // The V phase's first eight code words.
    const uint words = p.d / 8u;
    VKeys vk;
    vk.head = head;
    vk.first = first;
    vk.n = n;
    vk.s0 = li / words;
    vk.st = ATT_WG / words;
    vk.words = words;
    vk.w = li % words;
    uint wv[8];
    for (uint u = 0; u < 8u; ++u) {
        wv[u] = v_word(p, vcodes, vk, u);
    }

    for (uint i = li; i < p.d; i += ATT_WG) {
        float4 v = float4(0.0f);
        for (uint g = 0; g < nh; ++g) {
            v[g] = q[(h0 + g) * p.d + i];
        }
        sh[i] = sign_bit(ksigns, i) ? -v : v;
    }
    wht(p, sh, li);  // sh[0..d] = H D_K q (the 1 / sqrt(d) is in kscale)

    // K phase.
    float4 mloc = float4(-3.0e38f);
    if (live_x) {
        if (quadk) {
            float4 a[4];
            key_dots4(p, kcodes, sh, lut, cv, f, a);
            mloc = keep(p, sh, vn, jk.x, a[0], kn.x, vv.x);
            if (live_y) {
                mloc = max(mloc, keep(p, sh, vn, jk.y, a[1], kn.y, vv.y));
            }
            if (live_z) {
                mloc = max(mloc, keep(p, sh, vn, jk.z, a[2], kn.z, vv.z));
            }
            if (live_w) {
                mloc = max(mloc, keep(p, sh, vn, jk.w, a[3], kn.w, vv.w));
            }
        } else {
            float4 a = float4(0.0f);
            float4 a2 = float4(0.0f);
            key_dots(p, kcodes, sh, lut, cv.x, cv.y, f[0], f[1], a, a2);
            mloc = keep(p, sh, vn, jk.x, a, kn.x, vv.x);
            if (live_y) {
                mloc = max(mloc, keep(p, sh, vn, jk.y, a2, kn.y, vv.y));
            }
        }
    }
    // The V phase's next sixteen code words, in flight through the reduction and the softmax.
    uint xv[8];
    uint yv[8];
    for (uint u = 0; u < 8u; ++u) {
        xv[u] = v_word(p, vcodes, vk, 8u + u);
        yv[u] = v_word(p, vcodes, vk, 16u + u);
    }
    const float4 m = tq_reduce4(mloc, t, true, red);

    // Softmax weights (the reduction's barriers make the scores and vn visible). Their sum is
    // staged and read at the end (after the stripes' barriers); one barrier makes the weights
    // visible to the V phase.
    float4 lloc = float4(0.0f);
    for (uint j = li; j < n; j += ATT_WG) {
        const float4 e = exp(sh[SC + j] - m);
        lloc += e;
        sh[SC + j] = e * vn[j];
    }
    tq_stage_sum4(lloc, t, red);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // V phase: eight keys a step; the words of the step three ahead are loaded before this
    // step's arithmetic.
    float4 acc[8];
    for (uint k = 0; k < 8u; ++k) {
        acc[k] = float4(0.0f);
    }
    const uint keys = vk.s0 < n ? (n - vk.s0 + vk.st - 1u) / vk.st : 0u;
    for (uint k = 0; k < keys; k += 8u) {
        uint nx[8];
        for (uint u = 0; u < 8u; ++u) {
            nx[u] = v_word(p, vcodes, vk, k + 24u + u);
        }
        for (uint u = 0; u < 8u; ++u) {
            v_fold(acc, lut, wv[u], v_weight(sh, vk, k + u));
        }
        for (uint u = 0; u < 8u; ++u) {
            wv[u] = xv[u];
            xv[u] = yv[u];
            yv[u] = nx[u];
        }
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
        const float4 l = tq_staged_sum4(t, red);
        const uint r = ((h0 + li) * p.splits + split) * p.row;
        partial[r] = m[li];
        partial[r + 1u] = l[li];
    }
}
