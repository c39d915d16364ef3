// INT8 GEMV: y[r] = sum_c (q[r,c] - zero) * scale * x[c], scale/zero per tensor or per row.
// Included after a team file. Like int4_gemv: ROWS rows per team, lanes stride over 16-column
// chunks (one vec4<u32> of codes per row). Signed codes become unsigned by XOR 0x80 per byte
// and a zero offset of 128.

struct Params {
    n: u32,
    k: u32,
    row_vec4s: u32,    // row stride of `codes` in vec4<u32> (16 codes each)
    xor_mask: u32,     // 0x80808080 signed, 0 unsigned
    zero_offset: f32,  // 128 signed, 0 unsigned
    per_row: u32,      // 1: scales/zeros have n entries, 0: one entry
    _p0: u32,
    _p1: u32,
}

override ROWS: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

fn byte_dot(w: u32, z: f32, xv: vec4<f32>) -> f32 {
    let b = vec4<f32>((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));
    return dot(b - vec4<f32>(z), xv);
}

fn team_main(t: Team) {
    let full = p.k / 16u;
    let blocks = (p.n + ROWS - 1u) / ROWS;
    for (var rb = t.id; rb < blocks; rb += t.count) {
        let row0 = rb * ROWS;
        var zs = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var r = 0u; r < ROWS; r++) {
            zs[r] = zeros[select(0u, min(row0 + r, p.n - 1u), p.per_row != 0u)] + p.zero_offset;
        }
        var acc = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var ch = t.lane; ch < full; ch += t.lanes) {
            let xi = ch * 4u;
            let x0 = x[xi];
            let x1 = x[xi + 1u];
            let x2 = x[xi + 2u];
            let x3 = x[xi + 3u];
            for (var r = 0u; r < ROWS; r++) {
                let row = row0 + r;
                if (row < p.n) {
                    let w = codes[row * p.row_vec4s + ch] ^ vec4<u32>(p.xor_mask);
                    let z = zs[r];
                    acc[r] += byte_dot(w.x, z, x0) + byte_dot(w.y, z, x1) + byte_dot(w.z, z, x2) + byte_dot(w.w, z, x3);
                }
            }
        }
        for (var c = full * 16u + t.lane; c < p.k; c += t.lanes) {
            let xv = x[c >> 2u][c & 3u];
            for (var r = 0u; r < ROWS; r++) {
                let row = row0 + r;
                if (row < p.n) {
                    let word = codes[row * p.row_vec4s + (c >> 4u)][(c >> 2u) & 3u] ^ p.xor_mask;
                    acc[r] += (f32((word >> (8u * (c & 3u))) & 255u) - zs[r]) * xv;
                }
            }
        }
        for (var r = 0u; r < ROWS; r++) {
            let s = team_sum(acc[r]);
            let row = row0 + r;
            if (t.lane == 0u && row < p.n) {
                y[row] = s * scales[select(0u, row, p.per_row != 0u)];
            }
        }
    }
}
