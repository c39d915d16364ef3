// Weight-matrix GEMM, Matrix variant (src/kernels/matmul/matrix.rs): y[i, y_off + r] =
// sum_c x[i, c] * w[r, c] (y row stride ldy) on 16x16x16 cooperative matrices with f16 inputs
// and f32 accumulation. Composed as: this file (it holds the `enable` directives, so it comes
// first), mm_gemm_stage.wgsl (the staging), mm_common.wgsl, the format part
// (wgsl/fmt_<name>.wgsl), the run wrapper (mm_run_fmt.wgsl where the part has the run hook,
// else mm_run_w4.wgsl over its fmt_w4) and splitk_tile.wgsl. Same outputs as mm_gemm.wgsl; split-K in steps of TK columns: workgroup
// `split` takes the TK-column slices split * sps .. of its tile and writes
// y[(split * m + row) * ldy + y_off + col].
//
// A workgroup computes a TM (x rows) x TN (weight rows) output tile with NSG = SGM x SGN
// subgroups; subgroup (sm, sn) owns MI x NJ 16x16 f32 accumulators, rows 16 (MI sm + i) and
// columns 16 (NJ sn + j) of the tile. K is stepped TK (32 or 64) columns at a time: per step the
// weight slice (TN rows of TK / 32 runs of 32 weights, each run loaded by mm_run_load and decoded
// exactly by mm_run, then rounded to f16) and the x slice (TM rows, f32 rounded to f16) are
// staged in workgroup memory, each row padded to KS = TK + 8 halves (16-byte aligned rows that
// start in different banks), and every subgroup multiplies its A tiles (x rows, row-major) by its
// B tiles (the weight tile read column-major: B(c, r) = W[r][c]). Rows past m or n and columns
// past k are staged as zeros, so padded rows and columns add nothing and are never written. The
// next step's global loads (CX x vec4s and CW runs per invocation, in registers; a run's decode
// waits for the store at the top of the next step) are issued before this step's products, so
// their latency overlaps the matrix work (and other workgroups on the SM overlap the barriers).
//
// Cooperative-matrix rules this file follows (docs/ARCHITECTURE.md, measured on the H100):
// workgroup variables are multiples of 16 bytes; tiles are loaded through vec4<f16> pointers
// with offsets and strides counted in vec4s; matrices are named variables, never arrays (a line
// starting `//@MI ` / `//@NJ ` and the lines between `//@MI begin` .. `//@MI end` are repeated
// for i < MI / j < NJ with {i} / {j} replaced, likewise `//@CX` ({x}) and `//@CW` ({w}), by
// attention::expand_templates before compiling); control flow around every matrix operation is
// workgroup-uniform (no early return: a workgroup past the grid's last tile runs no step and
// writes nothing). The kernel is built for the adapter's one subgroup size SG and checks
// num_subgroups == NSG at run time (a mismatch writes NaN: loud, never silently wrong).

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// The tile overrides (SG, SGM, SGN, MI, NJ, TK and what follows from them), the slices xs and
// ws and their staging functions: mm_gemm_stage.wgsl.
override OS_LEN: u32 = NSG * 256u;
var<workgroup> os: array<f32, OS_LEN>;  // one 16x16 f32 block per subgroup (output staging)

// Write block (bi, bj) of the tile from this subgroup's staging block at `ob` (row-major 16x16):
// each lane every SG-th element, only rows < m and columns < n.
fn out_block(t: SplitTile, bi: u32, bj: u32, ob: u32, lane: u32, sized: bool) {
    for (var e = lane; e < 256u; e += SG) {
        let row = t.m0 + 16u * bi + e / 16u;
        let col = t.n0 + 16u * bj + e % 16u;
        if (t.live && row < p.m && col < p.n) {
            var v = os[ob + e];
            if (!sized) {
                v = bitcast<f32>(0x7fc00000u);
            }
            y[(t.split * p.m + row) * p.ldy + p.y_off + col] = v;
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(num_subgroups) nsg: u32) {
    let t = split_tile(wid.x + wid.y * nwg.x);
    // Built for another subgroup size than the driver chose: NaN outputs; sid is clamped so
    // nothing reads out of bounds meanwhile.
    let sized = nsg == NSG;
    let s = min(sid, NSG - 1u);
    let sm = s / SGN;
    let sn = s - sm * SGN;
    let slices = (p.k4 + TK4 - 1u) / TK4;
    let s0 = t.split * p.sps;
    var s_end = min(slices, s0 + p.sps);
    if (!t.live) {
        s_end = 0u;
    }
    //@MI begin
    //@NJ var c{i}_{j} = coop_mat16x16<f32, C>();
    //@MI end
    // This invocation's chunks of the first step, in registers.
    //@CX var xv{x} = x_chunk(li + {x}u * WG, t.m0, s0);
    //@CW var wv{w} = w_run(li + {w}u * WG, t.n0, s0);
    // Per step: store the chunks (decoding the runs), barrier, load the next step's chunks,
    // multiply, barrier (no subgroup overwrites a slice another still reads).
    for (var st = s0; st < s_end; st++) {
        //@CX x_store(xv{x}, li + {x}u * WG);
        //@CW w_store(wv{w}, li + {w}u * WG);
        workgroupBarrier();
        if (st + 1u < s_end) {
            //@CX xv{x} = x_chunk(li + {x}u * WG, t.m0, st + 1u);
            //@CW wv{w} = w_run(li + {w}u * WG, t.n0, st + 1u);
        }
        for (var kk = 0u; kk < TK / 16u; kk++) {
            //@MI let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&xs[16u * (MI * sm + {i}u) * KS4 + 4u * kk], KS4);
            //@NJ let b{j} = coopLoad<coop_mat16x16<f16, B>>(&ws[16u * (NJ * sn + {j}u) * KS4 + 4u * kk], KS4);
            //@MI begin
            //@NJ c{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{i}_{j});
            //@MI end
        }
        workgroupBarrier();
    }

    // Each accumulator through this subgroup's staging block to y (bounds-checked writes).
    let ob = 256u * s;
    //@MI begin
    //@NJ begin
    coopStoreT(c{i}_{j}, &os[ob], 16u);
    workgroupBarrier();
    out_block(t, MI * sm + {i}u, NJ * sn + {j}u, ob, lane, sized);
    workgroupBarrier();
    //@NJ end
    //@MI end
}
