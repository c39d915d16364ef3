// Executing Metal runtime for tests/msl_exec.rs: the types and the scheduler interface shared by
// the kernel translation unit (through <metal_stdlib>) and metal_rt.cpp (the fiber scheduler).
// No system header is included here: the kernel TU is compiled with -nostdinc, so the only names
// a kernel sees are the ones declared in this directory.
#pragma once

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

// ---- half: IEEE binary16 storage; arithmetic promotes to float and rounds on conversion back
// (exact for a single + - * / since binary32 holds every such result to binary16's rounding).
namespace mrt {
inline unsigned short f2h(float f) {
    unsigned int x = __builtin_bit_cast(unsigned int, f);
    unsigned int sign = (x >> 16) & 0x8000u;
    unsigned int ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (ax < 0x38800000u) {                                           // subnormal or zero in half
        if (ax < 0x33000000u) return (unsigned short)sign;            // < 2^-25: rounds to 0
        unsigned int e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        unsigned int shift = 126u - e;                                // 14 + (113 - e) - 1
        unsigned int q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (unsigned short)(sign | q);
    }
    unsigned int q = ((ax >> 13) - (112u << 10)), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (unsigned short)(sign | q);
}
inline float h2f(unsigned short h) {
    unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
}
}  // namespace mrt

struct half {
    unsigned short bits;
    half() = default;
    half(float f) : bits(mrt::f2h(f)) {}
    operator float() const { return mrt::h2f(bits); }
};
// Metal's alignments (a half4 member of a struct sits at a multiple of 8, as naga's layouts assume).
struct alignas(4) half2 {
    half x, y;
    half& operator[](uint i) { return (&x)[i]; }
    const half& operator[](uint i) const { return (&x)[i]; }
};
struct alignas(8) half4 {
    half x, y, z, w;
    half& operator[](uint i) { return (&x)[i]; }
    const half& operator[](uint i) const { return (&x)[i]; }
};

#define MRT_VEC(T, N) typedef T T##N __attribute__((ext_vector_type(N)));
#define MRT_VECS(T) MRT_VEC(T, 2) MRT_VEC(T, 3) MRT_VEC(T, 4)
MRT_VECS(float)
MRT_VECS(uint)
MRT_VECS(int)
MRT_VECS(ushort)
MRT_VECS(short)
MRT_VECS(uchar)
MRT_VECS(char)
MRT_VECS(ulong)
#undef MRT_VECS
#undef MRT_VEC

namespace mrt {

// What a kernel's builtin parameters read.
struct Builtins {
    uint3 tg, ntg, tptg, tpig, tpitg;
    uint li, sl, ss, sid, nsg;
};

typedef void (*EntryFn)(void* const* bufs, const Builtins& b);
struct Entry {
    const char* name;
    EntryFn fn;
};

// A buffer argument: converts to the kernel parameter's pointer or reference type.
struct Arg {
    void* p;
    template <class T>
    operator T*() const { return (T*)p; }
    template <class T>
    operator T&() const { return *(T*)p; }
};

// One simdgroup rendezvous: each arriving lane deposits up to 16 bytes (+ an aux word), the last
// one to arrive (or the scheduler, when the remaining lanes exit) runs `fn` over the lanes that
// arrived, which writes each lane's result.
constexpr int SIMD_WIDTH = 32;
struct SimdSlot {
    void (*fn)(SimdSlot&);
    const char* what;
    bool arrived[SIMD_WIDTH];
    alignas(16) unsigned char in[SIMD_WIDTH][256];
    alignas(16) unsigned char out[SIMD_WIDTH][256];
    unsigned long aux[SIMD_WIDTH][4];
};

// Implemented in metal_rt.cpp.
void barrier(const char* what);
// Deposit `bytes` of `data` (+aux) for this lane, wait for the simdgroup, copy the result back.
void simd_rendezvous(void (*fn)(SimdSlot&), const char* what, const void* data, unsigned bytes, const unsigned long* aux, void* result, unsigned result_bytes);
void poison_threadgroup(void* p, unsigned long bytes);
[[noreturn]] void fail(const char* what);
}  // namespace mrt
