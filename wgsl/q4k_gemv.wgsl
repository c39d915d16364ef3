// Q4_K GEMV (m = 1): y[r] = sum_c w[r, c] * x[c], w dequantised on the fly. Prepended: a team
// file (team = one workgroup) and q4k_common.wgsl. Each team computes ROWS rows, so every x value it loads serves ROWS rows; a lane takes one
// 32-byte pair of a block per step (64 weights: positions 0..31 of two sub-blocks) and
// consecutive lanes take consecutive pairs. With the half-interleaved qs layout each of the
// lane's two 16-byte loads is contiguous across the team (coalesced); each weight byte is
// read once.
//
// Per row and pair, with s = sum_i q_i x_i and sx = sum_i x_i over one sub-block:
//   sum_i (d*sc*q_i - dmin*m) x_i = d*sc*s - dmin*m*sx,
// so the x sums are shared by the ROWS rows and the nibbles need one FMA each.
// Rows past n are clamped to row n - 1 for loading (no out-of-bounds reads, loads stay
// unconditional) and never written. K is a multiple of 256 (checked on the host).

struct Params {
    n: u32,
    k: u32,
    nb: u32,   // blocks per row = k / 256
    _p: u32,
}

override ROWS: u32 = 4u;  // rows per team, 1..8

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// x of two positions of the low and high sub-block, in the order q4k_nibs returns nibbles.
fn zip_lo(l: vec4<f32>, h: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(l.x, h.x, l.y, h.y);
}
fn zip_hi(l: vec4<f32>, h: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(l.z, h.z, l.w, h.w);
}

// 16 positions of a pair: q holds their 16 bytes, l0..l3 the low sub-block's x, h0..h3 the
// high one's. Returns partial dots (lo, hi, lo, hi).
fn dot16(q: vec4<u32>, l0: vec4<f32>, l1: vec4<f32>, l2: vec4<f32>, l3: vec4<f32>,
         h0: vec4<f32>, h1: vec4<f32>, h2: vec4<f32>, h3: vec4<f32>) -> vec4<f32> {
    var s = q4k_nibs(q.x) * zip_lo(l0, h0);
    s = fma(q4k_nibs(q.x >> 16u), zip_hi(l0, h0), s);
    s = fma(q4k_nibs(q.y), zip_lo(l1, h1), s);
    s = fma(q4k_nibs(q.y >> 16u), zip_hi(l1, h1), s);
    s = fma(q4k_nibs(q.z), zip_lo(l2, h2), s);
    s = fma(q4k_nibs(q.z >> 16u), zip_hi(l2, h2), s);
    s = fma(q4k_nibs(q.w), zip_lo(l3, h3), s);
    s = fma(q4k_nibs(q.w >> 16u), zip_hi(l3, h3), s);
    return s;
}

fn team_main(t: Team) {
    let pairs = p.nb * 4u;        // 32-byte pairs per row
    let blocks = (p.n + ROWS - 1u) / ROWS;
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var pc = t.lane; pc < pairs; pc += t.lanes) {
            // Pair pc = block pc / 4, pair pc % 4: x[256 b + 64 pp ..] = vec4 index 16 pc.
            let xb = pc * 16u;
            let a0 = x[xb];
            let a1 = x[xb + 1u];
            let a2 = x[xb + 2u];
            let a3 = x[xb + 3u];
            let a4 = x[xb + 4u];
            let a5 = x[xb + 5u];
            let a6 = x[xb + 6u];
            let a7 = x[xb + 7u];
            let b0 = x[xb + 8u];
            let b1 = x[xb + 9u];
            let b2 = x[xb + 10u];
            let b3 = x[xb + 11u];
            let b4 = x[xb + 12u];
            let b5 = x[xb + 13u];
            let b6 = x[xb + 14u];
            let b7 = x[xb + 15u];
            let one = vec4<f32>(1.0);
            let sx = vec2<f32>(dot((a0 + a1) + (a2 + a3) + ((a4 + a5) + (a6 + a7)), one),
                               dot((b0 + b1) + (b2 + b3) + ((b4 + b5) + (b6 + b7)), one));
            let pp = pc & 3u;
            let blk = pc >> 2u;
            for (var r = 0u; r < ROWS; r++) {
                let row = min(row0 + r, p.n - 1u);
                let hd = heads[row * p.nb + blk];
                let qi = (row * p.nb + blk) * 8u + pp;
                let q0 = qs[qi];         // positions 0..15 of the pair
                let q1 = qs[qi + 4u];    // positions 16..31
                let dd = q4k_f16x2(hd.x);
                let sm = q4k_scale_min(hd, pp);
                let s = dot16(q0, a0, a1, a2, a3, b0, b1, b2, b3) + dot16(q1, a4, a5, a6, a7, b4, b5, b6, b7);
                acc[r] += dd.x * (sm.x * (s.x + s.z) + sm.y * (s.y + s.w)) - dd.y * (sm.z * sx.x + sm.w * sx.y);
            }
        }
        team_reduce(&acc, ROWS);
        if (t.lane == 0u) {
            for (var r = 0u; r < ROWS; r++) {
                if (row0 + r < p.n) {
                    y[row0 + r] = acc[r];
                }
            }
        }
    }
}
