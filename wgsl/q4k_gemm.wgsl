// Q4_K GEMM for m > 1 (prefill): y[i, r] = sum_c x[i, c] * w[r, c]; q4k_common.wgsl is prepended.
// One workgroup of 64 invocations computes a 16 (x rows) x 64 (weight rows) tile, stepping
// through K one 32-column sub-block at a time: the x slice (2 KiB) and the dequantised weight
// slice (8.25 KiB, exact values) are staged in workgroup memory; each invocation owns 2 x 8
// outputs. No full-size temporary: weights are dequantised per slice.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    nb: u32,
    tiles_n: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const TM: u32 = 16u;
const TN: u32 = 64u;
const TK: u32 = 32u;
const WS: u32 = 33u; // padded row stride of the w slice (avoids bank conflicts)

var<workgroup> xs: array<f32, 512>;   // TM * TK
var<workgroup> ws: array<f32, 2112>;  // TN * WS

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let tile = wid.x + wid.y * nwg.x;
    let tiles_m = (p.m + TM - 1u) / TM;
    if (tile >= tiles_m * p.tiles_n) {
        return;
    }
    let m0 = (tile / p.tiles_n) * TM;
    let n0 = (tile % p.tiles_n) * TN;
    let ty = li / 8u;   // output rows m0 + 2*ty + {0,1}
    let tx = li % 8u;   // output cols n0 + tx + 8*j
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }
    let slices = p.nb * 8u;
    let wrow = n0 + li;
    for (var s = 0u; s < slices; s++) {
        let c0 = s * TK;
        for (var e = li; e < TM * TK; e += 64u) {
            let row = m0 + e / TK;
            var v = 0.0;
            if (row < p.m) {
                v = x[row * p.k + c0 + e % TK];
            }
            xs[e] = v;
        }
        if (wrow < p.n) {
            // Sub-block j of block b: pair j / 2, low nibbles for even j.
            let g = wrow * p.nb + (s >> 3u);
            let j = s & 7u;
            let hd = heads[g];
            let dd = q4k_f16x2(hd.x);
            let sm = q4k_scale_min(hd, j >> 1u);
            let odd = (j & 1u) == 1u;
            let ds = dd.x * select(sm.x, sm.y, odd);
            let dm = dd.y * select(sm.z, sm.w, odd);
            let qa = qs[g * 8u + (j >> 1u)];        // positions 0..15
            let qb = qs[g * 8u + 4u + (j >> 1u)];   // positions 16..31
            let shift = (j & 1u) * 4u;
            for (var i = 0u; i < TK; i++) {
                var word = qa[(i >> 2u) & 3u];
                if (i >= 16u) {
                    word = qb[(i >> 2u) & 3u];
                }
                let q = f32((word >> (8u * (i & 3u) + shift)) & 15u);
                ws[li * WS + i] = fma(ds, q, -dm);
            }
        } else {
            for (var i = 0u; i < TK; i++) {
                ws[li * WS + i] = 0.0;
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            let a0 = xs[(2u * ty) * TK + kk];
            let a1 = xs[(2u * ty + 1u) * TK + kk];
            for (var j = 0u; j < 8u; j++) {
                let b = ws[(tx + 8u * j) * WS + kk];
                acc[j] += a0 * b;
                acc[8u + j] += a1 * b;
            }
        }
        workgroupBarrier();
    }
    for (var h = 0u; h < 2u; h++) {
        let row = m0 + 2u * ty + h;
        if (row < p.m) {
            for (var j = 0u; j < 8u; j++) {
                let col = n0 + tx + 8u * j;
                if (col < p.n) {
                    y[row * p.n + col] = acc[h * 8u + j];
                }
            }
        }
    }
}
