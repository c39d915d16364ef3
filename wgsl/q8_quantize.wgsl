// Quantise f32 activations to int8 blocks of 32 (spec: src/reference/q8.rs). One invocation per
// block: d = absmax * fl(1/127); q = clamp(round-half-away(x / d), -127, 127), computed exactly:
// an estimate m = floor(|x| * (1/d)) (any precision: an error below 1/2 is corrected next) and
// one exact threshold test 2|x| >= (2m + 1) d through the split d = hi + lo (hi keeps 16
// significant bits, lo the other 8), so (2m+1)*hi and (2m+1)*lo are exact f32 products (2m+1 has
// at most 8 bits) and 2|x| - (2m+1)*hi is exact wherever the comparison is close (Sterbenz).
// Only correctly rounded f32 operations feed the outputs, so GPU and CPU agree bit-for-bit
// (finite, normal inputs; a GPU that flushes subnormal scales may differ there).
// Outputs, both written (small: 4 bytes per column in all):
//   x4: per 8-column word w, vec4<u32>(i8x4 of cols 0,2,4,6, i8x4 of cols 1,3,5,7, bits(d),
//       bits(fl(d * sum of the 8 codes))): the order of INT4 nibbles under masks 0x0f0f0f0f.
//   xk (when HAS_Q4K != 0, k % 256 == 0): struct of arrays over quads qd = 4 * blk + u: vec4 t at
//       t * quads + qd: t = 0..3 the i8x4 words of (sub-block 2t, positions 4u..4u+3),
//       (2t, 4u+16..4u+19), (2t+1, 4u..), (2t+1, 4u+16..); t = 4, 5: d of sub-blocks 0..3, 4..7;
//       t = 6, 7: fl(d_j * sum of the quad's 8 codes of sub-block j): the order of Q4_K nibbles.

struct Params {
    blocks: u32,   // k / 32
    quads: u32,    // k / 64
    has_q4k: u32,
    _p: u32,
}

const INV127: f32 = 0.0078740157480314960629921259842519685; // rounds to fl(1/127)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> x4: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> xk: array<u32>;

var<private> q: array<i32, 32>;

fn code(v: f32, d: f32, inv: f32, hi: f32, lo: f32) -> i32 {
    let ax = abs(v);
    let m = min(floor(ax * inv), 127.0);
    let kf = 2.0 * m + 1.0;
    let up = select(0.0, 1.0, 2.0 * ax - kf * hi >= kf * lo);
    let r = i32(min(m + up, 127.0));
    return select(r, -r, v < 0.0);
}

fn pack(a: i32, b: i32, c: i32, e: i32) -> u32 {
    return (u32(a) & 0xffu) | ((u32(b) & 0xffu) << 8u) | ((u32(c) & 0xffu) << 16u) | ((u32(e) & 0xffu) << 24u);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let b = (wid.x + wid.y * nwg.x) * 64u + li;
    if (b >= p.blocks) {
        return;
    }
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let v = abs(x[8u * b + i]);
        amax = max(amax, max(max(v.x, v.y), max(v.z, v.w)));
    }
    let d = amax * INV127;
    let inv = select(0.0, 1.0 / d, d > 0.0);
    let hi = bitcast<f32>(bitcast<u32>(d) & 0xffffff00u);
    let lo = d - hi;
    for (var i = 0u; i < 8u; i++) {
        let v = x[8u * b + i];
        q[4u * i] = code(v.x, d, inv, hi, lo);
        q[4u * i + 1u] = code(v.y, d, inv, hi, lo);
        q[4u * i + 2u] = code(v.z, d, inv, hi, lo);
        q[4u * i + 3u] = code(v.w, d, inv, hi, lo);
    }
    // A zero block: inv = 0 gives m = 0 and the threshold test 0 >= 0 would round up; force 0.
    if (d == 0.0) {
        for (var i = 0u; i < 32u; i++) {
            q[i] = 0;
        }
    }
    for (var w = 0u; w < 4u; w++) {
        let c = 8u * w;
        var s = 0;
        for (var e = 0u; e < 8u; e++) {
            s += q[c + e];
        }
        x4[4u * b + w] = vec4<u32>(pack(q[c], q[c + 2u], q[c + 4u], q[c + 6u]), pack(q[c + 1u], q[c + 3u], q[c + 5u], q[c + 7u]),
                                   bitcast<u32>(d), bitcast<u32>(d * f32(s)));
    }
    if (p.has_q4k != 0u) {
        let blk = b / 8u;
        let j = b % 8u;
        for (var u = 0u; u < 4u; u++) {
            let qd = 4u * blk + u;
            let a = 4u * u;
            let w0 = pack(q[a], q[a + 1u], q[a + 2u], q[a + 3u]);
            let w1 = pack(q[a + 16u], q[a + 17u], q[a + 18u], q[a + 19u]);
            let t = j / 2u;
            let comp = (j % 2u) * 2u;
            xk[(t * p.quads + qd) * 4u + comp] = w0;
            xk[(t * p.quads + qd) * 4u + comp + 1u] = w1;
            var s = 0;
            for (var e = 0u; e < 4u; e++) {
                s += q[a + e] + q[a + 16u + e];
            }
            xk[((4u + j / 4u) * p.quads + qd) * 4u + j % 4u] = bitcast<u32>(d);
            xk[((6u + j / 4u) * p.quads + qd) * 4u + j % 4u] = bitcast<u32>(d * f32(s));
        }
    }
}
