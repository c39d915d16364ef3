// The GEMV accumulator's item hooks (mm_gemv_acc.wgsl) for the GEMVs that run the format's own
// f32 dot: items, loads, activations and dots straight from the format part.

fn mm_item_x(item: u32) -> FmtX {
    return fmt_x(item);
}

fn mm_item_dot(r: FmtRow, xs: FmtX) -> f32 {
    return fmt_dot(r, xs);
}

alias MmRow = FmtRow;
alias MmX = FmtX;

fn mm_item_load(base: u32, item: u32) -> FmtRow {
    return fmt_load(base, item);
}
