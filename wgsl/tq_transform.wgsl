// TurboQuant transforms: quantise (f32 -> codes + norm), dequantise (codes + norm -> f32), and
// the decode attention's merge (split-K partials -> attention output).
// Included after tq_portable.wgsl or tq_subgroup.wgsl and the generated codebook constants.
//
// Layout: a vector of d (power of two, 64..512) coordinates is held by a team of
// lanes = d / 8 invocations, lane r holding coordinates 8r..8r+7 as two vec4s; a workgroup of 64
// holds 64 / lanes vectors. The Walsh-Hadamard transform H (unnormalised) factors into butterfly
// stages on each bit of the coordinate index, which commute: the 3 low bits are done in
// registers, the next tq_shfl_bits() bits by subgroup xor shuffles, the rest through workgroup memory
// (ping-pong buffers, one barrier per stage). A scalar carried through the same butterflies as
// a sum becomes the team-wide sum (quantise uses it for the squared norm).
//
// Packing is race-free: lane r owns whole u32 word r of its vector's codes (8 codes, code of
// coordinate 8r + k in bits 4k..4k+3, i.e. two codes per byte, even coordinate low).

struct Params {
    d: u32,
    lanes: u32,       // d / 8
    vectors: u32,     // vectors in this dispatch
    kv_heads: u32,    // vectors per token (quantise / dequantise)
    capacity: u32,    // cache slots per head
    pos0: u32,        // logical position of the dispatch's first token
    src_off: u32,     // offset of the first source vector in `src`, in vec4s
    splits: u32,      // merge: split-K partials per head
    row: u32,         // merge: floats per partial row (d + 4: max, sum, 2 pad, d outputs)
    _scale: f32,      // unused
    k_wgs: u32,       // quantize_kv: workgroups of the K vectors (the V vectors' follow)
    _p1: u32,
}

const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> codes: array<u32>;
@group(0) @binding(3) var<storage, read_write> norms: array<f32>;
@group(0) @binding(4) var<storage, read> signs: array<u32>;
@group(0) @binding(5) var<storage, read_write> dst: array<vec4<f32>>;
// quantize_kv: the V side (src, codes, norms, signs above are the K side).
@group(0) @binding(6) var<storage, read> src_v: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> codes_v: array<u32>;
@group(0) @binding(8) var<storage, read_write> norms_v: array<f32>;
@group(0) @binding(9) var<storage, read> signs_v: array<u32>;

var<workgroup> xa: array<vec4<f32>, 128>;
var<workgroup> xb: array<vec4<f32>, 128>;
var<workgroup> xs: array<f32, 128>;
var<private> tq_cb: array<f32, 16> = TQ_CENTROIDS;

struct Chunk {
    a: vec4<f32>,  // coordinates 8r..8r+3
    b: vec4<f32>,  // coordinates 8r+4..8r+7
    s: f32,
}

struct Lane {
    v: u32,       // vector index in the dispatch (clamped to a valid one for loads)
    r: u32,       // rank in the vector's team
    valid: bool,  // v was not clamped
}

fn lane_of(t: TqLanes) -> Lane {
    return lane_at(t, t.wg);
}

// The lane of workgroup `wg` of the dispatch's vectors.
fn lane_at(t: TqLanes, wg: u32) -> Lane {
    let v = wg * (WG / p.lanes) + t.l / p.lanes;
    return Lane(min(v, p.vectors - 1u), t.l % p.lanes, v < p.vectors);
}

fn fwht4(x: vec4<f32>) -> vec4<f32> {
    let y = vec4<f32>(x.xy + x.zw, x.xy - x.zw);
    return vec4<f32>(y.x + y.y, y.x - y.y, y.z + y.w, y.z - y.w);
}

fn bfly(own: Chunk, other: Chunk, upper: bool) -> Chunk {
    return Chunk(select(own.a + other.a, other.a - own.a, upper), select(own.b + other.b, other.b - own.b, upper), own.s + other.s);
}

fn shx4(v: vec4<f32>, m: u32) -> vec4<f32> {
    return vec4<f32>(tq_shx(v.x, m), tq_shx(v.y, m), tq_shx(v.z, m), tq_shx(v.w, m));
}

// Unnormalised Walsh-Hadamard transform of the team's vector; `s` comes back summed over the team.
// Must be called by every invocation of the workgroup (barriers).
fn fwht(c0: Chunk, t: TqLanes) -> Chunk {
    let a = fwht4(c0.a);
    let b = fwht4(c0.b);
    var c = Chunk(a + b, a - b, c0.s);
    let bits = firstTrailingBit(p.lanes);
    let sb = min(tq_shfl_bits(), bits);
    for (var j = 0u; j < sb; j++) {
        let m = 1u << j;
        c = bfly(c, Chunk(shx4(c.a, m), shx4(c.b, m), tq_shx(c.s, m)), (t.l & m) != 0u);
    }
    var buf = 0u;
    for (var j = sb; j < bits; j++) {
        let m = 1u << j;
        let i = buf + t.l;
        xa[i] = c.a;
        xb[i] = c.b;
        xs[i] = c.s;
        workgroupBarrier();
        let k = buf + (t.l ^ m);
        c = bfly(c, Chunk(xa[k], xb[k], xs[k]), (t.l & m) != 0u);
        buf = WG - buf;
    }
    return c;
}

// Negate the coordinates whose sign bit is set (coordinates 8r..8r+7 are bits 8(r%4).. of word r/4).
fn apply_signs(c: Chunk, r: u32) -> Chunk {
    return apply_sign_word(c, signs[r / 4u], r);
}

// apply_signs with the sign word `word` = signs[r / 4] of some cache.
fn apply_sign_word(c: Chunk, word: u32, r: u32) -> Chunk {
    let bits = word >> (8u * (r % 4u));
    let lo = (vec4<u32>(bits) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u);
    let hi = (vec4<u32>(bits) >> vec4<u32>(4u, 5u, 6u, 7u)) & vec4<u32>(1u);
    return Chunk(select(c.a, -c.a, lo == vec4<u32>(1u)), select(c.b, -c.b, hi == vec4<u32>(1u)), c.s);
}

// Branch-free nearest centroid: m = number of positive boundaries below |u|; codes are ordered
// by value (8 + m for u >= 0, 7 - m below).
fn code4(u: vec4<f32>) -> vec4<u32> {
    let a = abs(u);
    let one = vec4<u32>(1u);
    let zero = vec4<u32>(0u);
    var m = select(zero, one, a > vec4<f32>(TQ_B1));
    m += select(zero, one, a > vec4<f32>(TQ_B2));
    m += select(zero, one, a > vec4<f32>(TQ_B3));
    m += select(zero, one, a > vec4<f32>(TQ_B4));
    m += select(zero, one, a > vec4<f32>(TQ_B5));
    m += select(zero, one, a > vec4<f32>(TQ_B6));
    m += select(zero, one, a > vec4<f32>(TQ_B7));
    return select(vec4<u32>(7u) - m, vec4<u32>(8u) + m, u >= vec4<f32>(0.0));
}

fn pack8(a: vec4<u32>, b: vec4<u32>) -> u32 {
    let sa = a << vec4<u32>(0u, 4u, 8u, 12u);
    let sb = b << vec4<u32>(16u, 20u, 24u, 28u);
    return sa.x | sa.y | sa.z | sa.w | sb.x | sb.y | sb.z | sb.w;
}

fn unpack4(w: u32) -> vec4<f32> {
    let c = (vec4<u32>(w) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return vec4<f32>(tq_cb[c.x], tq_cb[c.y], tq_cb[c.z], tq_cb[c.w]);
}

// Cache vector (head * capacity + slot) of the lane's vector.
fn cache_vector(v: u32) -> u32 {
    let token = v / p.kv_heads;
    let head = v % p.kv_heads;
    return head * p.capacity + (p.pos0 + token) % p.capacity;
}

// A vector's codes (the lane's word) and norm.
struct Encoded {
    word: u32,
    norm: f32,
}

// Encode the team's vector, whose signs are applied (c.a, c.b: the lane's 8 coordinates). Every
// invocation of the workgroup must call it (barriers).
fn encode(x: Chunk, t: TqLanes) -> Encoded {
    var c = x;
    c.s = dot(c.a, c.a) + dot(c.b, c.b);
    c = fwht(c, t);
    // u = H D x / |x|: unit vector scaled to norm sqrt(d), coordinates ~ N(0, 1).
    let norm = sqrt(c.s);
    let inv = select(0.0, 1.0 / norm, norm > 0.0);
    return Encoded(pack8(code4(c.a * inv), code4(c.b * inv)), norm);
}

// Offset in `src` (or `src_v`) of the lane's first 4 coordinates.
fn src_at(ln: Lane) -> u32 {
    return p.src_off + (ln.v * p.d + ln.r * 8u) / 4u;
}

@compute @workgroup_size(64)
fn quantize(g: TqGroup, ids: TqIds) {
    let t = tq_begin(g, ids);
    let ln = lane_of(t);
    let i = src_at(ln);
    let e = encode(apply_signs(Chunk(src[i], src[i + 1u], 0.0), ln.r), t);
    if (ln.valid) {
        let cv = cache_vector(ln.v);
        codes[cv * p.lanes + ln.r] = e.word;
        if (ln.r == 0u) {
            norms[cv] = e.norm;
        }
    }
}

// quantize of a K and a V source into their caches (same shape and positions) in one dispatch:
// workgroups below k_wgs take K's vectors, the others V's.
@compute @workgroup_size(64)
fn quantize_kv(g: TqGroup, ids: TqIds) {
    let t = tq_begin(g, ids);
    let is_v = t.wg >= p.k_wgs;
    let ln = lane_at(t, select(t.wg, t.wg - p.k_wgs, is_v));
    let i = src_at(ln);
    var x: Chunk;
    var sign_word: u32;
    if (is_v) {
        x = Chunk(src_v[i], src_v[i + 1u], 0.0);
        sign_word = signs_v[ln.r / 4u];
    } else {
        x = Chunk(src[i], src[i + 1u], 0.0);
        sign_word = signs[ln.r / 4u];
    }
    let e = encode(apply_sign_word(x, sign_word, ln.r), t);
    if (ln.valid) {
        let cv = cache_vector(ln.v);
        let w = cv * p.lanes + ln.r;
        if (is_v) {
            codes_v[w] = e.word;
        } else {
            codes[w] = e.word;
        }
        if (ln.r == 0u) {
            if (is_v) {
                norms_v[cv] = e.norm;
            } else {
                norms[cv] = e.norm;
            }
        }
    }
}

@compute @workgroup_size(64)
fn dequantize(g: TqGroup, ids: TqIds) {
    let t = tq_begin(g, ids);
    let ln = lane_of(t);
    let cv = cache_vector(ln.v);
    let w = codes[cv * p.lanes + ln.r];
    var c = fwht(Chunk(unpack4(w & 0xffffu), unpack4(w >> 16u), 0.0), t);
    // x = D H (c * norm / sqrt(d)) / sqrt(d)
    let f = norms[cv] / f32(p.d);
    c = apply_signs(Chunk(c.a * f, c.b * f, 0.0), ln.r);
    if (ln.valid) {
        let o = (ln.v * p.d + ln.r * 8u) / 4u;
        dst[o] = c.a;
        dst[o + 1u] = c.b;
    }
}

// Merge: one workgroup of MERGE_WG per head; the split-K partial rows (max, sum, 2 pad, d outputs
// already in the original domain, see tq_attention.wgsl) are combined by log-sum-exp. Team
// `team` of d / 4 invocations (invocation c holding output vec4 c) folds rows team,
// team + teams, .. with an online softmax (running max m, sum l and output o rescaled whenever
// m grows), four rows loaded per step; the teams' (m, l, o) are then combined through workgroup
// memory by team 0.
const MERGE_WG: u32 = 256u;

var<workgroup> mo: array<vec4<f32>, MERGE_WG>;
var<workgroup> mml: array<vec2<f32>, MERGE_WG>;

@compute @workgroup_size(256)
fn merge(g: TqGroup, ids: TqIds) {
    let h = tq_wg(g);
    if (h >= p.vectors) {
        return;  // whole workgroup
    }
    let q4 = p.d / 4u;
    let teams = MERGE_WG / q4;
    let c = ids.li % q4;
    let team = ids.li / q4;
    let r4 = p.row / 4u;
    let rows = h * p.splits;
    var m = -3.0e38;
    var l = 0.0;
    var o = vec4<f32>(0.0);
    var s = team;
    for (; s + 3u * teams < p.splits; s += 4u * teams) {
        let b0 = (rows + s) * r4;
        let b1 = b0 + teams * r4;
        let b2 = b1 + teams * r4;
        let b3 = b2 + teams * r4;
        let a0 = src[b0];
        let a1 = src[b1];
        let a2 = src[b2];
        let a3 = src[b3];
        let o0 = src[b0 + 1u + c];
        let o1 = src[b1 + 1u + c];
        let o2 = src[b2 + 1u + c];
        let o3 = src[b3 + 1u + c];
        let mx = max(max(m, max(a0.x, a1.x)), max(a2.x, a3.x));
        let f = exp(m - mx);
        let e0 = exp(a0.x - mx);
        let e1 = exp(a1.x - mx);
        let e2 = exp(a2.x - mx);
        let e3 = exp(a3.x - mx);
        l = l * f + a0.y * e0 + a1.y * e1 + a2.y * e2 + a3.y * e3;
        o = o * f + o0 * e0 + o1 * e1 + o2 * e2 + o3 * e3;
        m = mx;
    }
    for (; s < p.splits; s += teams) {
        let b0 = (rows + s) * r4;
        let a0 = src[b0];
        let mx = max(m, a0.x);
        let f = exp(m - mx);
        let e0 = exp(a0.x - mx);
        l = l * f + a0.y * e0;
        o = o * f + src[b0 + 1u + c] * e0;
        m = mx;
    }
    mo[ids.li] = o;
    mml[ids.li] = vec2<f32>(m, l);
    workgroupBarrier();
    if (team == 0u) {
        var mx = mml[0].x;
        for (var k = 1u; k < teams; k++) {
            mx = max(mx, mml[k * q4].x);
        }
        var lt = 0.0;
        var ot = vec4<f32>(0.0);
        for (var k = 0u; k < teams; k++) {
            let ml = mml[k * q4 + c];
            let e = exp(ml.x - mx);
            lt += ml.y * e;
            ot += mo[k * q4 + c] * e;
        }
        dst[h * q4 + c] = ot / lt;
    }
}
