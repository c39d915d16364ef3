// Weight runs of the Matrix GEMM (src/kernels/matmul/matrix.rs) for a format part without the
// run hook: a run (columns 32 run .. 32 run + 31 of one row) is eight fmt_w4 calls, made (loads
// and arithmetic) in mm_run_load; columns past k (vec4s c4 >= k4, as k % 4 == 0) and rows that
// are not `live` are zeros. The wrapper for parts with the hook: mm_run_fmt.wgsl.

alias MmRun = array<vec4<f32>, 8>;

fn mm_run_w4(base: u32, c4: u32, live: bool) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (live && c4 < p.k4) {
        v = fmt_w4(base, c4);
    }
    return v;
}

fn mm_run_load(base: u32, run: u32, live: bool) -> MmRun {
    let c = 8u * run;
    return MmRun(mm_run_w4(base, c, live), mm_run_w4(base, c + 1u, live), mm_run_w4(base, c + 2u, live), mm_run_w4(base, c + 3u, live),
                 mm_run_w4(base, c + 4u, live), mm_run_w4(base, c + 5u, live), mm_run_w4(base, c + 6u, live), mm_run_w4(base, c + 7u, live));
}

fn mm_run(r: MmRun) -> MmRun {
    return r;
}
