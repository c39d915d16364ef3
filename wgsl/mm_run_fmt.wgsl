// Weight runs of the Matrix GEMM (src/kernels/matmul/matrix.rs) for a format part that defines
// the run hook (`FmtRun`, `fmt_run_load`, `fmt_run`; contract: src/formats/mod.rs): a run is the
// 32 weights of columns 32 run .. 32 run + 31 of one row; mm_run_load issues its loads only,
// mm_run decodes it (exactly, as fmt_w4). Such formats have blocks of a multiple of 32 weights,
// so k % 32 == 0 and a run lies wholly inside or wholly past the row; runs past k, and runs of
// rows that are not `live`, are zeros and load nothing. The other wrapper: mm_run_w4.wgsl.

struct MmRun {
    f: FmtRun,
    live: bool,
}

fn mm_run_load(base: u32, run: u32, live: bool) -> MmRun {
    var r: MmRun;
    if (live && run < p.k / 32u) {
        r = MmRun(fmt_run_load(base, run), true);
    }
    return r;
}

fn mm_run(r: MmRun) -> array<vec4<f32>, 8> {
    var v: array<vec4<f32>, 8>;
    if (r.live) {
        v = fmt_run(r.f);
    }
    return v;
}
