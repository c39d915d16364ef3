// INT8 GEMV: y[r] = sum_c (q[r,c] - zero) * scale * x[c], scale/zero per tensor or per row.
// Included after a team file and interleave.wgsl; same structure as int4_gemv (4 codes per word).
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

override ROWS: u32 = 4u;  // rows per team, 1..8 (slot ROWS of the accumulators holds sum(x))

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

// dot(q - offset, x) for the 4 bytes of w by masks alone: bytes 0/1 of a 16-bit half, masked
// in place and OR-ed into the mantissa of 2^23, are 2^23 + 256^i * byte (exact); bias =
// 2^23 + 256^i * offset; x comes pre-scaled by 256^-i (exact). xv = x of bytes (0, 1, 2, 3)
// pre-scaled as (x0, x1/256, x2, x3/256).
const BYTE_MASKS = vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
const BYTE_XSCALE = vec4<f32>(1.0, 0.00390625, 1.0, 0.00390625);

fn byte_dot(w: u32, bias: vec4<f32>, xv: vec4<f32>) -> f32 {
    let b = bitcast<vec4<f32>>((vec4<u32>(w, w, w >> 16u, w >> 16u) & BYTE_MASKS) | vec4<u32>(0x4b000000u));
    return dot(b - bias, xv);
}

// Column by column (partial words): adds (q - offset) * x to the return value and x to *xsum.
fn byte_slow(wi: u32, w: u32, xsum: ptr<function, f32>, count_x: bool) -> f32 {
    var a = 0.0;
    for (var e = 0u; e < 4u; e++) {
        let c = wi * 4u + e;
        if (c < p.k) {
            let xv = x[c >> 2u][c & 3u];
            a += (f32((w >> (8u * e)) & 255u) - p.zero_offset) * xv;
            if (count_x) {
                *xsum += xv;
            }
        }
    }
    return a;
}

fn team_main(t: Team) {
    // y = scale * (sum_c (q - offset) x_c - zero * sum_c x_c): the zero point is applied once per
    // row through the row sum of x, reduced alongside the rows (slot ROWS of acc).
    let vec4s = p.row_vec4s;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let biasv = vec4<f32>(8388608.0) + p.zero_offset * vec4<f32>(1.0, 256.0, 1.0, 256.0);
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        var xsum = 0.0;
        for (var v = t.lane; v < vec4s; v += t.lanes) {
            let w0 = il_word0(v);
            let s = il_stride(v, vec4s);
            if ((w0 + 3u * s) * 4u + 4u <= p.k) {
                let x0 = x[w0];
                let x1 = x[w0 + s];
                let x2 = x[w0 + 2u * s];
                let x3 = x[w0 + 3u * s];
                xsum += dot(x0 + x1 + x2 + x3, vec4<f32>(1.0));
                let y0 = x0 * BYTE_XSCALE;
                let y1 = x1 * BYTE_XSCALE;
                let y2 = x2 * BYTE_XSCALE;
                let y3 = x3 * BYTE_XSCALE;
                for (var r = 0u; r < ROWS; r++) {
                    let row = row0 + r;
                    if (row < p.n) {
                        let w = codes[row * vec4s + v] ^ vec4<u32>(p.xor_mask);
                        acc[r] += byte_dot(w.x, biasv, y0) + byte_dot(w.y, biasv, y1) + byte_dot(w.z, biasv, y2) + byte_dot(w.w, biasv, y3);
                    }
                }
            } else {
                for (var r = 0u; r < ROWS; r++) {
                    let row = row0 + r;
                    // Rows past n still walk the columns once (r == 0 always exists) for xsum.
                    if (row < p.n) {
                        let w = codes[row * vec4s + v] ^ vec4<u32>(p.xor_mask);
                        let first = r == 0u;
                        acc[r] += byte_slow(w0, w.x, &xsum, first) + byte_slow(w0 + s, w.y, &xsum, first)
                                + byte_slow(w0 + 2u * s, w.z, &xsum, first) + byte_slow(w0 + 3u * s, w.w, &xsum, first);
                    }
                }
            }
        }
        acc[ROWS] = xsum;
        team_reduce(&acc, ROWS + 1u);
        if (t.lane == 0u) {
            for (var r = 0u; r < ROWS; r++) {
                let row = row0 + r;
                if (row < p.n) {
                    let i = select(0u, row, p.per_row != 0u);
                    y[row] = scales[i] * (acc[r] - zeros[i] * acc[ROWS]);
                }
            }
        }
    }
}
