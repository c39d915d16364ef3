// INT8 GEMV: y[r] = sum_c (q[r,c] - zero) * scale * x[c], scale/zero per tensor or per row.
// Included after a team file and interleave.wgsl; same structure as int4_gemv (4 codes per word):
// a team computes ROWS rows at a time, UNROLL vec4 steps per iteration with the loads first,
// rows past n clamped for loading and never written, one vec4 accumulator.
// Signed codes become unsigned by XOR 0x80 per byte and a zero offset of 128.

struct Params {
    n: u32,
    k: u32,
    row_vec4s: u32,    // row stride of `codes` in vec4<u32> (16 codes each)
    xor_mask: u32,     // 0x80808080 signed, 0 unsigned
    zero_offset: f32,  // 128 signed, 0 unsigned
    per_row: u32,      // 1: scales/zeros have n entries, 0: one entry
    _p0: u32,
    _p1: u32,
}

override ROWS: u32 = 2u;    // rows per team, 1..4
override UNROLL: u32 = 2u;  // vec4 steps per lane per iteration: 1, 2 or 4

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

// dot(q - offset, x) for the 4 bytes of w by masks alone: byte i (0, 1) of a 16-bit half, masked
// in place and OR-ed into the bits of 2^(23 - 8i), is 2^(23 - 8i) + byte (exact: its ulp is 1);
// bias = 2^(23 - 8i) + offset, so x is used as loaded.
const BYTE_MASKS = vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
const BYTE_MAGIC = vec4<u32>(0x4b000000u, 0x47000000u, 0x4b000000u, 0x47000000u);

fn byte_dot(w: u32, bias: vec4<f32>, xv: vec4<f32>) -> f32 {
    let b = bitcast<vec4<f32>>((vec4<u32>(w, w, w >> 16u, w >> 16u) & BYTE_MASKS) | BYTE_MAGIC) - bias;
    return fma(b.w, xv.w, fma(b.z, xv.z, fma(b.y, xv.y, b.x * xv.x)));
}

// Leading vec4s of a row whose four words hold 4 columns < k each (see int4_gemv's full_vec4s).
fn full_vec4s(vec4s: u32) -> u32 {
    let lastv = ((vec4s - 1u) >> 5u) << 5u;
    let s = vec4s - lastv;
    let lastw = lastv * 4u;
    let kw = p.k / 4u;
    let lim = select(0u, kw - lastw - 3u * s, kw > lastw + 3u * s);
    return lastv + min(lim, s);
}

// ROWS rows' codes (XOR applied) at one vec4.
struct Slab {
    c0: vec4<u32>,
    c1: vec4<u32>,
    c2: vec4<u32>,
    c3: vec4<u32>,
}

fn slab_load(rows: vec4<u32>, v: u32) -> Slab {
    let m = vec4<u32>(p.xor_mask);
    var sl: Slab;
    sl.c0 = codes[rows.x * p.row_vec4s + v] ^ m;
    if (ROWS > 1u) {
        sl.c1 = codes[rows.y * p.row_vec4s + v] ^ m;
    }
    if (ROWS > 2u) {
        sl.c2 = codes[rows.z * p.row_vec4s + v] ^ m;
    }
    if (ROWS > 3u) {
        sl.c3 = codes[rows.w * p.row_vec4s + v] ^ m;
    }
    return sl;
}

fn vec4_dot(c: vec4<u32>, bias: vec4<f32>, y0: vec4<f32>, y1: vec4<f32>, y2: vec4<f32>, y3: vec4<f32>) -> f32 {
    return byte_dot(c.x, bias, y0) + byte_dot(c.y, bias, y1) + byte_dot(c.z, bias, y2) + byte_dot(c.w, bias, y3);
}

// Partial dots of ROWS rows at vec4 v (xyzw: rows) and, in *xsum, the sum of its x.
fn slab_math(sl: Slab, v: u32, bias: vec4<f32>, xsum: ptr<function, f32>) -> vec4<f32> {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    let x0 = x[w0];
    let x1 = x[w0 + s];
    let x2 = x[w0 + 2u * s];
    let x3 = x[w0 + 3u * s];
    *xsum += dot(x0 + x1 + x2 + x3, vec4<f32>(1.0));
    var a = vec4<f32>(0.0);
    a.x = vec4_dot(sl.c0, bias, x0, x1, x2, x3);
    if (ROWS > 1u) {
        a.y = vec4_dot(sl.c1, bias, x0, x1, x2, x3);
    }
    if (ROWS > 2u) {
        a.z = vec4_dot(sl.c2, bias, x0, x1, x2, x3);
    }
    if (ROWS > 3u) {
        a.w = vec4_dot(sl.c3, bias, x0, x1, x2, x3);
    }
    return a;
}

// Column by column (partial words): sum over the valid columns of word wi of (q - offset) * x.
fn word_slow(wi: u32, w: u32) -> f32 {
    var a = 0.0;
    for (var e = 0u; e < 4u; e++) {
        let c = wi * 4u + e;
        if (c < p.k) {
            a += (f32((w >> (8u * e)) & 255u) - p.zero_offset) * x[c >> 2u][c & 3u];
        }
    }
    return a;
}

fn x_slow(wi: u32) -> f32 {
    var a = 0.0;
    for (var e = 0u; e < 4u; e++) {
        let c = wi * 4u + e;
        if (c < p.k) {
            a += x[c >> 2u][c & 3u];
        }
    }
    return a;
}

fn vec4_slow(c: vec4<u32>, w0: u32, s: u32) -> f32 {
    return word_slow(w0, c.x) + word_slow(w0 + s, c.y) + word_slow(w0 + 2u * s, c.z) + word_slow(w0 + 3u * s, c.w);
}

fn slab_slow(sl: Slab, v: u32, xsum: ptr<function, f32>) -> vec4<f32> {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    *xsum += x_slow(w0) + x_slow(w0 + s) + x_slow(w0 + 2u * s) + x_slow(w0 + 3u * s);
    var a = vec4<f32>(0.0);
    a.x = vec4_slow(sl.c0, w0, s);
    if (ROWS > 1u) {
        a.y = vec4_slow(sl.c1, w0, s);
    }
    if (ROWS > 2u) {
        a.z = vec4_slow(sl.c2, w0, s);
    }
    if (ROWS > 3u) {
        a.w = vec4_slow(sl.c3, w0, s);
    }
    return a;
}

fn team_main(t: Team) {
    // y = scale * (sum_c (q - offset) x_c - zero * sum_c x_c): each lane subtracts zero * (its
    // share of sum_c x_c) before the team sum.
    let vec4s = p.row_vec4s;
    let full = full_vec4s(vec4s);
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let step = t.lanes * UNROLL;
    let bias = vec4<f32>(8388608.0, 32768.0, 8388608.0, 32768.0) + vec4<f32>(p.zero_offset);
    for (var base = 0u; base < blocks; base += t.count) {
        let rb = base + t.id;
        let live = rb < blocks;
        let rows = min(vec4<u32>(rb * ROWS) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n - 1u));
        var acc = vec4<f32>(0.0);
        var xsum = 0.0;
        var v0 = 0u;
        if (live) {
            for (; v0 + step <= full; v0 += step) {
                let v = v0 + t.lane;
                let sa = slab_load(rows, v);
                var sb: Slab;
                var sc: Slab;
                var sd: Slab;
                if (UNROLL > 1u) {
                    sb = slab_load(rows, v + t.lanes);
                }
                if (UNROLL > 2u) {
                    sc = slab_load(rows, v + 2u * t.lanes);
                    sd = slab_load(rows, v + 3u * t.lanes);
                }
                acc += slab_math(sa, v, bias, &xsum);
                if (UNROLL > 1u) {
                    acc += slab_math(sb, v + t.lanes, bias, &xsum);
                }
                if (UNROLL > 2u) {
                    acc += slab_math(sc, v + 2u * t.lanes, bias, &xsum);
                    acc += slab_math(sd, v + 3u * t.lanes, bias, &xsum);
                }
            }
            for (var v = v0 + t.lane; v < vec4s; v += t.lanes) {
                if (v < full) {
                    acc += slab_math(slab_load(rows, v), v, bias, &xsum);
                } else {
                    acc += slab_slow(slab_load(rows, v), v, &xsum);
                }
            }
        }
        let zi = select(vec4<u32>(0u), rows, p.per_row != 0u);
        acc -= vec4<f32>(zeros[zi.x], zeros[zi.y], zeros[zi.z], zeros[zi.w]) * xsum;
        let tot = team_sum(acc);
        if (live && t.lane == 0u) {
            let r0 = rb * ROWS;
            y[r0] = scales[zi.x] * tot.x;
            if (ROWS > 1u && r0 + 1u < p.n) {
                y[r0 + 1u] = scales[zi.y] * tot.y;
            }
            if (ROWS > 2u && r0 + 2u < p.n) {
                y[r0 + 2u] = scales[zi.z] * tot.z;
            }
            if (ROWS > 3u && r0 + 3u < p.n) {
                y[r0 + 3u] = scales[zi.w] * tot.w;
            }
        }
    }
}
