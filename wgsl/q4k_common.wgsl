// Q4_K helpers shared by the GEMV, GEMM and dequantise kernels (prepended to each).
//
// GPU layout (see src/kernels/q4k/mod.rs): per 144-byte block g (row-major, blocks of one row
// contiguous), `heads[g]` is the block's first 16 bytes as a vec4<u32>:
//   .x = d (low 16 bits, f16) | dmin (high 16 bits, f16), .y/.z/.w = the 12 scale bytes;
// and `qs[8g .. 8g + 8]` are its 128 nibble bytes with the 4 x 8 words transposed: component
// pp of vec4 wi is nibble word 8pp + wi (bytes 32pp + 4wi .. + 4), which holds positions
// 4wi .. 4wi + 3 of sub-blocks 2pp (low nibbles) and 2pp + 1 (high nibbles). So vec4 wi
// covers positions 4wi .. 4wi + 3 of all eight sub-blocks, and lanes loading consecutive
// vec4s need consecutive x vec4s of each sub-block: weight and x loads are both coalesced.
//
// All small integers become floats through exponent tricks (OR into the mantissa of a power
// of two, subtract it again): exact, and full-rate integer/float ops instead of conversions.

// Both f16 halves of `w` as f32, exactly (subnormals included; inputs must be finite).
// Decoded with integer ops so that no conversion can flush f16 subnormals.
fn q4k_f16x2(w: u32) -> vec2<f32> {
    let b = vec2<u32>(w & 0xffffu, w >> 16u);
    let e = (b >> vec2<u32>(10u)) & vec2<u32>(31u);
    let m = (b & vec2<u32>(1023u)) | select(vec2<u32>(0u), vec2<u32>(1024u), e != vec2<u32>(0u));
    // m < 2^11 exactly as a float: OR into the mantissa of 2^23.
    let mf = bitcast<vec2<f32>>(m | vec2<u32>(0x4b000000u)) - vec2<f32>(8388608.0);
    // 2^(max(e, 1) - 25), built from its exponent bits (biased max(e, 1) + 102).
    let p2 = bitcast<vec2<f32>>((max(e, vec2<u32>(1u)) + vec2<u32>(102u)) << vec2<u32>(23u));
    let v = mf * p2;
    return select(v, -v, (b & vec2<u32>(0x8000u)) != vec2<u32>(0u));
}

// Four 6-bit values in the bytes of `w` (bits 6, 7 of each byte are ignored) as exact floats.
fn q4k_bytes6(w: u32) -> vec4<f32> {
    let v = (vec4<u32>(w) >> vec4<u32>(0u, 0u, 0u, 8u)) & vec4<u32>(0x3fu, 0x3f00u, 0x3f0000u, 0x3f0000u);
    let magic = vec4<u32>(0x4b000000u, 0x47000000u, 0x43000000u, 0x43000000u);
    return bitcast<vec4<f32>>(v | magic) - vec4<f32>(8388608.0, 32768.0, 128.0, 128.0);
}

// The eight 6-bit scales and mins of a block header, as exact floats.
struct Q4kScales {
    sc03: vec4<f32>,  // sc[0..3]
    sc47: vec4<f32>,  // sc[4..7]
    m03: vec4<f32>,
    m47: vec4<f32>,
}

fn q4k_scales(h: vec4<u32>) -> Q4kScales {
    // j < 4: sc = s[j] & 63, m = s[j+4] & 63;
    // j = 4 + i: sc = (s[8+i] & 15) | ((s[i] >> 6) << 4), m = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4).
    let sc47 = (h.w & 0x0f0f0f0fu) | ((h.y >> 2u) & 0x30303030u);
    let m47 = ((h.w >> 4u) & 0x0f0f0f0fu) | ((h.z >> 2u) & 0x30303030u);
    return Q4kScales(q4k_bytes6(h.y), q4k_bytes6(sc47), q4k_bytes6(h.z), q4k_bytes6(m47));
}

// The four nibbles in bits 0..15 of `w` as exact floats: (byte0 lo, byte0 hi, byte1 lo, byte1 hi).
// Nibble at bit s is ORed into the mantissa of 2^(23 - s), whose ulp is then 1.
fn q4k_nibs(w: u32) -> vec4<f32> {
    let mask = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
    let magic = vec4<u32>(0x4b000000u, 0x49000000u, 0x47000000u, 0x45000000u);
    return bitcast<vec4<f32>>((vec4<u32>(w) & mask) | magic) - vec4<f32>(8388608.0, 524288.0, 32768.0, 2048.0);
}
