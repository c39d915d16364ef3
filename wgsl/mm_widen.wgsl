// First pass of the two-pass Matrix GEMM (src/kernels/matmul/wide.rs): the
// weight chunk rounded to f16, row-major with rows of `p.items` runs (the row length padded to
// whole 64-column steps) and `p.m` rows (padded to whole tiles); padding is written as zeros, so
// the second pass reads whole tiles and steps without bounds. Prepended: `enable f16;`,
// mm_common.wgsl, the format part and its run wrapper (mm_run_fmt.wgsl or mm_run_w4.wgsl, which
// decode a run of 32 weights exactly, zeros past k and for rows that are not live). One
// invocation decodes one run of the output; the workgroup's 64 runs go through workgroup memory
// so that its stores are consecutive vec4s across the invocations.

@group(0) @binding(2) var<storage, read_write> out: array<vec4<f16>>;

var<workgroup> runs: array<vec4<f16>, 512>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let total = p.m * p.items;
    var v: array<vec4<f32>, 8>;
    if (i < total) {
        let r = i / p.items;
        let live = r < p.n;
        v = mm_run(mm_run_load(select(0u, r * p.row_vec4s, live), i - r * p.items, live));
    }
    for (var j = 0u; j < 8u; j++) {
        runs[8u * li + j] = vec4<f16>(v[j]);
    }
    workgroupBarrier();
    let base = 8u * (i - li);
    for (var s = 0u; s < 8u; s++) {
        let e = 64u * s + li;
        if (base + e < 8u * total) {
            out[base + e] = runs[e];
        }
    }
}
