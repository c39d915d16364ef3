// RoPE cos/sin table: table[pos * half + i] = attention_factor * (cos, sin)(2 pi * pos * turns_i).
// turns_i = freq[i].x + .y + .z where .x and .y have 12 significant bits, so with pos split into
// two 12-bit halves the four head products are exact and their fractional parts are taken without
// error; only the tiny tail product rounds. sin/cos come from our own polynomial on [-pi/4, pi/4].

struct Params {
    half: u32,
    rows: u32,
    attention_factor: f32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> freq: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> table: array<vec2<f32>>;

// x - round(x): exact, in [-0.5, 0.5].
fn centred(x: f32) -> f32 {
    return x - round(x);
}

// Fraction of pos * (f.x + f.y + f.z) turns, in [-0.5, 0.5]. f.x and f.y have 12 significant
// bits, so their products with the 12-bit halves of pos are exact.
fn turns(pos: u32, f: vec4<f32>) -> f32 {
    let hi = f32(pos & 0xfff000u);
    let lo = f32(pos & 0xfffu);
    var t = centred(hi * f.x) + centred(lo * f.x);
    t = centred(t) + centred(hi * f.y);
    t = centred(t) + centred(lo * f.y);
    return centred(centred(t) + centred(f32(pos) * f.z));
}

// (cos, sin) of 2 pi t for t in [-0.5, 0.5].
fn cos_sin_turns(t: f32) -> vec2<f32> {
    let q = round(t * 4.0);
    let r = (t - q * 0.25) * 6.283185307179586;
    let r2 = r * r;
    let s = r * (1.0 + r2 * (-1.6666667e-1 + r2 * (8.3333333e-3 + r2 * (-1.9841270e-4 + r2 * 2.7557319e-6))));
    let c = 1.0 + r2 * (-0.5 + r2 * (4.1666667e-2 + r2 * (-1.3888889e-3 + r2 * (2.4801587e-5 - r2 * 2.7557319e-7))));
    switch (i32(q) & 3) {
        case 0: { return vec2<f32>(c, s); }
        case 1: { return vec2<f32>(-s, c); }
        case 2: { return vec2<f32>(-c, -s); }
        default: { return vec2<f32>(s, -c); }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + li;
    if (id >= p.half * p.rows) {
        return;
    }
    let pos = id / p.half;
    let i = id - pos * p.half;
    table[id] = cos_sin_turns(turns(pos, freq[i])) * p.attention_factor;
}
