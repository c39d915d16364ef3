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

// Nibbles of w at bit offsets `sh` as floats 2^23 + nibble, built by placing each nibble in the
// mantissa of 2^23 (exact, full-rate integer ops instead of int-to-float conversions).
fn nibbles(w: u32, sh: vec4<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(((vec4<u32>(w) >> sh) & vec4<u32>(15u)) | vec4<u32>(0x4b000000u));
}

// scale * sum_e (q_e - zero) * x_e over word `wi` of row `row` (GMODE 0). `bias` = 2^23 + code
// offset, so nibbles(..) - bias is the exact code value q; the zero point goes through `xs`, the
// sum of the word's 8 x values (shared by all rows).
fn word_dot(row: u32, wi: u32, w: u32, xa: vec4<f32>, xb: vec4<f32>, xs: f32, bias: f32) -> f32 {
    let gi = row * p.num_groups + word_group(wi);
    let lo = nibbles(w, vec4<u32>(0u, 4u, 8u, 12u)) - vec4<f32>(bias);
    let hi = nibbles(w, vec4<u32>(16u, 20u, 24u, 28u)) - vec4<f32>(bias);
    var d = dot(lo, xa) + dot(hi, xb);
    if (p.has_zeros != 0u) {
        d -= zeros[gi] * xs;
    }
    return scales[gi] * d;
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
    let bias = 8388608.0 + p.zero_offset;
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var v = t.lane; v < vec4s; v += t.lanes) {
            let w0 = il_word0(v);
            let s = il_stride(v, vec4s);
            if (GMODE == 0u && (w0 + 3u * s) * 8u + 8u <= p.k) {
                let xa0 = x[2u * w0];
                let xb0 = x[2u * w0 + 1u];
                let xa1 = x[2u * (w0 + s)];
                let xb1 = x[2u * (w0 + s) + 1u];
                let xa2 = x[2u * (w0 + 2u * s)];
                let xb2 = x[2u * (w0 + 2u * s) + 1u];
                let xa3 = x[2u * (w0 + 3u * s)];
                let xb3 = x[2u * (w0 + 3u * s) + 1u];
                let one = vec4<f32>(1.0);
                let xs0 = dot(xa0 + xb0, one);
                let xs1 = dot(xa1 + xb1, one);
                let xs2 = dot(xa2 + xb2, one);
                let xs3 = dot(xa3 + xb3, one);
                for (var r = 0u; r < ROWS; r++) {
                    let row = row0 + r;
                    if (row < p.n) {
                        let w = codes[row * vec4s + v] ^ vec4<u32>(p.xor_mask);
                        acc[r] += word_dot(row, w0, w.x, xa0, xb0, xs0, bias) + word_dot(row, w0 + s, w.y, xa1, xb1, xs1, bias)
                                + word_dot(row, w0 + 2u * s, w.z, xa2, xb2, xs2, bias) + word_dot(row, w0 + 3u * s, w.w, xa3, xb3, xs3, bias);
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
