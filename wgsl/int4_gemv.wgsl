// INT4 group-quantised GEMV: y[r] = sum_c (q[r,c] - zero[r,g]) * scale[r,g] * x[c], g = c / group_size.
// Included after team_portable.wgsl or team_subgroup.wgsl. Each team computes ROWS rows at once
// so every x value loaded is used ROWS times; lanes stride over 32-column chunks (one vec4<u32>
// of codes per row: 16-byte loads, consecutive lanes on consecutive chunks).
// Signed codes are turned into unsigned ones by XOR 0x8 per nibble and an extra zero offset of 8:
// (code ^ 8) - 8 = the two's-complement value, so one code path serves both modes.

struct Params {
    n: u32,
    k: u32,
    group_size: u32,
    num_groups: u32,
    row_vec4s: u32,    // row stride of `codes` in vec4<u32> (32 codes each)
    xor_mask: u32,     // 0x88888888 signed, 0 unsigned
    zero_offset: f32,  // 8 signed, 0 unsigned
    has_zeros: u32,
}

override ROWS: u32 = 4u;   // rows per team, 1..8
override GMODE: u32 = 0u;  // 0: group_size % 32 == 0, 1: group_size % 8 == 0, 2: any group size

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

fn zero_at(gi: u32) -> f32 {
    if (p.has_zeros != 0u) {
        return zeros[gi] + p.zero_offset;
    }
    return p.zero_offset;
}

// Dot of the 8 nibbles of `w` (minus z) with columns xa (0..3) and xb (4..7).
fn nib_dot(w: u32, z: f32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    let lo = vec4<f32>((vec4<u32>(w) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u));
    let hi = vec4<f32>((vec4<u32>(w) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u));
    return dot(lo - vec4<f32>(z), xa) + dot(hi - vec4<f32>(z), xb);
}

fn team_main(t: Team) {
    // Whole 32-column chunks go through the vector path (only when no word straddles groups);
    // the rest, column by column.
    var full = p.k / 32u;
    if (GMODE == 2u) {
        full = 0u;
    }
    let blocks = (p.n + ROWS - 1u) / ROWS;
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var acc = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var ch = t.lane; ch < full; ch += t.lanes) {
            let c0 = ch * 32u;
            let xi = ch * 8u;
            let x0 = x[xi];
            let x1 = x[xi + 1u];
            let x2 = x[xi + 2u];
            let x3 = x[xi + 3u];
            let x4 = x[xi + 4u];
            let x5 = x[xi + 5u];
            let x6 = x[xi + 6u];
            let x7 = x[xi + 7u];
            for (var r = 0u; r < ROWS; r++) {
                let row = row0 + r;
                if (row < p.n) {
                    let w = codes[row * p.row_vec4s + ch] ^ vec4<u32>(p.xor_mask);
                    let gbase = row * p.num_groups;
                    if (GMODE == 0u) {
                        let gi = gbase + c0 / p.group_size;
                        let z = zero_at(gi);
                        let d = nib_dot(w.x, z, x0, x1) + nib_dot(w.y, z, x2, x3) + nib_dot(w.z, z, x4, x5) + nib_dot(w.w, z, x6, x7);
                        acc[r] += scales[gi] * d;
                    } else {
                        let g0 = gbase + c0 / p.group_size;
                        let g1 = gbase + (c0 + 8u) / p.group_size;
                        let g2 = gbase + (c0 + 16u) / p.group_size;
                        let g3 = gbase + (c0 + 24u) / p.group_size;
                        acc[r] += scales[g0] * nib_dot(w.x, zero_at(g0), x0, x1)
                                + scales[g1] * nib_dot(w.y, zero_at(g1), x2, x3)
                                + scales[g2] * nib_dot(w.z, zero_at(g2), x4, x5)
                                + scales[g3] * nib_dot(w.w, zero_at(g3), x6, x7);
                    }
                }
            }
        }
        for (var c = full * 32u + t.lane; c < p.k; c += t.lanes) {
            let xv = x[c >> 2u][c & 3u];
            for (var r = 0u; r < ROWS; r++) {
                let row = row0 + r;
                if (row < p.n) {
                    let word = codes[row * p.row_vec4s + (c >> 5u)][(c >> 3u) & 3u] ^ p.xor_mask;
                    let q = f32((word >> (4u * (c & 7u))) & 15u);
                    let gi = row * p.num_groups + c / p.group_size;
                    acc[r] += scales[gi] * (q - zero_at(gi)) * xv;
                }
            }
        }
        for (var r = 0u; r < ROWS; r++) {
            let s = team_sum(acc[r]);
            if (t.lane == 0u && row0 + r < p.n) {
                y[row0 + r] = s;
            }
        }
    }
}
