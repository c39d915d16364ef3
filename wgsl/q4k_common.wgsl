// Q4_K helpers shared by the GEMV, GEMM and dequantise kernels (prepended to each).
//
// GPU layout (see src/kernels/q4k/mod.rs): per 144-byte block g (row-major, blocks of one row
// contiguous), `heads[g]` is the block's first 16 bytes as a vec4<u32>:
//   .x = d (low 16 bits, f16) | dmin (high 16 bits, f16), .y/.z/.w = the 12 scale bytes;
// and `qs[8g .. 8g + 8]` are its 128 nibble bytes, half-interleaved: vec4 4hh + pp holds
// qs bytes 32pp + 16hh .. + 16, i.e. positions 16hh .. 16hh + 15 of sub-blocks 2pp (low
// nibbles) and 2pp + 1 (high nibbles). Lanes that take consecutive pairs pp thus load
// consecutive 16-byte words for each half hh.
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

// (sc[2pp], sc[2pp+1], m[2pp], m[2pp+1]) of a block header, as exact floats.
fn q4k_scale_min(h: vec4<u32>, pp: u32) -> vec4<f32> {
    var scw = h.y & 0x3f3f3f3fu;  // sc[0..3]
    var mw = h.z & 0x3f3f3f3fu;   // m[0..3]
    if (pp >= 2u) {
        // sc[4+i] = (s[8+i] & 15) | ((s[i] >> 6) << 4), m[4+i] = (s[8+i] >> 4) | ((s[4+i] >> 6) << 4)
        scw = (h.w & 0x0f0f0f0fu) | ((h.y >> 2u) & 0x30303030u);
        mw = ((h.w >> 4u) & 0x0f0f0f0fu) | ((h.z >> 2u) & 0x30303030u);
    }
    let sh = (pp & 1u) * 16u;
    let v = vec4<u32>(scw >> sh, scw >> (sh + 8u), mw >> sh, mw >> (sh + 8u)) & vec4<u32>(0xffu);
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
}

// The four nibbles in bits 0..15 of `w` as exact floats: (byte0 lo, byte0 hi, byte1 lo, byte1 hi).
// Nibble at bit s is ORed into the mantissa of 2^(23 - s), whose ulp is then 1.
fn q4k_nibs(w: u32) -> vec4<f32> {
    let mask = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
    let magic = vec4<u32>(0x4b000000u, 0x49000000u, 0x47000000u, 0x45000000u);
    return bitcast<vec4<f32>>((vec4<u32>(w) & mask) | magic) - vec4<f32>(8388608.0, 524288.0, 32768.0, 2048.0);
}
