// INT4 quantise (two entry points: per-group scales/zeros, then codes); included after
// interleave.wgsl (codes are written in the interleaved row layout).
// Source values come as u32 words: f32 bit patterns, or two f16 per word when SRC_F16.
//
// Rounding is ties-away-from-zero (the spec), computed EXACTLY: round_mag counts the half-integer
// thresholds (j + 1/2) * s that |x| reaches, comparing 2|x| with (2j+1) * s through a split
// s = hi + lo (hi keeps 18 significant bits) so that (2j+1)*hi and (2j+1)*lo are exact f32
// products and 2|x| - (2j+1)*hi is exact whenever the comparison is close (Sterbenz). Only
// correctly rounded f32 multiply/subtract are used (no division, no WGSL `round`, which is
// ties-to-even), so the GPU agrees code-for-code with the CPU quantiser.
// Scales: signed s = absmax * fl(1/7); asymmetric s = (max(x,0) - min(x,0)) * fl(1/15),
// zero = clamp(round(-min/s), 0, 15).
// A group holding a NaN or an infinity gets the scale NaN (its values dequantise to NaN, as the
// data policy propagates them): the scan reads such a value as +inf (scan_load), which min/max
// keep, and store_scale writes NaN for a non-finite maximum.

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_words: u32,  // row stride of `codes` in u32 (8 codes each)
    asym: u32,
    _p0: u32,
    _p1: u32,
}

override SRC_F16: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> codes: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> zeros: array<f32>;

const INV7: f32 = 0.142857149243354797363281250;   // fl(1/7)
const INV15: f32 = 0.066666670143604278564453125;  // fl(1/15)

fn load(i: u32) -> f32 {
    if (SRC_F16) {
        return unpack2x16float(src[i >> 1u])[i & 1u];
    }
    return bitcast<f32>(src[i]);
}

// load(i) for the min/max scan: a NaN or an infinity reads as +inf (built from its own bits, so
// no constant infinity), which max() keeps where it could drop a NaN.
fn scan_load(i: u32) -> f32 {
    let v = load(i);
    let e = bitcast<u32>(v) & 0x7f800000u;
    return select(v, bitcast<f32>(e), e == 0x7f800000u);
}

// round-half-away(|x| / s), capped at 16, exactly. s > 0.
fn round_mag(ax: f32, s: f32) -> u32 {
    let hi = bitcast<f32>(bitcast<u32>(s) & 0xffffffc0u);
    let lo = s - hi;
    let ax2 = 2.0 * ax;
    var m = 0u;
    for (var j = 0u; j < 16u; j++) {
        let kf = f32(2u * j + 1u);
        m += select(0u, 1u, ax2 - kf * hi >= kf * lo);
    }
    return m;
}

fn linear_id(wid: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + li;
}

@compute @workgroup_size(64)
fn scales_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let id = linear_id(wid, nwg, li);
    if (id >= p.n * p.num_groups) {
        return;
    }
    let row = id / p.num_groups;
    let g = id % p.num_groups;
    let c0 = g * p.group_size;
    let c1 = min(p.k, c0 + p.group_size);
    var lo = 0.0;
    var hi = 0.0;
    for (var c = c0; c < c1; c++) {
        let v = scan_load(row * p.k + c);
        lo = min(lo, v);
        hi = max(hi, v);
    }
    store_scale(id, lo, hi);
}

// Scale (and zero) of group `id` from its min/max (both started at 0).
fn store_scale(id: u32, lo: f32, hi: f32) {
    let hb = bitcast<u32>(hi);
    if (hb == 0x7f800000u) {
        // A non-finite value in the group (scan_load): NaN, from the +inf's own bits.
        scales[id] = bitcast<f32>(hb | 0x00400000u);
        if (p.asym != 0u) {
            zeros[id] = 0.0;
        }
        return;
    }
    if (p.asym != 0u) {
        let s = (hi - lo) * INV15;
        scales[id] = s;
        var z = 0u;
        if (s > 0.0) {
            z = min(round_mag(-lo, s), 15u);
        }
        zeros[id] = f32(z);
    } else {
        scales[id] = abs(max(hi, -lo)) * INV7;  // abs: never a -0.0 scale (max(0, -0) may be -0)
    }
}

@compute @workgroup_size(64)
fn codes_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let id = linear_id(wid, nwg, li);
    if (id >= p.n * p.row_words) {
        return;
    }
    let row = id / p.row_words;
    let w = id % p.row_words;
    var word = 0u;
    for (var i = 0u; i < 8u; i++) {
        let c = w * 8u + i;
        if (c < p.k) {
            let v = load(row * p.k + c);
            let gi = row * p.num_groups + c / p.group_size;
            let s = scales[gi];
            var q = 0i;
            if (s > 0.0) {
                let m = i32(round_mag(abs(v), s));
                q = select(m, -m, v < 0.0);
            }
            var code = 0u;
            if (p.asym != 0u) {
                code = u32(clamp(q + i32(zeros[gi]), 0i, 15i));
            } else {
                code = u32(clamp(q, -8i, 7i)) & 15u;
            }
            word |= code << (4u * i);
        }
    }
    codes[row * p.row_words + il_phys(w, p.row_words / 4u)] = word;
}
