// Row reduction of the Q4_K GEMV for teams that are one subgroup: one subgroupAdd per row.
// `ROWS`, `p` and `y` are declared by q4k_gemv.wgsl.

fn q4k_store_rows(t: Team, acc: array<f32, 8>, row0: u32) {
    for (var r = 0u; r < ROWS; r++) {
        let s = team_sum(acc[r]);
        if (t.lane == 0u && row0 + r < p.n) {
            y[row0 + r] = s;
        }
    }
}
