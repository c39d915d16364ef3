// Q4_K GEMV on int8 activations (q8_quantize.wgsl's xk records; spec: src/reference/q8.rs).
// Prepended: a team file and q4k_common.wgsl. Per block and sub-block j (32 columns = one x
// block with scale dx_j):
//   sum_i (d*sc_j*q_i - dmin*m_j) * dx_j * xq_i = d * sc_j * dx_j * D_j - dmin * m_j * dx_j * S_j,
// D_j = sum_i q_i xq_i (exact integer, dot4I8Packed on the nibbles under 0x0f0f0f0f), S_j = sum_i xq_i
// (precomputed by the quantiser per quad as fl(dx_j * S_{j,u})). Lanes take quads as in
// q4k_gemv.wgsl (quad u of block b = qs vec4s u and u + 4: positions 4u..4u+3 and 4u+16..4u+19 of
// all eight sub-blocks); a quad's x is 8 vec4 (4 of codes, dx, dS) laid out struct-of-arrays so
// lanes on consecutive quads load consecutive 16-byte records. dot4I8Packed is DP4A (OpSDot)
// on Vulkan devices with shaderIntegerDotProduct, a polyfill elsewhere.

struct Params {
    n: u32,
    k: u32,
    nb: u32,     // blocks per row = k / 256
    quads: u32,  // k / 64
}

override ROWS: u32 = 2u;
override UNROLL: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> xk: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const NIB = 0x0f0f0f0fu;

// x of one quad.
struct Xq {
    c0: vec4<u32>,  // sub-blocks 0 (h 0, 1), 1 (h 0, 1)
    c1: vec4<u32>,
    c2: vec4<u32>,
    c3: vec4<u32>,
    dx03: vec4<f32>,
    dx47: vec4<f32>,
    ds03: vec4<f32>,
    ds47: vec4<f32>,
}

fn x_load(qd: u32) -> Xq {
    let q = p.quads;
    return Xq(xk[qd], xk[q + qd], xk[2u * q + qd], xk[3u * q + qd],
              bitcast<vec4<f32>>(xk[4u * q + qd]), bitcast<vec4<f32>>(xk[5u * q + qd]),
              bitcast<vec4<f32>>(xk[6u * q + qd]), bitcast<vec4<f32>>(xk[7u * q + qd]));
}

// Integer dots of the two sub-blocks of pair pp: words a (positions 4u..) and b (4u+16..) with
// the pair's x codes c (low sub-block h 0, h 1, high sub-block h 0, h 1).
fn pair_dot(a: u32, b: u32, c: vec4<u32>) -> vec2<i32> {
    let lo = dot4I8Packed(a & NIB, c.x) + dot4I8Packed(b & NIB, c.y);
    let hi = dot4I8Packed((a >> 4u) & NIB, c.z) + dot4I8Packed((b >> 4u) & NIB, c.w);
    return vec2<i32>(lo, hi);
}

fn row_math(d: RowData, x: Xq) -> f32 {
    let dd = q4k_f16x2(d.hd.x);
    let sm = q4k_scales(d.hd);
    let d03 = vec4<i32>(pair_dot(d.qa.x, d.qb.x, x.c0), pair_dot(d.qa.y, d.qb.y, x.c1));
    let d47 = vec4<i32>(pair_dot(d.qa.z, d.qb.z, x.c2), pair_dot(d.qa.w, d.qb.w, x.c3));
    let s = dot(sm.sc03, vec4<f32>(d03) * x.dx03) + dot(sm.sc47, vec4<f32>(d47) * x.dx47);
    let m = dot(sm.m03, x.ds03) + dot(sm.m47, x.ds47);
    return dd.x * s - dd.y * m;
}

fn slab_math(sl: Slab, qd: u32) -> vec4<f32> {
    let x = x_load(qd);
    var a = vec4<f32>(0.0);
    a.x = row_math(sl.r0, x);
    if (ROWS > 1u) {
        a.y = row_math(sl.r1, x);
    }
    if (ROWS > 2u) {
        a.z = row_math(sl.r2, x);
    }
    if (ROWS > 3u) {
        a.w = row_math(sl.r3, x);
    }
    return a;
}

// Items per row for the driver (gemv_rows_driver.wgsl, appended).
fn row_items() -> u32 {
    return p.quads;
}
