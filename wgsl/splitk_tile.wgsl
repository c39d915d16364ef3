// The work unit of a split-K GEMM workgroup (int4_gemm.wgsl, q4k_gemm.wgsl; appended to them).
// Workgroup wg = split * tiles + tile, tiles = ceil(m / TM) * tiles_n; tile -> the output tile's
// first row m0 and column n0. The GEMM file provides TM, TN and `p` with m, tiles_n and splits.

struct SplitTile {
    live: bool,  // wg < tiles * splits (the grid may be rounded up)
    split: u32,
    m0: u32,
    n0: u32,
}

fn split_tile(wg: u32) -> SplitTile {
    let tiles = ((p.m + TM - 1u) / TM) * p.tiles_n;
    let split = wg / tiles;
    let tile = wg - split * tiles;
    return SplitTile(wg < tiles * p.splits, split, (tile / p.tiles_n) * TM, (tile % p.tiles_n) * TN);
}
