// Row reduction of the Q4_K GEMV for teams that are one workgroup (Portable): all ROWS rows
// at once through workgroup memory, two barrier-separated stages (8 partial sums per row,
// then one lane per row) instead of a log2(WG)-step tree per row. Needs WG a multiple of 8
// and ROWS * WG <= 1024 (checked on the host). `ROWS`, `p` and `y` are declared by q4k_gemv.wgsl.

var<workgroup> q4k_red: array<f32, 1024>;
var<workgroup> q4k_part: array<f32, 64>;

fn q4k_store_rows(t: Team, acc: array<f32, 8>, row0: u32) {
    for (var r = 0u; r < ROWS; r++) {
        q4k_red[r * t.lanes + t.lane] = acc[r];
    }
    workgroupBarrier();
    let per = t.lanes / 8u;
    if (t.lane < ROWS * 8u) {
        let base = (t.lane / 8u) * t.lanes + (t.lane % 8u) * per;
        var s = 0.0;
        for (var i = 0u; i < per; i++) {
            s += q4k_red[base + i];
        }
        q4k_part[t.lane] = s;
    }
    workgroupBarrier();
    if (t.lane < ROWS && row0 + t.lane < p.n) {
        let b = t.lane * 8u;
        y[row0 + t.lane] = ((q4k_part[b] + q4k_part[b + 1u]) + (q4k_part[b + 2u] + q4k_part[b + 3u]))
                         + ((q4k_part[b + 4u] + q4k_part[b + 5u]) + (q4k_part[b + 6u] + q4k_part[b + 7u]));
    }
    workgroupBarrier();  // q4k_red and q4k_part are reused by the team's next rows
}
