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
