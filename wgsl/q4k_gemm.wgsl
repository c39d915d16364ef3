// Q4_K GEMM for m > 1 (prefill): y[i, r] = sum_c x[i, c] * w[r, c]; q4k_common.wgsl is prepended.
// One workgroup of 128 invocations computes a 32 (x rows) x 64 (weight rows) tile, stepping
// through K one 32-column sub-block at a time. Per step the x slice (4 KiB) and the exactly
// dequantised weight slice (8 KiB) are staged in workgroup memory, both transposed to
// [column][4 rows] vec4s, and each invocation accumulates a 4 x 4 block of outputs from two
// vec4 loads per column. Weights are dequantised per slice: no full-size temporary.
// Split-K (src/kernels/splitk.rs): workgroup `split` takes sub-blocks split * sps .. of its tile
// and writes its partial tile at y[(split * m + row) * n + col]; splitk_reduce.wgsl sums them
// (splits == 1: y is the output itself). splitk_tile.wgsl (appended) maps the workgroup to its
// split and tile.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    nb: u32,
    tiles_n: u32,
    sps: u32,        // 32-column sub-blocks per split
    splits: u32,
    _p0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> heads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const TM: u32 = 32u;
const TN: u32 = 64u;
const TK: u32 = 32u;

var<workgroup> xs: array<vec4<f32>, 256>;  // [TK][TM / 4]: xs[c * 8 + i / 4][i % 4] = x[m0 + i, c0 + c]
var<workgroup> ws: array<vec4<f32>, 512>;  // [TK][TN / 4]: ws[c * 16 + r / 4][r % 4] = w[n0 + r, c0 + c]

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let t = split_tile(wid.x + wid.y * nwg.x);
    if (!t.live) {
        return;
    }
    let split = t.split;
    let m0 = t.m0;
    let n0 = t.n0;
    let tm = li / 16u;  // output rows m0 + 4tm + i
    let tn = li % 16u;  // output cols n0 + 4tn + j
    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    // Dequantisation: invocation li fills positions 16hh .. 16hh + 15 of weight row n0 + wr.
    let wr = li / 2u;
    let hh = li % 2u;
    let wrow = n0 + wr;
    let k4 = p.k / 4u;
    let s_end = min(p.nb * 8u, (split + 1u) * p.sps);
    for (var s = split * p.sps; s < s_end; s++) {
        // x slice: 32 rows x 8 vec4s; lanes vary the row so the transposed stores don't conflict.
        for (var e = li; e < TM * 8u; e += 128u) {
            let i = e % TM;
            let c4 = e / TM;
            var v = vec4<f32>(0.0);
            if (m0 + i < p.m) {
                v = x[(m0 + i) * k4 + s * 8u + c4];
            }
            for (var c = 0u; c < 4u; c++) {
                xs[(4u * c4 + c) * 8u + i / 4u][i % 4u] = v[c];
            }
        }
        var ds = 0.0;
        var dm = 0.0;
        var q = vec4<u32>(0u);
        let j = s & 7u;  // sub-block: word component j / 2 (pair), low nibbles for even j
        if (wrow < p.n) {
            let g = wrow * p.nb + (s >> 3u);
            let hd = heads[g];
            let dd = q4k_f16x2(hd.x);
            let sm = q4k_scales(hd);
            if (j < 4u) {
                ds = dd.x * sm.sc03[j];
                dm = dd.y * sm.m03[j];
            } else {
                ds = dd.x * sm.sc47[j - 4u];
                dm = dd.y * sm.m47[j - 4u];
            }
            // Words 4hh .. 4hh + 3 of pair j / 2: positions 16hh .. 16hh + 15.
            for (var w = 0u; w < 4u; w++) {
                q[w] = qs[g * 8u + 4u * hh + w][j >> 1u];
            }
        }
        // Rows past n get ds = dm = 0, i.e. zero weights.
        let shift = (j & 1u) * 4u;
        for (var c = 0u; c < 16u; c++) {
            let code = f32((q[c / 4u] >> (8u * (c % 4u) + shift)) & 15u);
            ws[(16u * hh + c) * 16u + wr / 4u][wr % 4u] = fma(ds, code, -dm);
        }
        workgroupBarrier();
        // Per-slice partial sums, added once per slice: the rounding error grows with K / 32
        // additions instead of K.
        var part = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
        for (var c = 0u; c < TK; c++) {
            let a = xs[c * 8u + tm];
            let b = ws[c * 16u + tn];
            part[0] = fma(vec4<f32>(a.x), b, part[0]);
            part[1] = fma(vec4<f32>(a.y), b, part[1]);
            part[2] = fma(vec4<f32>(a.z), b, part[2]);
            part[3] = fma(vec4<f32>(a.w), b, part[3]);
        }
        for (var i = 0u; i < 4u; i++) {
            acc[i] += part[i];
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let row = m0 + 4u * tm + i;
        if (row < p.m) {
            for (var jj = 0u; jj < 4u; jj++) {
                let col = n0 + 4u * tn + jj;
                if (col < p.n) {
                    y[(split * p.m + row) * p.n + col] = acc[i][jj];
                }
            }
        }
    }
}
