// RoPE in place on x [tokens, heads, d] (f32, or f16 as pairs in u32 words): pair (a, b) of
// frequency i becomes (a cos - b sin, b cos + a sin), (cos, sin) = table[pos * half + i].
// Every invocation owns whole u32 words, so f16 read-modify-writes never race (see MODE).

// Params, F16, NEOX, positions, table, cos_sin and unit_of: rope_apply_common.wgsl (prepended).

override MODE: u32 = 0u;      // 0: one pair per unit; 1: two pairs (f16 half-split, d/2 even); 2: a whole head

@group(0) @binding(1) var<storage, read_write> x: array<u32>;

fn ld(e: u32) -> f32 {
    if (F16) {
        return unpack2x16float(x[e >> 1u])[e & 1u];
    }
    return bitcast<f32>(x[e]);
}

fn st(e: u32, v: f32) {
    if (F16) {
        var w = unpack2x16float(x[e >> 1u]);
        w[e & 1u] = v;
        x[e >> 1u] = pack2x16float(w);
    } else {
        x[e] = bitcast<u32>(v);
    }
}

fn rotate(base: u32, i: u32, cs: vec2<f32>) {
    var ea = 2u * i;
    var eb = 2u * i + 1u;
    if (NEOX) {
        ea = i;
        eb = i + p.half;
    }
    let a = ld(base + ea);
    let b = ld(base + eb);
    st(base + ea, a * cs.x - b * cs.y);
    st(base + eb, b * cs.x + a * cs.y);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let w = unit_of((wid.x + wid.y * nwg.x) * 64u + li);
    if (w.row == 0xffffffffu) {
        return;
    }
    let u = w.u;
    let pos = w.pos;
    let base = w.row * p.d;
    if (MODE == 0u) {
        rotate(base, u, cos_sin(pos, u));
    } else if (MODE == 1u) {
        rotate(base, 2u * u, cos_sin(pos, 2u * u));
        rotate(base, 2u * u + 1u, cos_sin(pos, 2u * u + 1u));
    } else {
        for (var i = 0u; i < p.half; i++) {
            rotate(base, i, cos_sin(pos, i));
        }
    }
}
