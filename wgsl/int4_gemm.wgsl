// INT4 GEMM for m > 1 (prefill); included after interleave.wgsl: y[i, r] = sum_c x[i, c] * w[r, c], w dequantised on the fly.
// One workgroup of 64 invocations computes a 16 (x rows) x 64 (weight rows) tile, stepping
// through K in slices of 32 columns staged in workgroup memory (x slice 2 KiB, w slice 8.25 KiB);
// each invocation owns 2 x 8 outputs. Columns past k are zero in both slices.
// Split-K: where the tiles alone are too few workgroups, workgroup `split` takes slices
// split * sps .. of its tile and writes its partial tile at y[(split * m + row) * n + col];
// splitk_reduce.wgsl sums the splits (src/kernels/splitk.rs; splits == 1: y is the output itself).
// splitk_tile.wgsl (appended) maps the workgroup to its split and tile.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_vec4s: u32,
    xor_mask: u32,
    zero_offset: f32,
    has_zeros: u32,
    tiles_n: u32,
    sps: u32,        // K slices per split
    splits: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const TM: u32 = 16u;
const TN: u32 = 64u;
const TK: u32 = 32u;
const WS: u32 = 33u; // padded row stride of the w slice (avoids bank conflicts)

var<workgroup> xs: array<f32, 512>;   // TM * TK
var<workgroup> ws: array<f32, 2112>;  // TN * WS

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let t = split_tile(wid.x + wid.y * nwg.x);
    if (!t.live) {
        return;
    }
    let split = t.split;
    let m0 = t.m0;
    let n0 = t.n0;
    let ty = li / 8u;   // output rows m0 + 2*ty + {0,1}
    let tx = li % 8u;   // output cols n0 + tx + 8*j
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }
    let slices = (p.k + TK - 1u) / TK;
    let s_end = min(slices, (split + 1u) * p.sps);
    for (var s = split * p.sps; s < s_end; s++) {
        let c0 = s * TK;
        for (var e = li; e < TM * TK; e += 64u) {
            let row = m0 + e / TK;
            let col = c0 + e % TK;
            var v = 0.0;
            if (row < p.m && col < p.k) {
                v = x[row * p.k + col];
            }
            xs[e] = v;
        }
        let wrow = n0 + li;
        if (wrow < p.n) {
            // Natural words 4s .. 4s+3 of the row, wherever the interleaved layout put them.
            let base = wrow * p.row_vec4s * 4u;
            var w: vec4<u32>;
            for (var j = 0u; j < 4u; j++) {
                let pw = base + il_phys(4u * s + j, p.row_vec4s);
                w[j] = codes[pw >> 2u][pw & 3u] ^ p.xor_mask;
            }
            for (var j = 0u; j < TK; j++) {
                let col = c0 + j;
                var v = 0.0;
                if (col < p.k) {
                    let q = f32((w[j >> 3u] >> (4u * (j & 7u))) & 15u);
                    let gi = wrow * p.num_groups + col / p.group_size;
                    var z = p.zero_offset;
                    if (p.has_zeros != 0u) {
                        z += zeros[gi];
                    }
                    v = (q - z) * scales[gi];
                }
                ws[li * WS + j] = v;
            }
        } else {
            for (var j = 0u; j < TK; j++) {
                ws[li * WS + j] = 0.0;
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
                    y[(split * p.m + row) * p.n + col] = acc[h * 8u + j];
                }
            }
        }
    }
}
