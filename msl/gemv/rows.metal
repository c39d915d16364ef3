
// ---- the row driver (the twin's mm_rows.wgsl with mm_gemv_acc.wgsl and mm_items.wgsl) ----

// Rows rb * ROWS .. of every row block the team owns: per item the rows' fmt_load first, then the
// item's fmt_x, then one fmt_dot per row; the team's sum; thread 0 applies the epilogue.
template <uint ROWS, uint EPI>
static void gemv_rows(constant MmParams& p, device const uint4* wq, device const float4* x, device float* y, threadgroup float4* scratch,
                      Team t) {
    const uint blocks = (p.n + ROWS - 1u) / ROWS;
    // Every team runs the same number of row blocks (team_sum holds barriers); a team past the
    // last block skips the work.
    for (uint base = 0; base < blocks; base += t.count) {
        const uint rb = base + t.id;
        const bool live = rb < blocks;
        float4 acc = float4(0.0f);
        for (uint i = live ? t.lane : p.items; i < p.items; i += t.lanes) {
            FmtRow w[ROWS];
            for (uint r = 0; r < ROWS; ++r) {
                w[r] = fmt_load(p, wq, min(rb * ROWS + r, p.n - 1u) * p.row_vec4s, i);
            }
            const FmtX xi = fmt_x(p, x, i);
            for (uint r = 0; r < ROWS; ++r) {
                acc[r] += fmt_dot(w[r], xi);
            }
        }
        const float4 tot = team_sum(acc, scratch, t);
        if (live && t.lane == 0u) {
            store<ROWS, EPI>(p, y, rb * ROWS, tot);
        }
    }
}

// ---- the entry points follow ----
