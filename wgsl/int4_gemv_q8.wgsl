// INT4 GEMV on int8 activations (q8_quantize.wgsl's x4 words; spec: src/reference/q8.rs):
//   y[r] = sum_w s[r, g(w)] * (d_b * D_w - zo[r, g(w)] * dS_w)
// over 8-column words w, D_w = the exact integer dot of the word's unsigned codes u (signed codes
// XOR 8, i.e. q + 8) with the int8 activations, zo = zero offset (8 signed) + zero point, and
// dS_w = fl(d_b * sum of the word's activation codes). Needs k % 32 == 0 and group_size % 32 == 0
// (checked on the host): rows have no padding and a word never straddles a group or an x block.
// Codes (u in 0..15, so signed int8 as well) meet x through dot4I8Packed: low nibbles under
// 0x0f0f0f0f are columns 0, 2, 4, 6 of the word, high nibbles 1, 3, 5, 7, the order of the x4
// words. naga emits OpSDot (DP4A) where the Vulkan device has shaderIntegerDotProduct (Vulkan
// 1.3 core); elsewhere (Metal, older devices) a polyfill: correct, not fast.
// Team structure (gemv_rows_driver.wgsl, appended) as int4_gemv.wgsl: a team computes ROWS rows at a time, its lanes stride over
// the rows' vec4s of codes (16-byte loads, interleaved layout: a lane's x4 records are
// consecutive with its neighbours'), UNROLL vec4 steps per iteration with the loads of the
// iteration issued first; one team_sum per row block. Rows past n are clamped to row n - 1 for
// loading and never written.

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_vec4s: u32,    // k / 32
    xor_mask: u32,     // 0x88888888 signed, 0 unsigned
    zero_offset: f32,  // 8 signed, 0 unsigned
    has_zeros: u32,    // (this kernel reads the ZEROS override instead)
}

override ROWS: u32 = 2u;     // rows per team, 1..4
override UNROLL: u32 = 2u;   // vec4 steps per lane per iteration: 1, 2 or 4
override GSHIFT: u32 = 99u;  // log2(group_size / 8) when that is a power of two, else 99
override ZEROS: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x4: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const NIB = 0x0f0f0f0fu;

fn word_group(w: u32) -> u32 {
    if (GSHIFT < 32u) {
        return w >> (GSHIFT & 31u);
    }
    return (w * 8u) / p.group_size;
}

// One row's codes (XOR applied), the scales and zero offsets of its four words at one vec4.
struct RowData {
    c: vec4<u32>,
    s: vec4<f32>,
    z: vec4<f32>,
}

struct Slab {
    r0: RowData,
    r1: RowData,
    r2: RowData,
    r3: RowData,
}

fn row_load(row: u32, v: u32, g: vec4<u32>) -> RowData {
    let gi = vec4<u32>(row * p.num_groups) + g;
    var z = vec4<f32>(p.zero_offset);
    if (ZEROS) {
        z += vec4<f32>(zeros[gi.x], zeros[gi.y], zeros[gi.z], zeros[gi.w]);
    }
    return RowData(codes[row * p.row_vec4s + v] ^ vec4<u32>(p.xor_mask),
                   vec4<f32>(scales[gi.x], scales[gi.y], scales[gi.z], scales[gi.w]), z);
}

fn slab_load(rows: vec4<u32>, v: u32) -> Slab {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    let g = vec4<u32>(word_group(w0), word_group(w0 + s), word_group(w0 + 2u * s), word_group(w0 + 3u * s));
    var sl: Slab;
    sl.r0 = row_load(rows.x, v, g);
    if (ROWS > 1u) {
        sl.r1 = row_load(rows.y, v, g);
    }
    if (ROWS > 2u) {
        sl.r2 = row_load(rows.z, v, g);
    }
    if (ROWS > 3u) {
        sl.r3 = row_load(rows.w, v, g);
    }
    return sl;
}

// The integer dot of one code word with its x4 record, as f32 (exact: |D| < 2^24).
fn word_dot(c: u32, xr: vec4<u32>) -> f32 {
    return f32(dot4I8Packed(c & NIB, xr.x) + dot4I8Packed((c >> 4u) & NIB, xr.y));
}

// One word position for the ROWS rows: codes cw, scales sw, zero offsets zw (component r: row r).
fn word_rows(cw: vec4<u32>, sw: vec4<f32>, zw: vec4<f32>, xr: vec4<u32>) -> vec4<f32> {
    var dv = vec4<f32>(0.0);
    dv.x = word_dot(cw.x, xr);
    if (ROWS > 1u) {
        dv.y = word_dot(cw.y, xr);
    }
    if (ROWS > 2u) {
        dv.z = word_dot(cw.z, xr);
    }
    if (ROWS > 3u) {
        dv.w = word_dot(cw.w, xr);
    }
    let d = bitcast<f32>(xr.z);
    let ds = bitcast<f32>(xr.w);
    return sw * (d * dv - zw * ds);
}

fn slab_math(sl: Slab, v: u32) -> vec4<f32> {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    let x0 = x4[w0];
    let x1 = x4[w0 + s];
    let x2 = x4[w0 + 2u * s];
    let x3 = x4[w0 + 3u * s];
    var a = word_rows(vec4<u32>(sl.r0.c.x, sl.r1.c.x, sl.r2.c.x, sl.r3.c.x), vec4<f32>(sl.r0.s.x, sl.r1.s.x, sl.r2.s.x, sl.r3.s.x),
                      vec4<f32>(sl.r0.z.x, sl.r1.z.x, sl.r2.z.x, sl.r3.z.x), x0);
    a += word_rows(vec4<u32>(sl.r0.c.y, sl.r1.c.y, sl.r2.c.y, sl.r3.c.y), vec4<f32>(sl.r0.s.y, sl.r1.s.y, sl.r2.s.y, sl.r3.s.y),
                   vec4<f32>(sl.r0.z.y, sl.r1.z.y, sl.r2.z.y, sl.r3.z.y), x1);
    a += word_rows(vec4<u32>(sl.r0.c.z, sl.r1.c.z, sl.r2.c.z, sl.r3.c.z), vec4<f32>(sl.r0.s.z, sl.r1.s.z, sl.r2.s.z, sl.r3.s.z),
                   vec4<f32>(sl.r0.z.z, sl.r1.z.z, sl.r2.z.z, sl.r3.z.z), x2);
    a += word_rows(vec4<u32>(sl.r0.c.w, sl.r1.c.w, sl.r2.c.w, sl.r3.c.w), vec4<f32>(sl.r0.s.w, sl.r1.s.w, sl.r2.s.w, sl.r3.s.w),
                   vec4<f32>(sl.r0.z.w, sl.r1.z.w, sl.r2.z.w, sl.r3.z.w), x3);
    return a;
}

// Items per row for the driver (gemv_rows_driver.wgsl, appended).
fn row_items() -> u32 {
    return p.row_vec4s;
}
