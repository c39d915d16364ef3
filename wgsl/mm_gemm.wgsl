// Weight-matrix GEMM for m > 1: y[i, y_off + r] = sum_c x[i, c] * w[r, c] (y row stride ldy).
// Prepended: mm_common.wgsl and the format part; appended: splitk_tile.wgsl.
// One workgroup of 128 invocations computes a 32 (x rows) x 64 (weight rows) tile, stepping
// through K one 32-column slice at a time (any k: see mm_gemm_x4). Per slice the x slice (4 KiB) and the exactly
// dequantised weight slice (fmt_w4, 8 KiB) are staged in workgroup memory, both transposed to
// [column][4 rows] vec4s, and each invocation accumulates a 4 x 4 block of outputs from two
// vec4 loads per column. Columns past k are zero on both sides. Split-K (src/kernels/splitk.rs):
// workgroup `split` takes slices split * sps .. of its tile and writes its partial tile at
// y[(split * m + row) * ldy + y_off + col] (splits == 1: y is the output itself).

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const TM: u32 = 32u;
const TN: u32 = 64u;
const TK: u32 = 32u;

var<workgroup> xs: array<vec4<f32>, 256>;  // [TK][TM / 4]
var<workgroup> ws: array<vec4<f32>, 512>;  // [TK][TN / 4]

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

// x[row, 4c4 .. 4c4 + 3], zero at columns >= k. Row `row` of x starts at element row * k: one
// vec4 load when k % 4 == 0, else the values one by one (k of a float format may be odd).
fn mm_gemm_x4(row: u32, c4: u32) -> vec4<f32> {
    if (p.k % 4u == 0u) {
        return x[row * p.k4 + c4];
    }
    var v = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let col = 4u * c4 + c;
        if (col < p.k) {
            let e = row * p.k + col;
            v[c] = x[e / 4u][e % 4u];
        }
    }
    return v;
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let t = split_tile(wid.x + wid.y * nwg.x);
    if (!t.live) {
        return;
    }
    let tm = li / 16u;  // output rows m0 + 4tm + i
    let tn = li % 16u;  // output cols n0 + 4tn + j
    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    // Weight staging: invocation li fills columns 16hh .. 16hh + 15 of the slice, row n0 + wr.
    let wr = li / 2u;
    let hh = li % 2u;
    let wrow = t.n0 + wr;
    let wbase = min(wrow, p.n - 1u) * p.row_vec4s;
    let slices = (p.k4 + 7u) / 8u;
    let s_end = min(slices, (t.split + 1u) * p.sps);
    for (var s = t.split * p.sps; s < s_end; s++) {
        for (var e = li; e < TM * 8u; e += 128u) {
            let i = e % TM;
            let c4 = e / TM;
            var v = vec4<f32>(0.0);
            if (t.m0 + i < p.m && s * 8u + c4 < p.k4) {
                v = mm_gemm_x4(t.m0 + i, s * 8u + c4);
            }
            for (var c = 0u; c < 4u; c++) {
                xs[(4u * c4 + c) * 8u + i / 4u][i % 4u] = v[c];
            }
        }
        for (var v4 = 0u; v4 < 4u; v4++) {
            let c4 = s * 8u + 4u * hh + v4;
            var w = vec4<f32>(0.0);
            if (wrow < p.n && c4 < p.k4) {
                w = fmt_w4(wbase, c4);
            }
            for (var c = 0u; c < 4u; c++) {
                ws[(16u * hh + 4u * v4 + c) * 16u + wr / 4u][wr % 4u] = w[c];
            }
        }
        workgroupBarrier();
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
        let row = t.m0 + 4u * tm + i;
        if (row < p.m) {
            for (var jj = 0u; jj < 4u; jj++) {
                let col = t.n0 + 4u * tn + jj;
                if (col < p.n) {
                    y[(t.split * p.m + row) * p.ldy + p.y_off + col] = acc[i][jj];
                }
            }
        }
    }
}
