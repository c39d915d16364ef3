// Int8 activation records (spec: src/reference/q8.rs): the scale and codes of a block of 32
// values and the words of both record orders, for the kernels that write Q8 activations: the
// quantiser (q8_quantize.wgsl) and the decode attention's merge that quantises its own output
// (attn_merge_q8.wgsl). Up to 8 blocks (256 values) per workgroup, in workgroup memory.
// d = absmax * fl(1/127); q = clamp(round-half-away(x / d), -127, 127), computed exactly: an
// estimate m = floor(|x| * (1/d)) (any precision: an error below 1/2 is corrected next) and one
// exact threshold test 2|x| >= (2m + 1) d through the split d = hi + lo (hi keeps 16 significant
// bits, lo the other 8), so (2m+1)*hi and (2m+1)*lo are exact f32 products (2m+1 has at most 8
// bits) and 2|x| - (2m+1)*hi is exact wherever the comparison is close (Sterbenz). Only correctly
// rounded f32 operations feed the outputs, so GPU and CPU agree bit-for-bit (finite, normal
// inputs; a GPU that flushes subnormal scales may differ there). A block holding a NaN or an
// infinity (found from the bits: max() may drop a NaN) gets codes 0 and the scale NaN, so every
// product it enters is NaN, as in the f32 path. A block's largest magnitude is taken as bits
// (sign cleared): for non-negative floats the bits order as the values do, and an infinity or a
// NaN sorts above every finite value, so one integer max finds it and whether it is finite.
// Records:
//   INT4 order, per 8-column word: vec4<u32>(i8x4 of cols 0,2,4,6, i8x4 of cols 1,3,5,7, bits(d),
//       bits(fl(d * sum of the 8 codes))): the order of INT4 nibbles under masks 0x0f0f0f0f.
//   Q4_K order (k % 256 == 0): struct of arrays over quads qd = 4 * super-block + u: vec4 t at
//       t * quads + qd: t = 0..3 the i8x4 words of (sub-block 2t, positions 4u..4u+3),
//       (2t, 4u+16..4u+19), (2t+1, 4u..), (2t+1, 4u+16..); t = 4, 5: d of sub-blocks 0..3, 4..7;
//       t = 6, 7: fl(d_j * sum of the quad's 8 codes of sub-block j): the order of Q4_K nibbles.

const INV127: f32 = 0.0078740157480314960629921259842519685; // rounds to fl(1/127)
const NAN_BITS: u32 = 0x7fc00000u;

// The workgroup's codes (block j at 32j..32j+31), the blocks' scales, and per block whether a
// value is NaN or infinite.
var<workgroup> wq: array<i32, 256>;
var<workgroup> wd: array<f32, 8>;
var<workgroup> wdbad: array<u32, 8>;

// A block's scale from its largest magnitude's bits `mb`, and what its codes need.
struct Q8Scale {
    d: f32,
    inv: f32,
    hi: f32,
    lo: f32,
    // Some value is NaN or infinite.
    bad: bool,
    // Every code is 0: a zero block (the threshold test 0 >= 0 would round up), or a bad one.
    zero: bool,
}

fn q8_scale(mb: u32) -> Q8Scale {
    let bad = mb >= 0x7f800000u;
    let d = bitcast<f32>(mb) * INV127;
    let inv = select(0.0, 1.0 / d, d > 0.0);
    let hi = bitcast<f32>(bitcast<u32>(d) & 0xffffff00u);
    let lo = d - hi;
    return Q8Scale(d, inv, hi, lo, bad, d == 0.0 || bad);
}

// The code of v in a block of scale s.
fn q8_code(v: f32, s: Q8Scale) -> i32 {
    let ax = abs(v);
    let m = min(floor(ax * s.inv), 127.0);
    let kf = 2.0 * m + 1.0;
    let up = select(0.0, 1.0, 2.0 * ax - kf * s.hi >= kf * s.lo);
    let r = i32(min(m + up, 127.0));
    return select(select(r, -r, v < 0.0), 0, s.zero);
}

// Block j's scale into wd / wdbad.
fn q8_set_block(j: u32, s: Q8Scale) {
    wd[j] = s.d;
    wdbad[j] = select(0u, 1u, s.bad);
}

// The bits of a scale (or scaled sum), NaN when its block is non-finite.
fn nan_if(bits: u32, nan: bool) -> u32 {
    return select(bits, NAN_BITS, nan);
}

fn pack(a: i32, b: i32, c: i32, e: i32) -> u32 {
    return (u32(a) & 0xffu) | ((u32(b) & 0xffu) << 8u) | ((u32(c) & 0xffu) << 16u) | ((u32(e) & 0xffu) << 24u);
}

// Codes i, i+1, i+2, i+3 as one word.
fn word4(i: u32) -> u32 {
    return pack(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
}

fn sum4(i: u32) -> i32 {
    return wq[i] + wq[i + 1u] + wq[i + 2u] + wq[i + 3u];
}

// The INT4-order record of the 8 codes at wq[c..c+8], which lie in block c / 32.
fn q8_int4_record(c: u32) -> vec4<u32> {
    let j = c / 32u;
    let s = sum4(c) + sum4(c + 4u);
    let dw = wd[j];
    let nan = wdbad[j] != 0u;
    return vec4<u32>(pack(wq[c], wq[c + 2u], wq[c + 4u], wq[c + 6u]), pack(wq[c + 1u], wq[c + 3u], wq[c + 5u], wq[c + 7u]),
                     nan_if(bitcast<u32>(dw), nan), nan_if(bitcast<u32>(dw * f32(s)), nan));
}

// Component c of the Q4_K-order vec4 t of a quad comes from sub-block s (within the super-block)
// as word kind k: (s, k); k = 0, 1: the codes at positions 4u.., 4u+16..; 2: the scale; 3: the
// quad's scaled sum.
fn q8_q4k_source(t: u32, c: u32) -> vec2<u32> {
    if (t < 4u) {
        return vec2<u32>(2u * t + c / 2u, c % 2u);
    }
    return vec2<u32>(4u * (t % 2u) + c, 2u + (t - 4u) / 2u);
}

// Word kind k of quad u of the block whose codes are wq[32j..32j+31] (see q8_q4k_source).
fn q8_q4k_word(j: u32, u: u32, k: u32) -> u32 {
    let o = 32u * j + 4u * u;
    let nan = wdbad[j] != 0u;
    if (k < 2u) {
        return word4(o + 16u * k);
    }
    if (k == 2u) {
        return nan_if(bitcast<u32>(wd[j]), nan);
    }
    return nan_if(bitcast<u32>(wd[j] * f32(sum4(o) + sum4(o + 16u))), nan);
}
