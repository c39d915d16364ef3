// INT4 group-quantised GEMV: y[r] = sum_c (q[r,c] - zero[r,g]) * scale[r,g] * x[c], g = c / group_size.
// Included after a team file (team_portable / team_subgroup) and interleave.wgsl. One team (a
// workgroup) computes ROWS rows, so each x value loaded serves ROWS rows; its lanes stride over
// the rows' vec4s of codes (16-byte loads, interleaved layout: x loads coalesced too).
// Signed codes are made unsigned by XOR 0x8 per nibble and a zero offset of 8
// ((code ^ 8) - 8 is the two's-complement value): one code path for both modes.

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_vec4s: u32,    // row stride of `codes` in vec4<u32> (32 codes each)
    xor_mask: u32,     // 0x88888888 signed, 0 unsigned
    zero_offset: f32,  // 8 signed, 0 unsigned
    has_zeros: u32,
}

override ROWS: u32 = 4u;       // rows per team, 1..8
override GMODE: u32 = 0u;      // 0: group_size % 8 == 0 (a word never straddles groups); 1: any
override GSHIFT: u32 = 99u;    // log2(group_size / 8) when that is a power of two, else 99

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

fn zero_at(gi: u32) -> f32 {
    if (p.has_zeros != 0u) {
        return zeros[gi] + p.zero_offset;
    }
    return p.zero_offset;
}

// Group of natural word w (GMODE 0).
fn word_group(w: u32) -> u32 {
    if (GSHIFT < 32u) {
        return w >> (GSHIFT & 31u);
    }
    return (w * 8u) / p.group_size;
}

// Dequantisation by masks alone: nibble i of a 16-bit half, masked in place and OR-ed into the
// mantissa of 2^23, is the float 2^23 + 16^i * code (exact). Subtracting bias = 2^23 + 16^i * offset
// (exact) leaves 16^i * (code - offset); the x values it multiplies were pre-scaled by 16^-i
// (exact), so each weight costs one LOP3, one FADD and one FFMA.
const NIB_MASKS = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const NIB_XSCALE = vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625);

fn half_dot(h: u32, xs: vec4<f32>, bias: vec4<f32>) -> f32 {
    return dot(bitcast<vec4<f32>>((vec4<u32>(h) & NIB_MASKS) | vec4<u32>(0x4b000000u)) - bias, xs);
}

// sum_e (q_e - zero) * x_e over one word with x pre-scaled (xa: columns 0-3, xb: 4-7).
fn word_q(w: u32, xa: vec4<f32>, xb: vec4<f32>, bias: vec4<f32>) -> f32 {
    return half_dot(w, xa, bias) + half_dot(w >> 16u, xb, bias);
}

// Column-by-column contribution of natural word wi (any group size, partial words).
fn word_slow(row: u32, wi: u32, w: u32) -> f32 {
    var a = 0.0;
    for (var e = 0u; e < 8u; e++) {
        let c = wi * 8u + e;
        if (c < p.k) {
            let gi = row * p.num_groups + c / p.group_size;
            let q = f32((w >> (4u * e)) & 15u);
            a += scales[gi] * (q - zero_at(gi)) * x[c >> 2u][c & 3u];
        }
    }
    return a;
}

fn team_main(t: Team) {
    let vec4s = p.row_vec4s;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let biasv = vec4<f32>(8388608.0) + p.zero_offset * vec4<f32>(1.0, 16.0, 256.0, 4096.0);
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var v = t.lane; v < vec4s; v += t.lanes) {
            let w0 = il_word0(v);
            let s = il_stride(v, vec4s);
            if (GMODE == 0u && (w0 + 3u * s) * 8u + 8u <= p.k) {
                let xa0 = x[2u * w0] * NIB_XSCALE;
                let xb0 = x[2u * w0 + 1u] * NIB_XSCALE;
                let xa1 = x[2u * (w0 + s)] * NIB_XSCALE;
                let xb1 = x[2u * (w0 + s) + 1u] * NIB_XSCALE;
                let xa2 = x[2u * (w0 + 2u * s)] * NIB_XSCALE;
                let xb2 = x[2u * (w0 + 2u * s) + 1u] * NIB_XSCALE;
                let xa3 = x[2u * (w0 + 3u * s)] * NIB_XSCALE;
                let xb3 = x[2u * (w0 + 3u * s) + 1u] * NIB_XSCALE;
                // Per-word sums of x for the zero points (undo the pre-scaling).
                var xsum = vec4<f32>(0.0);
                if (p.has_zeros != 0u) {
                    let un = vec4<f32>(1.0, 16.0, 256.0, 4096.0);
                    xsum = vec4<f32>(dot(xa0 + xb0, un), dot(xa1 + xb1, un), dot(xa2 + xb2, un), dot(xa3 + xb3, un));
                }
                let g = vec4<u32>(word_group(w0), word_group(w0 + s), word_group(w0 + 2u * s), word_group(w0 + 3u * s));
                for (var r = 0u; r < ROWS; r++) {
                    let row = row0 + r;
                    if (row < p.n) {
                        let w = codes[row * vec4s + v] ^ vec4<u32>(p.xor_mask);
                        let gi = vec4<u32>(row * p.num_groups) + g;
                        var d = vec4<f32>(word_q(w.x, xa0, xb0, biasv), word_q(w.y, xa1, xb1, biasv),
                                          word_q(w.z, xa2, xb2, biasv), word_q(w.w, xa3, xb3, biasv));
                        if (p.has_zeros != 0u) {
                            d -= vec4<f32>(zeros[gi.x], zeros[gi.y], zeros[gi.z], zeros[gi.w]) * xsum;
                        }
                        acc[r] += dot(vec4<f32>(scales[gi.x], scales[gi.y], scales[gi.z], scales[gi.w]), d);
                    }
                }
            } else {
                for (var r = 0u; r < ROWS; r++) {
                    let row = row0 + r;
                    if (row < p.n) {
                        let w = codes[row * vec4s + v] ^ vec4<u32>(p.xor_mask);
                        acc[r] += word_slow(row, w0, w.x) + word_slow(row, w0 + s, w.y)
                                + word_slow(row, w0 + 2u * s, w.z) + word_slow(row, w0 + 3u * s, w.w);
                    }
                }
            }
        }
        team_reduce(&acc, ROWS);
        if (t.lane == 0u) {
            for (var r = 0u; r < ROWS; r++) {
                if (row0 + r < p.n) {
                    y[row0 + r] = acc[r];
                }
            }
        }
    }
}
