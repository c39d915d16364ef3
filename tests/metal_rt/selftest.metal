// Unit tests of the executing runtime itself (tests/msl_exec.rs runs each kernel and checks the
// result in Rust). Not a product kernel: it lives here, not in msl/.
#include <metal_stdlib>
using namespace metal;

struct SelfParams {
    uint n;
    uint mode;
    uint pad0;
    uint pad1;
};

// Per lane: the simd functions over the lanes of its simdgroup (threadgroup of 40: a full and a
// partial simdgroup), and a threadgroup-memory exchange across a barrier.
kernel void rt_simd(constant SelfParams& p [[buffer(0)]], device const float* x [[buffer(1)]], device uint* out [[buffer(2)]],
                    uint li [[thread_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]], uint sid [[simdgroup_index_in_threadgroup]],
                    uint3 tg [[threadgroup_position_in_grid]], uint nsg [[simdgroups_per_threadgroup]], uint ss [[threads_per_simdgroup]]) {
    threadgroup float shared_x[64];
    const uint g = tg.x * 40u + li;
    const float v = x[g];
    shared_x[li] = v * 2.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint o = g * 12u;
    out[o + 0] = as_type<uint>(simd_sum(v));
    out[o + 1] = simd_sum(li);
    out[o + 2] = simd_prefix_exclusive_sum(li + 1u);
    out[o + 3] = as_type<uint>(simd_shuffle_xor(v, ushort(5)));
    out[o + 4] = as_type<uint>(simd_shuffle_down(v, ushort(3)));
    out[o + 5] = as_type<uint>(simd_broadcast(v, ushort(2)));
    out[o + 6] = as_type<uint>(simd_min(v));
    out[o + 7] = as_type<uint>(simd_max(v));
    out[o + 8] = as_type<uint>(shared_x[(li + 1u) % 40u]);
    out[o + 9] = (sid << 16) | (nsg << 8) | ss;
    const float4 f = float4(float2(v, 1.0f), 2.0f, 3.0f) + float4(0.5f);
    const half2 h = as_type<half2>(uint(0x3c00c000u));  // (1.0, -2.0) as halves, x low
    out[o + 10] = as_type<uint>(dot(f, float4(1.0f)) + float(h.x) + float(h[1]));
    out[o + 11] = as_type<uint>(simd_sum(float4(v, 1.0f, 0.0f, 0.0f)).y);
}

// 16x16 = (16x8) x (8x16) with 8x8 simdgroup matrices: one simdgroup per 8x8 output tile.
kernel void rt_matrix(constant SelfParams& p [[buffer(0)]], device const float* a [[buffer(1)]], device const float* b [[buffer(2)]],
                      device float* c [[buffer(3)]], uint sid [[simdgroup_index_in_threadgroup]]) {
    const uint tr = sid / 2u, tc = sid % 2u;
    simdgroup_float8x8 ma, mb;
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_load(ma, a, 8, ulong2(0, tr * 8u));
    simdgroup_load(mb, b, 16, ulong2(tc * 8u, 0));
    simdgroup_multiply_accumulate(acc, ma, mb, acc);
    simdgroup_store(acc, c, 16, ulong2(tc * 8u, tr * 8u));
    // The same product from transposed loads, stored transposed: c2 = (a b)^T.
    simdgroup_float8x8 mbt, mat;
    simdgroup_load(mbt, b, 16, ulong2(tc * 8u, 0), true);
    simdgroup_load(mat, a, 8, ulong2(0, tr * 8u), true);
    simdgroup_float8x8 t2;
    simdgroup_multiply(t2, mbt, mat);
    simdgroup_store(t2, c + 256, 16, ulong2(tr * 8u, tc * 8u));
}

// The constructs of naga's MSL (metal_naga.h), spelled as naga spells them, one thread. `static_cast`
// between vectors is what tests/naga_msl rewrites to `::mrt::cast`, called here directly.
kernel void rt_naga(constant SelfParams& p [[buffer(0)]], device const float* x [[buffer(1)]], device uint* out [[buffer(2)]]) {
    const metal::uint4 u = metal::uint4(3u, 0xffffffffu, 7u, 0x80000000u);
    out[0] = as_type<uint>(::mrt::cast<metal::float4>(u).y);  // converted, not reinterpreted
    const metal::uint4 t = ::mrt::cast<metal::uint4>(metal::float4(2.75f, 7.0f, 0.5f, 100.25f));
    out[1] = t.x + 10u * t.y + 100u * t.z + 1000u * t.w;
    const metal::float4 h = ::mrt::cast<metal::float4>(::mrt::cast<metal::half4>(metal::float4(1.0f / 3.0f, 65520.0f, -2.0f, 2.5f)));
    out[2] = as_type<uint>(h.x);
    out[3] = as_type<uint>(h.y);
    const metal::bool4 m = metal::uint4(1u, 5u, 3u, 9u) < metal::uint4(2u, 2u, 4u, 4u);
    const metal::uint4 s = metal::select(metal::uint4(10u, 20u, 30u, 40u), metal::uint4(1u, 2u, 3u, 4u), m);
    out[4] = s.x | (s.y << 8) | (s.z << 16) | (s.w << 24);
    out[5] = uint(metal::any(m)) | (uint(metal::all(m)) << 1) | (uint(metal::all(m | !m)) << 2) | (uint(metal::bool4(true, false, m.z, !m.w).w) << 3);
    const packed_char4 a = as_type<packed_char4>(0x80ff0201u);
    const packed_char4 b = as_type<packed_char4>(0x01010101u);
    out[6] = as_type<uint>(int(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]));
    int e = 0;
    const float fr = metal::frexp(12.0f, e);
    out[7] = as_type<uint>(fr);
    out[8] = uint(e);
    out[9] = as_type<uint>(metal::ldexp(1.0f, -3));
    metal::atomic_uint at;
    metal::atomic_store_explicit(&at, 5u, metal::memory_order_relaxed);
    const uint o1 = metal::atomic_fetch_or_explicit(&at, 2u, metal::memory_order_relaxed);
    const uint n1 = metal::atomic_load_explicit(&at, metal::memory_order_relaxed);
    const uint o2 = metal::atomic_fetch_xor_explicit(&at, 1u, metal::memory_order_relaxed);
    out[10] = o1 | (n1 << 8) | (o2 << 16) | (metal::atomic_load_explicit(&at, metal::memory_order_relaxed) << 24);
    const metal::packed_uint3 pk = metal::uint3(4u, 5u, 6u);
    const metal::uint3 back = pk;
    out[11] = uint(sizeof(metal::packed_uint3)) | ((back.x + back.y + back.z) << 8) | (pk[2] << 16);
    out[12] = as_type<uint>(INFINITY);
    out[13] = as_type<uint>(x[0] * 0.5f);
}

// Mistakes the runtime must refuse (mode selects one): 1 = simd op in divergent control flow,
// 2 = a barrier some threads exited before, 3 = a read past the end of a buffer.
kernel void rt_bad(constant SelfParams& p [[buffer(0)]], device const float* x [[buffer(1)]], device uint* out [[buffer(2)]],
                   uint li [[thread_index_in_threadgroup]]) {
    if (p.mode == 1u) {
        out[li] = li < 7u ? as_type<uint>(simd_sum(x[li])) : as_type<uint>(simd_max(x[li]));
    } else if (p.mode == 2u) {
        if (li == 3u) return;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        out[li] = 1u;
    } else if (p.mode == 3u) {
        out[li] = as_type<uint>(x[li + p.n]);
    }
}
