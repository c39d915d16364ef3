// Check kernel of the Matrix GEMM's staging (tests only; src/kernels/matmul/matrix.rs): the
// staging functions of mm_gemm_stage.wgsl, with the GEMM's tile overrides, stage step wid.y of
// output tile wid.x (the GEMM's tile order: m0 = (tile / tiles_n) TM, n0 = (tile % tiles_n) TN)
// as the GEMM's invocation li does (CX x chunks and CW runs, chunk c at li + c WG), and the
// slices are copied out as f32: block (tile, step) of out holds TM rows of xs, then TN rows of
// ws, TK4 vec4s each. Runs anywhere with f16 (no cooperative matrices). Composed as: this file,
// mm_gemm_stage.wgsl, mm_common.wgsl, the format part and the run wrapper.

enable f16;

@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

override CX: u32 = 1u;  // x chunks per invocation (the GEMM's `//@CX` count)
override CW: u32 = 1u;  // weight runs per invocation (the GEMM's `//@CW` count)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let tile = wid.x;
    let st = wid.y;
    let m0 = (tile / p.tiles_n) * TM;
    let n0 = (tile % p.tiles_n) * TN;
    for (var c = 0u; c < CX; c++) {
        x_store(x_chunk(li + c * WG, m0, st), li + c * WG);
    }
    for (var c = 0u; c < CW; c++) {
        w_store(w_run(li + c * WG, n0, st), li + c * WG);
    }
    workgroupBarrier();
    let blk = (st * nwg.x + tile) * (TM + TN) * TK4;
    for (var e = li; e < (TM + TN) * TK4; e += WG) {
        let row = e / TK4;
        let v = e % TK4;
        if (row < TM) {
            out[blk + e] = vec4<f32>(xs[row * KS4 + v]);
        } else {
            out[blk + e] = vec4<f32>(ws[(row - TM) * KS4 + v]);
        }
    }
}
