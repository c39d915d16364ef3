// Quantise f32 activations to int8 blocks of 32 (spec: src/reference/q8.rs). A workgroup of 64
// takes 256 columns (8 blocks; one Q4_K super-block), one vec4 per invocation; block maxima and
// codes go through workgroup memory, then 32 invocations write the INT4-order records and 32 the
// Q4_K-order records, one vec4 each.
// Outputs: x4, the INT4 order, and xk, the Q4_K order (when has_q4k: k % 256 == 0); the block
// arithmetic and both record layouts are q8_records.wgsl's.
// Entry points: main quantises x; main_norm quantises the RMSNorm of x (spec:
// q8::reference_rmsnorm), xn = x * inverseSqrt(mean(x^2) + eps) * w as elementwise_rmsnorm
// computes it, and also writes xn. Every workgroup of main_norm reduces the sum of squares of the
// whole x itself (x is a few KiB, read from cache), so one dispatch does both.
// main_post: a post-norm's residual add and the next RMSNorm (spec: q8::post_norm), f32 as
// elementwise_rmsnorm computes them: xo = x + a * inverseSqrt(mean(a^2) + eps) * pw (the new
// residual, into another buffer than x: every workgroup reads all of x), xn = the RMSNorm of xo
// with nw, and with QUANT its quantisation. Every workgroup reduces both sums of squares over the
// whole row itself (the second over the new residual it recomputes), then writes its 256 columns.

struct Params {
    blocks: u32,   // k / 32
    quads: u32,    // k / 64
    has_q4k: u32,
    eps: f32,      // main_norm only
}

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
// Per invocation: the largest magnitude of its 4 values as bits (sign cleared).
var<workgroup> wmag: array<u32, 64>;

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
    let s = q8_scale(mb);
    wq[4u * t] = q8_code(v.x, s);
    wq[4u * t + 1u] = q8_code(v.y, s);
    wq[4u * t + 2u] = q8_code(v.z, s);
    wq[4u * t + 3u] = q8_code(v.w, s);
    if (t % 8u == 0u) {
        q8_set_block(lb, s);
    }
    workgroupBarrier();
    if (!live) {
        return;
    }
    if (t < 32u) {
        // INT4 order: word t of the chunk (columns 8t..8t+7).
        if (sb * 8u + t / 4u < p.blocks) {
            x4[sb * 32u + t] = q8_int4_record(8u * t);
        }
    } else if (p.has_q4k != 0u) {
        // Q4_K order: quad u of this super-block, vec4 tt of its record.
        let i = t - 32u;
        let u = i / 8u;
        let tt = i % 8u;
        var r: vec4<u32>;
        for (var c = 0u; c < 4u; c++) {
            let sk = q8_q4k_source(tt, c);
            r[c] = q8_q4k_word(sk.x, u, sk.y);
        }
        xk[tt * p.quads + 4u * sb + u] = r;
    }
}
