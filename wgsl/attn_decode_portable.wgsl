// Decode attention, Portable variant: entry point and Q K^T for one tile, one invocation per key
// (each reads its K row as vec4<u32>s and dots it with all GB query heads in workgroup memory).

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    decode_main(wid.x + wid.y * nwg.x, li);
}

fn tile_scores(t0: u32, n: u32, hk: u32, gbn: u32, li: u32) {
    for (var j = li; j < n; j += WG) {
        let row = ((t0 + j) * p.kv_heads + hk) * WORDS;
        var acc: array<f32, 8>;
        for (var g = 0u; g < 8u; g++) {
            acc[g] = 0.0;
        }
        if (VEC4) {
            for (var c = 0u; c < WORDS / 4u; c++) {
                add_words(&acc, row, c, gbn);
            }
        } else {
            for (var w = 0u; w < WORDS; w++) {
                add_word(&acc, row, w, gbn);
            }
        }
        for (var g = 0u; g < GB; g++) {
            sc[g * TILE + j] = select(0.0, acc[g], g < gbn);
        }
    }
}
