// Staging of the Matrix GEMM (src/kernels/matmul/matrix.rs; composed after mm_gemm_matrix.wgsl,
// or after the staging check kernel mm_gemm_stage_check.wgsl, which hold the `enable f16`
// directive): the tile overrides, the two f16 slices in workgroup memory and the functions that
// load one K step's x chunks and weight runs into registers and store them into the slices.
// Layout and rules: mm_gemm_matrix.wgsl.

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

override SG: u32 = 32u;            // subgroup size the pipeline is built for
override SGM: u32 = 2u;            // subgroups along m
override SGN: u32 = 4u;            // subgroups along n
override MI: u32 = 4u;             // 16-row blocks per subgroup (the `//@MI` count)
override NJ: u32 = 2u;             // 16-column blocks per subgroup (the `//@NJ` count)
override TK: u32 = 64u;            // columns per step (one split-K slice): 32 or 64
override NSG: u32 = SGM * SGN;
override WG: u32 = NSG * SG;
override TM: u32 = 16u * MI * SGM; // x rows per tile (splitk_tile.wgsl reads TM, TN)
override TN: u32 = 16u * NJ * SGN; // weight rows per tile
override TK4: u32 = TK / 4u;       // vec4s of a staged row
override RPR: u32 = TK / 32u;      // weight runs per staged row
override KS4: u32 = TK4 + 2u;      // row stride of the staged tiles in vec4<f16>: KS = TK + 8 halves
override XS_LEN: u32 = TM * KS4;
override WS_LEN: u32 = TN * KS4;

var<workgroup> xs: array<vec4<f16>, XS_LEN>;  // x slice [TM][KS]
var<workgroup> ws: array<vec4<f16>, WS_LEN>;  // weight slice [TN][KS]

// The format parts' fmt_x reads activations through mm_x4; only the GEMVs use fmt_x.
fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

// x chunk e of step s for the tile at x row m0: row e / TK4 of the tile, vec4 e % TK4 of the
// step's columns (zero past m, k or the tile).
fn x_chunk(e: u32, m0: u32, s: u32) -> vec4<f32> {
    let i = e / TK4;
    let c4 = s * TK4 + e % TK4;
    var v = vec4<f32>(0.0);
    if (i < TM && m0 + i < p.m && c4 < p.k4) {
        v = x[(m0 + i) * p.k4 + c4];
    }
    return v;
}

fn x_store(v: vec4<f32>, e: u32) {
    if (e < TM * TK4) {
        xs[(e / TK4) * KS4 + e % TK4] = vec4<f16>(v);
    }
}

// Weight run e of step s for the tile at weight row n0: row e / RPR of the tile, run e % RPR of
// the step's columns (loads only; zero past the chunk's rows, k or the tile).
fn w_run(e: u32, n0: u32, s: u32) -> MmRun {
    let r = e / RPR;
    let live = r < TN && n0 + r < p.n;
    return mm_run_load(select(0u, (n0 + r) * p.row_vec4s, live), s * RPR + e % RPR, live);
}

// Decode run e and store it as f16: 8 vec4s at row e / RPR, vec4 8 (e % RPR) of the slice.
fn w_store(w: MmRun, e: u32) {
    if (e < TN * RPR) {
        let v = mm_run(w);
        let o = (e / RPR) * KS4 + 8u * (e % RPR);
        ws[o] = vec4<f16>(v[0]);
        ws[o + 1u] = vec4<f16>(v[1]);
        ws[o + 2u] = vec4<f16>(v[2]);
        ws[o + 3u] = vec4<f16>(v[3]);
        ws[o + 4u] = vec4<f16>(v[4]);
        ws[o + 5u] = vec4<f16>(v[5]);
        ws[o + 6u] = vec4<f16>(v[6]);
        ws[o + 7u] = vec4<f16>(v[7]);
    }
}
