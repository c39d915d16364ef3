// simdgroup_matrix (MSL spec 6.7): 8x8 matrices owned by a simdgroup. Here every lane holds the
// whole matrix; load, store and multiply are simdgroup rendezvous that check the arguments are
// uniform across the simdgroup (as Metal requires) and compute once, in a fixed order
// (d[i][j] = c[i][j] + sum over k = 0..7 of a[i][k] * b[k][j], accumulated in T's precision for
// float; half products and sums are rounded to half at each step; half operands into float
// accumulators: products and sums in float).
#pragma once

namespace metal {

template <class T, int Cols, int Rows>
struct simdgroup_matrix {
    static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices");
    T e[Rows][Cols];  // e[row][col]
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <class T, int C, int R>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
    simdgroup_matrix<T, C, R> m;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) m.e[i][j] = v;
    return m;
}

namespace detail {
struct MatArgs {
    const void* ptr;
    unsigned long stride, ox, oy, transpose;
};
// Every arrived lane must pass the same arguments; the result is the same for each.
template <class M>
void op_uniform_matrix(::mrt::SimdSlot& s) {
    int first = -1;
    for (int l = 0; l < ::mrt::SIMD_WIDTH; l++) {
        if (!s.arrived[l]) continue;
        if (first < 0) first = l;
        for (int a = 0; a < 4; a++)
            if (s.aux[l][a] != s.aux[first][a]) ::mrt::fail("simdgroup_matrix operation with arguments that differ across the simdgroup");
        if (__builtin_memcmp(s.in[l], s.in[first], sizeof(M)) != 0) ::mrt::fail("simdgroup_matrix operation on matrices that differ across the simdgroup");
    }
    for (int l = 0; l < ::mrt::SIMD_WIDTH; l++)
        if (s.arrived[l]) __builtin_memcpy(s.out[l], s.in[first], sizeof(M));
}
template <class M>
inline void uniform(const char* what, M& m, const void* ptr, unsigned long stride, ulong2 origin, bool transpose) {
    unsigned long aux[4] = {(unsigned long)ptr, stride, (unsigned long)origin.x | ((unsigned long)origin.y << 32), transpose ? 1ul : 0ul};
    M r;
    ::mrt::simd_rendezvous(op_uniform_matrix<M>, what, &m, sizeof m, aux, &r, sizeof r);
    m = r;
}
}  // namespace detail

// origin = (column, row) of the matrix's first element, as in Metal.
template <class T, int C, int R, class U>
inline void simdgroup_load(thread simdgroup_matrix<T, C, R>& d, const U* src, ulong elements_per_row = C, ulong2 origin = ulong2(0, 0), bool transpose = false) {
    simdgroup_matrix<T, C, R> m;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            const ulong r = origin.y + (transpose ? j : i), c = origin.x + (transpose ? i : j);
            m.e[i][j] = (T)src[r * elements_per_row + c];
        }
    detail::uniform("simdgroup_load", m, src, elements_per_row, origin, transpose);
    d = m;
}

template <class T, int C, int R, class U>
inline void simdgroup_store(simdgroup_matrix<T, C, R> m, U* dst, ulong elements_per_row = C, ulong2 origin = ulong2(0, 0), bool transpose = false) {
    detail::uniform("simdgroup_store", m, dst, elements_per_row, origin, transpose);
    if (detail::lane() != 0) return;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            const ulong r = origin.y + (transpose ? j : i), c = origin.x + (transpose ? i : j);
            dst[r * elements_per_row + c] = (U)m.e[i][j];
        }
}

template <class T, int C, int R>
inline void simdgroup_multiply_accumulate(thread simdgroup_matrix<T, C, R>& d, simdgroup_matrix<T, C, R> a, simdgroup_matrix<T, C, R> b, simdgroup_matrix<T, C, R> c) {
    detail::uniform("simdgroup_multiply_accumulate(a)", a, nullptr, 0, ulong2(0, 0), false);
    detail::uniform("simdgroup_multiply_accumulate(b)", b, nullptr, 0, ulong2(0, 0), false);
    detail::uniform("simdgroup_multiply_accumulate(c)", c, nullptr, 0, ulong2(0, 0), false);
    simdgroup_matrix<T, C, R> r;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            T acc = c.e[i][j];
            for (int k = 0; k < C; k++) acc = (T)(acc + a.e[i][k] * b.e[k][j]);
            r.e[i][j] = acc;
        }
    d = r;
}

// Mixed precision: U operands (half) into T accumulators (float); each product is formed in T
// (exact for half operands in float) and summed in T. With U = T the one-type overload above,
// more specialised, is chosen.
template <class T, class U, int C, int R>
inline void simdgroup_multiply_accumulate(thread simdgroup_matrix<T, C, R>& d, simdgroup_matrix<U, C, R> a, simdgroup_matrix<U, C, R> b, simdgroup_matrix<T, C, R> c) {
    detail::uniform("simdgroup_multiply_accumulate(a)", a, nullptr, 0, ulong2(0, 0), false);
    detail::uniform("simdgroup_multiply_accumulate(b)", b, nullptr, 0, ulong2(0, 0), false);
    detail::uniform("simdgroup_multiply_accumulate(c)", c, nullptr, 0, ulong2(0, 0), false);
    simdgroup_matrix<T, C, R> r;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            T acc = c.e[i][j];
            for (int k = 0; k < C; k++) acc = (T)(acc + (T)a.e[i][k] * (T)b.e[k][j]);
            r.e[i][j] = acc;
        }
    d = r;
}

template <class T, int C, int R>
inline void simdgroup_multiply(thread simdgroup_matrix<T, C, R>& d, simdgroup_matrix<T, C, R> a, simdgroup_matrix<T, C, R> b) {
    simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<T, C, R>((T)0.0f));
}

}  // namespace metal
