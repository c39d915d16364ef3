// Quantise f32 activations to int8 blocks of 32 (spec: src/reference/q8.rs). A workgroup of 64
// takes 256 columns (8 blocks; one Q4_K super-block), one vec4 per invocation; block maxima and
// codes go through workgroup memory, then 32 invocations write the INT4-order records and 32 the
// Q4_K-order records, one vec4 each.
// d = absmax * fl(1/127); q = clamp(round-half-away(x / d), -127, 127), computed exactly: an
// estimate m = floor(|x| * (1/d)) (any precision: an error below 1/2 is corrected next) and one
// exact threshold test 2|x| >= (2m + 1) d through the split d = hi + lo (hi keeps 16 significant
// bits, lo the other 8), so (2m+1)*hi and (2m+1)*lo are exact f32 products (2m+1 has at most 8
// bits) and 2|x| - (2m+1)*hi is exact wherever the comparison is close (Sterbenz). Only correctly
// rounded f32 operations feed the outputs, so GPU and CPU agree bit-for-bit (finite, normal
// inputs; a GPU that flushes subnormal scales may differ there). A block holding a NaN or an
// infinity (found from the bits: max() may drop a NaN) gets codes 0 and the scale NaN, so every
// product it enters is NaN, as in the f32 path.
// Outputs:
//   x4: per 8-column word w, vec4<u32>(i8x4 of cols 0,2,4,6, i8x4 of cols 1,3,5,7, bits(d),
//       bits(fl(d * sum of the 8 codes))): the order of INT4 nibbles under masks 0x0f0f0f0f.
//   xk (when HAS_Q4K != 0, k % 256 == 0): struct of arrays over quads qd = 4 * blk + u: vec4 t at
//       t * quads + qd: t = 0..3 the i8x4 words of (sub-block 2t, positions 4u..4u+3),
//       (2t, 4u+16..4u+19), (2t+1, 4u..), (2t+1, 4u+16..); t = 4, 5: d of sub-blocks 0..3, 4..7;
//       t = 6, 7: fl(d_j * sum of the quad's 8 codes of sub-block j): the order of Q4_K nibbles.
// Entry points: main quantises x; main_norm quantises the RMSNorm of x (spec:
// q8::reference_rmsnorm), xn = x * inverseSqrt(mean(x^2) + eps) * w as elementwise_rmsnorm
// computes it, and also writes xn. Every workgroup of main_norm reduces the sum of squares of the
// whole x itself (x is a few KiB, read from cache), so one dispatch does both.
// main_post: a post-norm's residual add and the next RMSNorm (spec: q8::post_norm), f32 as
// elementwise_rmsnorm computes them: xo = x + a * inverseSqrt(mean(a^2) + eps) * pw (the new
// residual, into another buffer than x: every workgroup reads all of x), xn = the RMSNorm of xo
// with nw, and with QUANT its quantisation. Every workgroup reduces both sums of squares over the
// whole row itself (the second over the new residual it recomputes), then writes its 256 columns.
// main_merge: split-K decode attention's log-sum-exp merge (spec: attn_merge.wgsl) of the partials
// x = o_c [heads * nchunks, d] (not normalised) and nw = the pairs (m_c, l_c) [heads * nchunks]
// (running max and sum, log2 domain; two per vec4, the buffer holding an even number of pairs)
// into xn [heads * d] (M = max m_c, L = sum l_c 2^(m_c - M),
// out = sum o_c 2^(m_c - M) / L), then its quantisation: one dispatch where a merge and a
// quantisation would be two. Each invocation merges its 4 columns (d % 32 == 0: a block never
// straddles two heads), U partial sums over every U-th chunk (U loads in flight), then added.

struct Params {
    blocks: u32,   // k / 32
    quads: u32,    // k / 64
    has_q4k: u32,
    eps: f32,      // main_norm only
    nchunks: u32,  // main_merge only
    d: u32,        // main_merge only
    _p0: u32,
    _p1: u32,
}

const INV127: f32 = 0.0078740157480314960629921259842519685; // rounds to fl(1/127)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> x4: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> xk: array<vec4<u32>>;
// main_norm only.
@group(0) @binding(4) var<storage, read> nw: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> xn: array<vec4<f32>>;
// main_post only.
@group(0) @binding(6) var<storage, read> pa: array<vec4<f32>>;         // the block's output
@group(0) @binding(7) var<storage, read> pw: array<vec4<f32>>;         // the post-norm weight
@group(0) @binding(8) var<storage, read_write> xo: array<vec4<f32>>;   // the residual after the add

// main_post: quantise xn (else only the f32 outputs).
override QUANT: bool = true;

var<workgroup> wmax: array<f32, 64>;  // sums of squares (sum64)
// Per invocation: the largest magnitude of its 4 values as bits (sign cleared): for non-negative
// floats the bits order as the values do, and an infinity or a NaN sorts above every finite
// value, so one integer max finds a block's maximum and whether it is finite.
var<workgroup> wmag: array<u32, 64>;
var<workgroup> wq: array<i32, 256>;
var<workgroup> wd: array<f32, 8>;
var<workgroup> wdbad: array<u32, 8>;  // per block: some value is NaN or infinite

fn code(v: f32, inv: f32, hi: f32, lo: f32) -> i32 {
    let ax = abs(v);
    let m = min(floor(ax * inv), 127.0);
    let kf = 2.0 * m + 1.0;
    let up = select(0.0, 1.0, 2.0 * ax - kf * hi >= kf * lo);
    let r = i32(min(m + up, 127.0));
    return select(r, -r, v < 0.0);
}

const NAN_BITS: u32 = 0x7fc00000u;

// The bits of a scale (or scaled sum), NaN when its block is non-finite.
fn nan_if(bits: u32, nan: bool) -> u32 {
    return select(bits, NAN_BITS, nan);
}

// nan_if for the scales of blocks j..j+3.
fn nan_if4(r: vec4<u32>, j: u32) -> vec4<u32> {
    return select(r, vec4<u32>(NAN_BITS), vec4<u32>(wdbad[j], wdbad[j + 1u], wdbad[j + 2u], wdbad[j + 3u]) != vec4<u32>(0u));
}

fn pack(a: i32, b: i32, c: i32, e: i32) -> u32 {
    return (u32(a) & 0xffu) | ((u32(b) & 0xffu) << 8u) | ((u32(c) & 0xffu) << 16u) | ((u32(e) & 0xffu) << 24u);
}

// Codes i, i+1, i+2, i+3 of the workgroup's 256 as one word.
fn word4(i: u32) -> u32 {
    return pack(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
}

fn sum4(i: u32) -> i32 {
    return wq[i] + wq[i + 1u] + wq[i + 2u] + wq[i + 3u];
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let sb = wid.x + wid.y * nwg.x;   // 256-column chunk
    var v = vec4<f32>(0.0);
    if (sb * 8u + t / 8u < p.blocks) {
        v = x[sb * 64u + t];
    }
    quantize_chunk(sb, t, v);
}

@compute @workgroup_size(64)
fn main_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) t: u32) {
    let sb = wid.x + wid.y * nwg.x;
    let k4 = p.blocks * 8u;
    var ss = 0.0;
    for (var i = t; i < k4; i += 64u) {
        ss = fma4(x[i], ss);
    }
    let inv = inverseSqrt(sum64(ss, t) / f32(p.blocks * 32u) + p.eps);
    var v = vec4<f32>(0.0);
    let i = sb * 64u + t;
    if (sb * 8u + t / 8u < p.blocks) {
        v = x[i] * inv * nw[i];
        xn[i] = v;
    }
    quantize_chunk(sb, t, v);
}

@compute @workgroup_size(64)
fn main_post(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) t: u32) {
    let sb = wid.x + wid.y * nwg.x;
    let k4 = p.blocks * 8u;
    let n = f32(p.blocks * 32u);
    var ss = 0.0;
    for (var i = t; i < k4; i += 64u) {
        ss = fma4(pa[i], ss);
    }
    let inv_a = inverseSqrt(sum64(ss, t) / n + p.eps);
    var ss2 = 0.0;
    for (var i = t; i < k4; i += 64u) {
        ss2 = fma4(x[i] + pa[i] * inv_a * pw[i], ss2);
    }
    let inv = inverseSqrt(sum64(ss2, t) / n + p.eps);
    var v = vec4<f32>(0.0);
    let i = sb * 64u + t;
    if (sb * 8u + t / 8u < p.blocks) {
        let r = x[i] + pa[i] * inv_a * pw[i];
        xo[i] = r;
        v = r * inv * nw[i];
        xn[i] = v;
    }
    if (QUANT) {
        quantize_chunk(sb, t, v);
    }
}

// Chunks a main_merge invocation keeps in flight.
const MERGE_U: u32 = 8u;

// Pair i of main_merge's (m_c, l_c).
fn ml(i: u32) -> vec2<f32> {
    let q = nw[i >> 1u];
    return select(q.xy, q.zw, (i & 1u) != 0u);
}

@compute @workgroup_size(64)
fn main_merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) t: u32) {
    let sb = wid.x + wid.y * nwg.x;
    var v = vec4<f32>(0.0);
    if (sb * 8u + t / 8u < p.blocks) {
        let col = sb * 256u + 4u * t;
        let h = col / p.d;
        let n = p.nchunks;
        let s0 = h * n;
        // The partial row of chunk c holds this invocation's columns at vec4 (s0 + c) * d4 + e4.
        let d4 = p.d / 4u;
        let e4 = (col - h * p.d) / 4u;
        var m = -3.0e38;
        for (var c = 0u; c < n; c++) {
            m = max(m, ml(s0 + c).x);
        }
        var l = 0.0;
        var acc: array<vec4<f32>, MERGE_U>;
        for (var u = 0u; u < MERGE_U; u++) {
            acc[u] = vec4<f32>(0.0);
        }
        var c = 0u;
        for (; c + MERGE_U <= n; c += MERGE_U) {
            for (var u = 0u; u < MERGE_U; u++) {
                let mc = ml(s0 + c + u);
                let wc = exp2(mc.x - m);
                l += mc.y * wc;
                acc[u] += x[(s0 + c + u) * d4 + e4] * wc;
            }
        }
        for (; c < n; c++) {
            let mc = ml(s0 + c);
            let wc = exp2(mc.x - m);
            l += mc.y * wc;
            acc[0] += x[(s0 + c) * d4 + e4] * wc;
        }
        var o = vec4<f32>(0.0);
        for (var u = 0u; u < MERGE_U; u++) {
            o += acc[u];
        }
        v = o * (1.0 / l);
        xn[col / 4u] = v;
    }
    quantize_chunk(sb, t, v);
}

// s + the squares of u's four values, one fma each.
fn fma4(u: vec4<f32>, s: f32) -> f32 {
    return fma(u.w, u.w, fma(u.z, u.z, fma(u.y, u.y, fma(u.x, u.x, s))));
}

// The sum of v over the workgroup's 64 invocations (t: the invocation), returned to each; called
// in uniform control flow. wmax is free again when it returns.
fn sum64(v: f32, t: u32) -> f32 {
    wmax[t] = v;
    workgroupBarrier();
    for (var h = 32u; h > 0u; h = h / 2u) {
        if (t < h) {
            wmax[t] = wmax[t] + wmax[t + h];
        }
        workgroupBarrier();
    }
    let s = wmax[0];
    workgroupBarrier();
    return s;
}

// Quantise invocation t's 4 values v of 256-column chunk sb (called in uniform control flow).
fn quantize_chunk(sb: u32, t: u32, v: vec4<f32>) {
    let lb = t / 8u;                   // block within the chunk
    let live = sb * 8u < p.blocks;     // workgroup-uniform
    let mag = bitcast<vec4<u32>>(v) & vec4<u32>(0x7fffffffu);
    wmag[t] = max(max(mag.x, mag.y), max(mag.z, mag.w));
    workgroupBarrier();
    var mb = 0u;
    for (var i = 0u; i < 8u; i++) {
        mb = max(mb, wmag[8u * lb + i]);
    }
    let bad = select(0u, 1u, mb >= 0x7f800000u);
    let d = bitcast<f32>(mb) * INV127;
    let inv = select(0.0, 1.0 / d, d > 0.0);
    let hi = bitcast<f32>(bitcast<u32>(d) & 0xffffff00u);
    let lo = d - hi;
    // A zero block: codes 0 (the threshold test 0 >= 0 would round up); a non-finite one too.
    let z = d == 0.0 || bad != 0u;
    wq[4u * t] = select(code(v.x, inv, hi, lo), 0, z);
    wq[4u * t + 1u] = select(code(v.y, inv, hi, lo), 0, z);
    wq[4u * t + 2u] = select(code(v.z, inv, hi, lo), 0, z);
    wq[4u * t + 3u] = select(code(v.w, inv, hi, lo), 0, z);
    if (t % 8u == 0u) {
        wd[lb] = d;
        wdbad[lb] = bad;
    }
    workgroupBarrier();
    if (!live) {
        return;
    }
    if (t < 32u) {
        // INT4 order: word t of the chunk (columns 8t..8t+7).
        let c = 8u * t;
        if (sb * 8u + t / 4u < p.blocks) {
            let s = sum4(c) + sum4(c + 4u);
            let dw = wd[t / 4u];
            let nan = wdbad[t / 4u] != 0u;
            x4[sb * 32u + t] = vec4<u32>(pack(wq[c], wq[c + 2u], wq[c + 4u], wq[c + 6u]), pack(wq[c + 1u], wq[c + 3u], wq[c + 5u], wq[c + 7u]),
                                         nan_if(bitcast<u32>(dw), nan), nan_if(bitcast<u32>(dw * f32(s)), nan));
        }
    } else if (p.has_q4k != 0u) {
        // Q4_K order: quad u of this super-block, vec4 tt of its record.
        let i = t - 32u;
        let u = i / 8u;
        let tt = i % 8u;
        let a = 4u * u;
        var r: vec4<u32>;
        if (tt < 4u) {
            let j0 = 32u * (2u * tt);
            let j1 = j0 + 32u;
            r = vec4<u32>(word4(j0 + a), word4(j0 + a + 16u), word4(j1 + a), word4(j1 + a + 16u));
        } else if (tt < 6u) {
            let j = 4u * (tt - 4u);
            r = bitcast<vec4<u32>>(vec4<f32>(wd[j], wd[j + 1u], wd[j + 2u], wd[j + 3u]));
            r = nan_if4(r, j);
        } else {
            let j = 4u * (tt - 6u);
            var f: vec4<f32>;
            for (var e = 0u; e < 4u; e++) {
                let o = 32u * (j + e) + a;
                f[e] = wd[j + e] * f32(sum4(o) + sum4(o + 16u));
            }
            r = nan_if4(bitcast<vec4<u32>>(f), j);
        }
        xk[tt * p.quads + 4u * sb + u] = r;
    }
}
