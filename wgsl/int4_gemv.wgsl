// INT4 group-quantised GEMV: y[r] = sum_c (q[r,c] - zero[r,g]) * scale[r,g] * x[c], g = c / group_size.
// Included after a team file (team_portable / team_subgroup) and interleave.wgsl. A team (a
// subgroup, a slice of a workgroup or a workgroup: see the team file) computes ROWS rows at a time,
// so each x value loaded serves ROWS rows; its lanes stride over the rows' vec4s of codes (16-byte
// loads, interleaved layout: x loads coalesced too), UNROLL vec4 steps per iteration with all
// code and scale loads of the iteration issued before any of its arithmetic. Rows past n are
// clamped to row n - 1 for loading (loads stay unconditional) and never written. Accumulators are
// one vec4 (component r = row r), reduced with one team_sum per row block.
// Signed codes are made unsigned by XOR 0x8 per nibble and a zero offset of 8
// ((code ^ 8) - 8 is the two's-complement value): one code path for both modes.

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

override ROWS: u32 = 2u;       // rows per team, 1..4
override UNROLL: u32 = 2u;     // vec4 steps per lane per iteration: 1, 2 or 4
override GMODE: u32 = 0u;      // 0: group_size % 8 == 0 (a word never straddles groups); 1: any
override GSHIFT: u32 = 99u;    // log2(group_size / 8) when that is a power of two, else 99

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

// Group of natural word w (GMODE 0).
fn word_group(w: u32) -> u32 {
    if (GSHIFT < 32u) {
        return w >> (GSHIFT & 31u);
    }
    return (w * 8u) / p.group_size;
}

// Number of leading vec4s of a row whose four words hold 8 columns < k each (all vec4s but
// some at the end of the last interleave block). The GMODE 0 fast path covers exactly these.
fn full_vec4s(vec4s: u32) -> u32 {
    let lastv = ((vec4s - 1u) >> 5u) << 5u;  // first vec4 of the last block
    let s = vec4s - lastv;                    // its stride
    let lastw = lastv * 4u;                   // its first natural word
    let kw = p.k / 8u;                        // words with 8 valid columns
    // vec4 lastv + i is full iff lastw + i + 3s < kw.
    let lim = select(0u, kw - lastw - 3u * s, kw > lastw + 3u * s);
    return lastv + min(lim, s);
}

// Dequantisation by masks alone: nibble i (0..3) of a 16-bit half, masked in place and OR-ed
// into the bits of 2^(23 - 4i), is the float 2^(23 - 4i) + code (exact: its ulp is 1).
// Subtracting bias_i = 2^(23 - 4i) + offset (exact) leaves code - offset, so each weight costs
// one LOP3, one FADD and one FFMA, and x is used as loaded.
const NIB_MASKS = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const NIB_MAGIC = vec4<u32>(0x4b000000u, 0x49000000u, 0x47000000u, 0x45000000u);

// acc + sum_i (q_i - offset) * xv_i over the 4 nibbles of the low 16 bits of h.
fn half_dot(h: u32, xv: vec4<f32>, bias: vec4<f32>, acc: f32) -> f32 {
    let m = bitcast<vec4<f32>>((vec4<u32>(h) & NIB_MASKS) | NIB_MAGIC) - bias;
    return fma(m.w, xv.w, fma(m.z, xv.z, fma(m.y, xv.y, fma(m.x, xv.x, acc))));
}

// sum_e (q_e - offset) * x_e over one word (xa: x of columns 0-3, xb: 4-7).
fn word_q(w: u32, xa: vec4<f32>, xb: vec4<f32>, bias: vec4<f32>) -> f32 {
    return half_dot(w >> 16u, xb, bias, half_dot(w, xa, bias, 0.0));
}

// Column-by-column contribution of natural word wi (any group size, partial words).
fn word_slow(row: u32, wi: u32, w: u32) -> f32 {
    var a = 0.0;
    for (var e = 0u; e < 8u; e++) {
        let c = wi * 8u + e;
        if (c < p.k) {
            let gi = row * p.num_groups + c / p.group_size;
            let q = f32((w >> (4u * e)) & 15u);
            a += scales[gi] * (q - zero_at(gi)) * x[c >> 2u][c & 3u];
        }
    }
    return a;
}

// Groups of the four words of vec4 v (GMODE 0).
fn vec4_groups(v: u32) -> vec4<u32> {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    return vec4<u32>(word_group(w0), word_group(w0 + s), word_group(w0 + 2u * s), word_group(w0 + 3u * s));
}

// One row's codes (XOR applied) and the scales of their words at one vec4.
struct RowData {
    c: vec4<u32>,
    s: vec4<f32>,
}

// ROWS rows at one vec4 (r1..r3 unused when ROWS is smaller).
struct Slab {
    r0: RowData,
    r1: RowData,
    r2: RowData,
    r3: RowData,
}

fn row_load(row: u32, v: u32, g: vec4<u32>) -> RowData {
    let gi = vec4<u32>(row * p.num_groups) + g;
    return RowData(codes[row * p.row_vec4s + v] ^ vec4<u32>(p.xor_mask),
                   vec4<f32>(scales[gi.x], scales[gi.y], scales[gi.z], scales[gi.w]));
}

fn slab_load(rows: vec4<u32>, v: u32) -> Slab {
    let g = vec4_groups(v);
    var sl: Slab;
    sl.r0 = row_load(rows.x, v, g);
    if (ROWS > 1u) {
        sl.r1 = row_load(rows.y, v, g);
    }
    if (ROWS > 2u) {
        sl.r2 = row_load(rows.z, v, g);
    }
    if (ROWS > 3u) {
        sl.r3 = row_load(rows.w, v, g);
    }
    return sl;
}

// One word position of a vec4 for the ROWS rows: codes cw and scales sw (component r: row r),
// x of the word's columns (xa: 0-3, xb: 4-7), its group gj; returns the rows' partial dots.
fn word_rows(cw: vec4<u32>, sw: vec4<f32>, xa: vec4<f32>, xb: vec4<f32>, gj: u32, rows: vec4<u32>, bias: vec4<f32>) -> vec4<f32> {
    var d = vec4<f32>(0.0);
    d.x = word_q(cw.x, xa, xb, bias);
    if (ROWS > 1u) {
        d.y = word_q(cw.y, xa, xb, bias);
    }
    if (ROWS > 2u) {
        d.z = word_q(cw.z, xa, xb, bias);
    }
    if (ROWS > 3u) {
        d.w = word_q(cw.w, xa, xb, bias);
    }
    if (p.has_zeros != 0u) {
        let gi = rows * p.num_groups + vec4<u32>(gj);
        d -= vec4<f32>(zeros[gi.x], zeros[gi.y], zeros[gi.z], zeros[gi.w]) * dot(xa + xb, vec4<f32>(1.0));
    }
    return sw * d;
}

// Partial dots of ROWS rows (component r: row r) over vec4 v, from its loaded slab. The x of all
// four words is loaded first.
fn slab_math(sl: Slab, rows: vec4<u32>, v: u32, bias: vec4<f32>) -> vec4<f32> {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    let xa0 = x[2u * w0];
    let xb0 = x[2u * w0 + 1u];
    let xa1 = x[2u * (w0 + s)];
    let xb1 = x[2u * (w0 + s) + 1u];
    let xa2 = x[2u * (w0 + 2u * s)];
    let xb2 = x[2u * (w0 + 2u * s) + 1u];
    let xa3 = x[2u * (w0 + 3u * s)];
    let xb3 = x[2u * (w0 + 3u * s) + 1u];
    let g = vec4_groups(v);
    var a = word_rows(vec4<u32>(sl.r0.c.x, sl.r1.c.x, sl.r2.c.x, sl.r3.c.x), vec4<f32>(sl.r0.s.x, sl.r1.s.x, sl.r2.s.x, sl.r3.s.x), xa0, xb0, g.x, rows, bias);
    a += word_rows(vec4<u32>(sl.r0.c.y, sl.r1.c.y, sl.r2.c.y, sl.r3.c.y), vec4<f32>(sl.r0.s.y, sl.r1.s.y, sl.r2.s.y, sl.r3.s.y), xa1, xb1, g.y, rows, bias);
    a += word_rows(vec4<u32>(sl.r0.c.z, sl.r1.c.z, sl.r2.c.z, sl.r3.c.z), vec4<f32>(sl.r0.s.z, sl.r1.s.z, sl.r2.s.z, sl.r3.s.z), xa2, xb2, g.z, rows, bias);
    a += word_rows(vec4<u32>(sl.r0.c.w, sl.r1.c.w, sl.r2.c.w, sl.r3.c.w), vec4<f32>(sl.r0.s.w, sl.r1.s.w, sl.r2.s.w, sl.r3.s.w), xa3, xb3, g.w, rows, bias);
    return a;
}

// Any vec4 (any group size, partial words), column by column.
fn row_slow(row: u32, v: u32) -> f32 {
    let w0 = il_word0(v);
    let s = il_stride(v, p.row_vec4s);
    let w = codes[row * p.row_vec4s + v] ^ vec4<u32>(p.xor_mask);
    return word_slow(row, w0, w.x) + word_slow(row, w0 + s, w.y) + word_slow(row, w0 + 2u * s, w.z) + word_slow(row, w0 + 3u * s, w.w);
}

fn slab_slow(rows: vec4<u32>, v: u32) -> vec4<f32> {
    var a = vec4<f32>(0.0);
    a.x = row_slow(rows.x, v);
    if (ROWS > 1u) {
        a.y = row_slow(rows.y, v);
    }
    if (ROWS > 2u) {
        a.z = row_slow(rows.z, v);
    }
    if (ROWS > 3u) {
        a.w = row_slow(rows.w, v);
    }
    return a;
}

fn team_main(t: Team) {
    let vec4s = p.row_vec4s;
    let full = select(0u, full_vec4s(vec4s), GMODE == 0u);
    let blocks = (p.n + ROWS - 1u) / ROWS;
    let step = t.lanes * UNROLL;
    let bias = vec4<f32>(8388608.0, 524288.0, 32768.0, 2048.0) + vec4<f32>(p.zero_offset);
    // Every team runs the same number of row blocks (team_sum may hold a barrier); a team past
    // the last block skips the work.
    for (var base = 0u; base < blocks; base += t.count) {
        let rb = base + t.id;
        let live = rb < blocks;
        let rows = min(vec4<u32>(rb * ROWS) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n - 1u));
        var acc = vec4<f32>(0.0);
        var v0 = 0u;
        if (live) {
            for (; v0 + step <= full; v0 += step) {
                let v = v0 + t.lane;
                let sa = slab_load(rows, v);
                var sb: Slab;
                var sc: Slab;
                var sd: Slab;
                if (UNROLL > 1u) {
                    sb = slab_load(rows, v + t.lanes);
                }
                if (UNROLL > 2u) {
                    sc = slab_load(rows, v + 2u * t.lanes);
                    sd = slab_load(rows, v + 3u * t.lanes);
                }
                acc += slab_math(sa, rows, v, bias);
                if (UNROLL > 1u) {
                    acc += slab_math(sb, rows, v + t.lanes, bias);
                }
                if (UNROLL > 2u) {
                    acc += slab_math(sc, rows, v + 2u * t.lanes, bias);
                    acc += slab_math(sd, rows, v + 3u * t.lanes, bias);
                }
            }
            for (var v = v0 + t.lane; v < vec4s; v += t.lanes) {
                if (v < full) {
                    acc += slab_math(slab_load(rows, v), rows, v, bias);
                } else {
                    acc += slab_slow(rows, v);
                }
            }
        }
        let tot = team_sum(acc);
        if (live && t.lane == 0u) {
            let r0 = rb * ROWS;
            y[r0] = tot.x;
            if (ROWS > 1u && r0 + 1u < p.n) {
                y[r0 + 1u] = tot.y;
            }
            if (ROWS > 2u && r0 + 2u < p.n) {
                y[r0 + 2u] = tot.z;
            }
            if (ROWS > 3u && r0 + 3u < p.n) {
                y[r0 + 3u] = tot.w;
            }
        }
    }
}
