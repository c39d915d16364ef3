// The parts of Metal that naga's MSL writer uses beyond the hand-written kernels (tests/naga_msl.rs):
// the `metal::` spelling of the scalar and vector types, boolean vectors, packed vectors,
// `select`, `any` / `all`, `frexp` / `ldexp`, atomics, INFINITY / NAN, and the conversion that the
// test's source rewrite puts in place of naga's `static_cast` (MSL converts between vector types
// component by component; C++ refuses `static_cast` between vector types).
#pragma once

// ---- Boolean vectors (Metal's boolN). A vector comparison in C++ gives an integer mask (-1 / 0)
// per component, which converts to a boolean vector.
namespace mrt {
template <int N> struct boolc;
template <> struct boolc<2> { bool x, y; };
template <> struct boolc<3> { bool x, y, z; };
template <> struct boolc<4> { bool x, y, z, w; };
template <int N>
struct boolv : boolc<N> {
    boolv() = default;
    template <class M, class = decltype(M{}[0])>
    boolv(const M& mask) {
        static_assert(vinfo<M>::n == N, "boolean vector from a mask of another width");
        for (int i = 0; i < N; i++) (*this)[i] = mask[i] != 0;
    }
    bool& operator[](uint i) { return (&this->x)[i]; }
    const bool& operator[](uint i) const { return (&this->x)[i]; }
    friend boolv operator&(boolv a, boolv b) { for (int i = 0; i < N; i++) a[i] = a[i] && b[i]; return a; }
    friend boolv operator|(boolv a, boolv b) { for (int i = 0; i < N; i++) a[i] = a[i] || b[i]; return a; }
    friend boolv operator!(boolv a) { for (int i = 0; i < N; i++) a[i] = !a[i]; return a; }
    friend boolv operator==(boolv a, boolv b) { for (int i = 0; i < N; i++) a[i] = a[i] == b[i]; return a; }
    friend boolv operator!=(boolv a, boolv b) { for (int i = 0; i < N; i++) a[i] = a[i] != b[i]; return a; }
};
template <int N> struct vinfo<boolv<N>> { using scalar = bool; static constexpr int n = N; };

// Packed 3-component vectors (12 bytes, 4-byte aligned), converting to and from the padded ones.
template <class V>
struct packed3 {
    using S = typename vinfo<V>::scalar;
    S x, y, z;
    packed3() = default;
    packed3(V v) : x(v.x), y(v.y), z(v.z) {}
    operator V() const { return V{x, y, z}; }
    S& operator[](uint i) { return (&x)[i]; }
    const S& operator[](uint i) const { return (&x)[i]; }
};
template <class V> struct vinfo<packed3<V>> { using scalar = typename vinfo<V>::scalar; static constexpr int n = 3; };

// naga's `static_cast<T>(x)` (rewritten to this): component-wise conversion between vectors (and
// half vectors), a plain conversion between scalars.
template <class T, class X>
inline T cast(const X& x) {
    if constexpr (vinfo<T>::n > 1) {
        static_assert(vinfo<X>::n == vinfo<T>::n, "vector conversion between different widths");
        using ST = typename vinfo<T>::scalar;
        using SX = typename vinfo<X>::scalar;
        T r;
        for (int i = 0; i < vinfo<T>::n; i++) r[i] = (ST)(SX)x[i];
        return r;
    } else {
        return static_cast<T>(x);
    }
}
}  // namespace mrt

// Packed 4 x 8-bit vectors (naga's dot4I8Packed / dot4U8Packed reinterpret a uint as one). Metal's
// char is signed.
typedef signed char packed_char4 __attribute__((ext_vector_type(4)));
typedef unsigned char packed_uchar4 __attribute__((ext_vector_type(4)));
typedef mrt::boolv<2> bool2;
typedef mrt::boolv<3> bool3;
typedef mrt::boolv<4> bool4;
typedef mrt::packed3<uint3> packed_uint3;
typedef mrt::packed3<int3> packed_int3;
typedef mrt::packed3<float3> packed_float3;
template <class... A> inline bool2 mrt_make_bool2(const A&... a) { return ::mrt::make<bool2>(a...); }
template <class... A> inline bool3 mrt_make_bool3(const A&... a) { return ::mrt::make<bool3>(a...); }
template <class... A> inline bool4 mrt_make_bool4(const A&... a) { return ::mrt::make<bool4>(a...); }
#define bool2(...) mrt_make_bool2(__VA_ARGS__)
#define bool3(...) mrt_make_bool3(__VA_ARGS__)
#define bool4(...) mrt_make_bool4(__VA_ARGS__)

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")

namespace metal {
using ::uint;
using ::ushort;
using ::uchar;
using ::half;
using ::bool2;
using ::bool3;
using ::bool4;
using ::packed_uint3;
using ::packed_int3;
using ::packed_float3;
using ::packed_char4;
using ::packed_uchar4;
using ::mrt_make_bool2;
using ::mrt_make_bool3;
using ::mrt_make_bool4;

// select(a, b, c): b where c, else a; per component for a boolean vector (or a comparison mask).
template <class T, class C>
inline T select(T a, T b, C c) {
    if constexpr (::mrt::vinfo<C>::n == 1) {
        return c ? b : a;
    } else {
        static_assert(::mrt::vinfo<C>::n == ::mrt::vinfo<T>::n, "select: condition width differs");
        T r;
        for (int i = 0; i < ::mrt::vinfo<T>::n; i++) r[i] = c[i] ? b[i] : a[i];
        return r;
    }
}
template <class V> inline bool any(const V& v) {
    for (int i = 0; i < ::mrt::vinfo<V>::n; i++)
        if (v[i]) return true;
    return false;
}
template <class V> inline bool all(const V& v) {
    for (int i = 0; i < ::mrt::vinfo<V>::n; i++)
        if (!v[i]) return false;
    return true;
}
inline bool any(bool b) { return b; }
inline bool all(bool b) { return b; }

// frexp / ldexp (scalar float).
inline float frexp(float x, int& e) { return __builtin_frexpf(x, &e); }
inline float ldexp(float x, int e) { return __builtin_ldexpf(x, e); }

// ---- Atomics. The fibers of a threadgroup run one at a time on one OS thread (and threadgroups
// one after another), so every atomic operation is a plain read-modify-write; memory orders are
// accepted and have nothing to order.
enum memory_order { memory_order_relaxed };
template <class T>
struct mrt_atomic {
    T v;
};
typedef mrt_atomic<uint> atomic_uint;
typedef mrt_atomic<int> atomic_int;
template <class T> struct mrt_id { using type = T; };
template <class T> inline T atomic_load_explicit(const mrt_atomic<T>* a, memory_order) { return a->v; }
template <class T> inline void atomic_store_explicit(mrt_atomic<T>* a, typename mrt_id<T>::type v, memory_order) { a->v = v; }
template <class T> inline T atomic_exchange_explicit(mrt_atomic<T>* a, typename mrt_id<T>::type v, memory_order) { T o = a->v; a->v = v; return o; }
#define MRT_ATOMIC_RMW(name, expr) \
    template <class T> inline T atomic_fetch_##name##_explicit(mrt_atomic<T>* a, typename mrt_id<T>::type b, memory_order) { T o = a->v; a->v = (expr); return o; }
MRT_ATOMIC_RMW(add, o + b)
MRT_ATOMIC_RMW(sub, o - b)
MRT_ATOMIC_RMW(and, o & b)
MRT_ATOMIC_RMW(or, o | b)
MRT_ATOMIC_RMW(xor, o ^ b)
MRT_ATOMIC_RMW(min, b < o ? b : o)
MRT_ATOMIC_RMW(max, o < b ? b : o)
#undef MRT_ATOMIC_RMW
template <class T>
inline bool atomic_compare_exchange_weak_explicit(mrt_atomic<T>* a, T* expected, typename mrt_id<T>::type desired, memory_order, memory_order) {
    if (a->v == *expected) {
        a->v = desired;
        return true;
    }
    *expected = a->v;
    return false;
}
}  // namespace metal

// Metal's `as_type` is a global name (naga writes it unqualified).
using metal::as_type;
