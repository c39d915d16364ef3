// Weight-matrix family (src/kernels/matmul): the parameters, the matrix binding and the helpers
// every kernel of the family and every format part (wgsl/fmt_*.wgsl) may use. The WGSL part
// contract is documented in src/formats/mod.rs.

struct Params {
    n: u32,          // rows this dispatch computes (one row chunk of the matrix)
    k: u32,          // columns
    k4: u32,         // ceil(k / 4)
    items: u32,      // GEMV items per row
    row_vec4s: u32,  // row stride in wq
    y_off: u32,      // the chunk's first row: output column / row offset
    m: u32,          // GEMM: input rows
    ldy: u32,        // GEMM: output row stride (the matrix's n)
    tiles_n: u32,    // GEMM: 64-row tiles of this chunk
    sps: u32,        // GEMM: 32-column slices per split
    splits: u32,     // GEMM: K splits
    xs: u32,         // q8 GEMM: stride of the activation records' planes
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wq: array<vec4<u32>>;

// Both f16 halves of `w` (low first) as f32, exactly: subnormals (built with an exact integer
// conversion and a power-of-two scale, so nothing can flush them), infinities and NaN.
fn mm_f16x2(w: u32) -> vec2<f32> {
    let b = vec2<u32>(w & 0xffffu, w >> 16u);
    let s = (b & vec2<u32>(0x8000u)) << vec2<u32>(16u);
    let e = (b >> vec2<u32>(10u)) & vec2<u32>(31u);
    let m = b & vec2<u32>(1023u);
    let normal = bitcast<vec2<f32>>(s | ((e + vec2<u32>(112u)) << vec2<u32>(23u)) | (m << vec2<u32>(13u)));
    let special = bitcast<vec2<f32>>(s | vec2<u32>(0x7f800000u) | (m << vec2<u32>(13u)));
    let sub = vec2<f32>(m) * 5.9604644775390625e-8;
    let subs = select(sub, -sub, s != vec2<u32>(0u));
    return select(select(normal, special, e == vec2<u32>(31u)), subs, e == vec2<u32>(0u));
}

// Both bf16 halves of `w` (low first) as f32 (exact).
fn mm_bf16x2(w: u32) -> vec2<f32> {
    return bitcast<vec2<f32>>(vec2<u32>(w << 16u, w & 0xffff0000u));
}

// The four bytes of `w` (byte 0 first) as signed integers.
fn mm_i8x4(w: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// The four bytes of `w` (byte 0 first) as unsigned integers.
fn mm_u8x4(w: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));
}

// The eight nibbles of `w` in byte order, low nibble of each byte first:
// [0] = (b0 lo, b0 hi, b1 lo, b1 hi), [1] = (b2 lo, b2 hi, b3 lo, b3 hi).
fn mm_u4x8(w: u32) -> array<vec4<f32>, 2> {
    let a = (vec4<u32>(w) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    let b = (vec4<u32>(w) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u);
    return array<vec4<f32>, 2>(vec4<f32>(a), vec4<f32>(b));
}

// int8 activations of one quad (64 columns) in the order of the q8 quantiser's Q4_K-order
// records (src/kernels/q8): quad qd = 4 * blk + u of 256-column block blk covers positions
// 4u..4u+3 (half h = 0) and 4u+16..4u+19 (h = 1) of the block's eight 32-column sub-blocks j.
// c[t] = i8x4 codes (byte order = column order) of (sub-block 2t, h 0), (2t, h 1), (2t+1, h 0),
// (2t+1, h 1); d = the sub-blocks' scales dx_j (j = 0..3 in d03, 4..7 in d47); s = fl(dx_j * the
// sum of the quad's 8 codes of sub-block j). A format part that defines `struct FmtQRow` (or an
// alias), `fn fmt_qload(base: u32, quad: u32) -> FmtQRow` (loads only) and
// `fn fmt_qdot(w: FmtQRow, x: MmQx) -> f32` gets the integer GEMV (k % 256 == 0).
struct MmQx {
    c0: vec4<u32>,
    c1: vec4<u32>,
    c2: vec4<u32>,
    c3: vec4<u32>,
    d03: vec4<f32>,
    d47: vec4<f32>,
    s03: vec4<f32>,
    s47: vec4<f32>,
}
