// INT4 dequantise to f32 [n, k]: one invocation per (row, 8-column word); included after
// interleave.wgsl.

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_words: u32,
    xor_mask: u32,
    zero_offset: f32,
    has_zeros: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + li;
    if (id >= p.n * p.row_words) {
        return;
    }
    let row = id / p.row_words;
    let w = id % p.row_words;
    let word = codes[row * p.row_words + il_phys(w, p.row_words / 4u)] ^ p.xor_mask;
    for (var i = 0u; i < 8u; i++) {
        let c = w * 8u + i;
        if (c < p.k) {
            let gi = row * p.num_groups + c / p.group_size;
            var z = p.zero_offset;
            if (p.has_zeros != 0u) {
                z += zeros[gi];
            }
            out[row * p.k + c] = (f32((word >> (4u * i)) & 15u) - z) * scales[gi];
        }
    }
}
