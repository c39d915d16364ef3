// INT4 quantiser (f32 or f16 source -> codes, per-group scales and zeros), native tier
// (hand-written MSL for wgpu's passthrough path). Two passes, as in WGSL:
//   int4_quant_scales_{f32,f16}: per-group scale (and zero point);
//     twin: wgsl/interleave.wgsl + int4_quant.wgsl + int4_quant_subgroup.wgsl, entry scales_subgroup.
//   int4_quant_codes_{f32,f16}:  one thread per output word of 8 codes, stored in the
//     interleaved row layout; twin: wgsl/interleave.wgsl + wgsl/int4_quant.wgsl, entry codes_main.
// Same Params and bindings as the twins. Source values come as uint words: f32 bit patterns, or
// two f16 per word (low half first, as WGSL's unpack2x16float).
//
// Scales: one threadgroup per (row, group), grid-strided. Threads stride over the group keeping a
// running min/max (both start at 0, like the CPU reference); simd_min/simd_max reduce inside each
// simdgroup, the lowest active lane of each simdgroup stores its partial at part[simdgroup index],
// and after a threadgroup barrier thread 0 folds ALL simdgroups' partials. So it is right for
// threadgroups larger than one simdgroup and for any simdgroup width; min/max are exact, so scales
// are bit-identical to the CPU quantiser. A group holding a NaN or an infinity gets the scale NaN,
// as in WGSL (the data policy: non-finite values propagate).
//
// Rounding is ties-away-from-zero computed EXACTLY with no division (see wgsl/int4_quant.wgsl):
// 2|x| is compared with (2j+1)*s through the split s = hi + lo (hi keeps 18 significant bits),
// so (2j+1)*hi and (2j+1)*lo are exact products. Metal's `round` is ties-away too, but x / s is
// not exact (and fast math, which wgpu's passthrough leaves on, may even approximate it), so it
// is not used. Fast math permits contraction and reassociation: the difference is written as one
// explicit fma (identical to the unfused form because the product is exact), and nothing here
// gives the compiler an expression it could refactor into a rounded (2j+1)*s.
//
// Passthrough conventions (see src/pipeline.rs): params at buffer(0) in the constant address space,
// storage binding i at buffer(i), device const for read-only; no sizes buffer; threadgroup size
// from the PipelineDesc (any size up to 1024 threads); threadgroup memory: 2 x 128 floats (1 KiB).
//
// Twin fingerprints (tests/msl_bindings.rs fails when a twin's WGSL text changes, until the change is
// ported here and the fingerprint updated):
//   int4_quant_scales_*: twin fnv1a64 94dedfe576278f95
//   int4_quant_codes_*:  twin fnv1a64 64c3fe564047b3b1

#include <metal_stdlib>
using namespace metal;

struct Int4QuantParams {
    uint n;
    uint k;
    uint group_size;
    uint num_groups;
    uint row_words;  // row stride of `codes` in uint (8 codes each)
    uint asym;
    uint _p0;
    uint _p1;
};

// Partials per threadgroup: one per simdgroup (1024 threads / width >= 8).
constant constexpr uint MAX_SIMDGROUPS = 128;
constant constexpr float INV7 = 0.142857149243354797363281250f;   // fl(1/7)
constant constexpr float INV15 = 0.066666670143604278564453125f;  // fl(1/15)

// Physical index of natural word w in a row of `vec4s` uint4s (the interleaved code layout of
// wgsl/interleave.wgsl and src/kernels/interleave.rs).
static inline uint il_phys(uint w, uint vec4s) {
    const uint b = w >> 7;
    const uint s = min(32u, vec4s - (b << 5));
    const uint t = w & 127u;
    return (b << 7) + 4u * (t % s) + t / s;
}

template <bool F16>
static inline float load(device const uint* src, uint i) {
    if (F16) {
        const half2 h = as_type<half2>(src[i >> 1]);
        return float(h[i & 1u]);
    }
    return as_type<float>(src[i]);
}

// load() for the min/max scan: a NaN or an infinity reads as +inf (built from its own bits), which
// min/max keep where they could drop a NaN; store_scale then writes the scale NaN for the group.
template <bool F16>
static inline float scan_load(device const uint* src, uint i) {
    const float v = load<F16>(src, i);
    const uint e = as_type<uint>(v) & 0x7f800000u;
    return e == 0x7f800000u ? as_type<float>(e) : v;
}

// round-half-away(|x| / s), capped at 16, exactly. s > 0.
static inline uint round_mag(float ax, float s) {
    const float hi = as_type<float>(as_type<uint>(s) & 0xffffffc0u);
    const float lo = s - hi;
    const float ax2 = 2.0f * ax;
    uint m = 0;
    for (uint j = 0; j < 16u; ++j) {
        const float kf = float(2u * j + 1u);
        m += fma(-kf, hi, ax2) >= kf * lo ? 1u : 0u;
    }
    return m;
}

static inline void store_scale(constant Int4QuantParams& p, device float* scales, device float* zeros,
                               uint id, float lo, float hi) {
    const uint hb = as_type<uint>(hi);
    if (hb == 0x7f800000u) {
        // A non-finite value in the group (scan_load): NaN, from the +inf's own bits.
        scales[id] = as_type<float>(hb | 0x00400000u);
        if (p.asym != 0u) {
            zeros[id] = 0.0f;
        }
        return;
    }
    if (p.asym != 0u) {
        const float s = (hi - lo) * INV15;
        scales[id] = s;
        uint z = 0;
        if (s > 0.0f) {
            z = min(round_mag(-lo, s), 15u);
        }
        zeros[id] = float(z);
    } else {
        scales[id] = abs(max(hi, -lo)) * INV7;  // abs: never a -0.0 scale (max(0, -0) may be -0)
    }
}

template <bool F16>
static void scales_body(constant Int4QuantParams& p, device const uint* src, device float* scales,
                        device float* zeros, threadgroup float* part_lo, threadgroup float* part_hi,
                        uint3 tg, uint3 ntg, uint tid, uint tcount, uint sg, uint nsg) {
    const uint total = p.n * p.num_groups;
    const uint count = ntg.x * ntg.y;
    for (uint id = tg.x + tg.y * ntg.x; id < total; id += count) {
        const uint row = id / p.num_groups;
        const uint c0 = (id % p.num_groups) * p.group_size;
        const uint c1 = min(p.k, c0 + p.group_size);
        float lo = 0.0f;
        float hi = 0.0f;
        for (uint c = c0 + tid; c < c1; c += tcount) {
            const float v = scan_load<F16>(src, row * p.k + c);
            lo = min(lo, v);
            hi = max(hi, v);
        }
        lo = simd_min(lo);
        hi = simd_max(hi);
        if (simd_prefix_exclusive_sum(1u) == 0u) {
            part_lo[sg] = lo;
            part_hi[sg] = hi;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0u) {
            float glo = 0.0f;
            float ghi = 0.0f;
            for (uint i = 0; i < nsg; ++i) {
                glo = min(glo, part_lo[i]);
                ghi = max(ghi, part_hi[i]);
            }
            store_scale(p, scales, zeros, id, glo, ghi);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

template <bool F16>
static void codes_body(constant Int4QuantParams& p, device const uint* src, device uint* codes,
                       device const float* scales, device const float* zeros, uint id) {
    if (id >= p.n * p.row_words) {
        return;
    }
    const uint row = id / p.row_words;
    const uint w = id % p.row_words;
    uint word = 0;
    for (uint i = 0; i < 8u; ++i) {
        const uint c = w * 8u + i;
        if (c < p.k) {
            const float v = load<F16>(src, row * p.k + c);
            const uint gi = row * p.num_groups + c / p.group_size;
            const float s = scales[gi];
            int q = 0;
            if (s > 0.0f) {
                const int m = int(round_mag(abs(v), s));
                q = v < 0.0f ? -m : m;
            }
            uint code;
            if (p.asym != 0u) {
                code = uint(clamp(q + int(zeros[gi]), 0, 15));
            } else {
                code = uint(clamp(q, -8, 7)) & 15u;
            }
            word |= code << (4u * i);
        }
    }
    codes[row * p.row_words + il_phys(w, p.row_words / 4u)] = word;
}

kernel void int4_quant_scales_f32(constant Int4QuantParams& p [[buffer(0)]],
                                  device const uint* src [[buffer(1)]],
                                  device uint* codes [[buffer(2)]],
                                  device float* scales [[buffer(3)]],
                                  device float* zeros [[buffer(4)]],
                                  uint3 tg [[threadgroup_position_in_grid]],
                                  uint3 ntg [[threadgroups_per_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint3 tptg [[threads_per_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float part_lo[MAX_SIMDGROUPS];
    threadgroup float part_hi[MAX_SIMDGROUPS];
    scales_body<false>(p, src, scales, zeros, part_lo, part_hi, tg, ntg, tid, tptg.x * tptg.y * tptg.z, sg, nsg);
}

kernel void int4_quant_scales_f16(constant Int4QuantParams& p [[buffer(0)]],
                                  device const uint* src [[buffer(1)]],
                                  device uint* codes [[buffer(2)]],
                                  device float* scales [[buffer(3)]],
                                  device float* zeros [[buffer(4)]],
                                  uint3 tg [[threadgroup_position_in_grid]],
                                  uint3 ntg [[threadgroups_per_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint3 tptg [[threads_per_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float part_lo[MAX_SIMDGROUPS];
    threadgroup float part_hi[MAX_SIMDGROUPS];
    scales_body<true>(p, src, scales, zeros, part_lo, part_hi, tg, ntg, tid, tptg.x * tptg.y * tptg.z, sg, nsg);
}

kernel void int4_quant_codes_f32(constant Int4QuantParams& p [[buffer(0)]],
                                 device const uint* src [[buffer(1)]],
                                 device uint* codes [[buffer(2)]],
                                 device float* scales [[buffer(3)]],
                                 device float* zeros [[buffer(4)]],
                                 uint3 tg [[threadgroup_position_in_grid]],
                                 uint3 ntg [[threadgroups_per_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint3 tptg [[threads_per_threadgroup]]) {
    codes_body<false>(p, src, codes, scales, zeros, (tg.x + tg.y * ntg.x) * (tptg.x * tptg.y * tptg.z) + tid);
}

kernel void int4_quant_codes_f16(constant Int4QuantParams& p [[buffer(0)]],
                                 device const uint* src [[buffer(1)]],
                                 device uint* codes [[buffer(2)]],
                                 device float* scales [[buffer(3)]],
                                 device float* zeros [[buffer(4)]],
                                 uint3 tg [[threadgroup_position_in_grid]],
                                 uint3 ntg [[threadgroups_per_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint3 tptg [[threads_per_threadgroup]]) {
    codes_body<true>(p, src, codes, scales, zeros, (tg.x + tg.y * ntg.x) * (tptg.x * tptg.y * tptg.z) + tid);
}
