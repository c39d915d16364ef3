// RoPE in place on x [tokens, heads, d], 16 bytes per invocation: the same rotation as
// rope_apply.wgsl (pair (a, b) of frequency i becomes (a cos - b sin, b cos + a sin),
// (cos, sin) = table[pos * half + i]) for heads whose rows are whole 16-byte vectors.
// A vector holds EPV = 4 (f32) or 8 (f16) elements.
//   NEOX (pairs (i, i + d/2)): invocation u of a head loads vector u of the first half (the a's of
//   pairs u EPV ..) and the matching vector of the second half (their b's); needs EPV | d/2.
//   Interleaved (pairs (2i, 2i + 1)): invocation u loads vector u of the row, EPV / 2 whole pairs;
//   needs EPV | d.
// Each invocation reads and writes only its own vectors, so nothing races.

// Params, F16, NEOX, positions, table, cos_sin and unit_of: rope_apply_common.wgsl (prepended);
// `units` is the vectors per head an invocation takes: NEOX d/2 / EPV, else d / EPV.

override EPV: u32 = select(4u, 8u, F16);  // elements per 16-byte vector

@group(0) @binding(1) var<storage, read_write> x: array<vec4<u32>>;

// The EPV elements of a vector as f32 (f32: elements 4..7 are unused).
fn widen(w: vec4<u32>) -> array<f32, 8> {
    if (F16) {
        let a = unpack2x16float(w.x);
        let b = unpack2x16float(w.y);
        let c = unpack2x16float(w.z);
        let e = unpack2x16float(w.w);
        return array<f32, 8>(a.x, a.y, b.x, b.y, c.x, c.y, e.x, e.y);
    }
    let f = bitcast<vec4<f32>>(w);
    return array<f32, 8>(f.x, f.y, f.z, f.w, 0.0, 0.0, 0.0, 0.0);
}

fn narrow(v: array<f32, 8>) -> vec4<u32> {
    if (F16) {
        return vec4<u32>(pack2x16float(vec2<f32>(v[0], v[1])), pack2x16float(vec2<f32>(v[2], v[3])),
                         pack2x16float(vec2<f32>(v[4], v[5])), pack2x16float(vec2<f32>(v[6], v[7])));
    }
    return bitcast<vec4<u32>>(vec4<f32>(v[0], v[1], v[2], v[3]));
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
    let vbase = w.row * (p.d / EPV);
    if (NEOX) {
        let ia = vbase + u;
        let ib = ia + p.half / EPV;
        var a = widen(x[ia]);
        var b = widen(x[ib]);
        for (var e = 0u; e < EPV; e++) {
            let cs = cos_sin(pos, u * EPV + e);
            let ra = a[e] * cs.x - b[e] * cs.y;
            b[e] = b[e] * cs.x + a[e] * cs.y;
            a[e] = ra;
        }
        x[ia] = narrow(a);
        x[ib] = narrow(b);
    } else {
        let iv = vbase + u;
        var v = widen(x[iv]);
        for (var e = 0u; e < EPV / 2u; e++) {
            let cs = cos_sin(pos, u * (EPV / 2u) + e);
            let a = v[2u * e];
            let b = v[2u * e + 1u];
            v[2u * e] = a * cs.x - b * cs.y;
            v[2u * e + 1u] = b * cs.x + a * cs.y;
        }
        x[iv] = narrow(v);
    }
}
