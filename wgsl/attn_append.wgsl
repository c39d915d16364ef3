// Decode step, first pass: rotate the new token's q (to q_rot, f32) and k (into the cache row at
// `pos`, f32 or f16) at position `pos`, and copy its v into the cache. One invocation per pair of
// adjacent elements (one f16 word), each element computed from itself and its rotation partner:
// a' = a cos - b sin, b' = b cos + a sin.

struct Params {
    heads: u32,
    kv_heads: u32,
    d: u32,
    half: u32,
    pos: u32,
    table_half: u32,
    _p0: u32,
    _p1: u32,
}

override KV_F16: bool = false;
override NEOX: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_new: array<f32>;
@group(0) @binding(3) var<storage, read> v_new: array<f32>;
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> q_rot: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<u32>;
@group(0) @binding(7) var<storage, read_write> vc: array<u32>;

// Rotated element e of the head starting at base in `src` (0: q, 1: k_new).
fn rotated(src: u32, base: u32, e: u32) -> f32 {
    var i = e >> 1u;
    var partner = e ^ 1u;
    var is_b = (e & 1u) == 1u;
    if (NEOX) {
        is_b = e >= p.half;
        i = select(e, e - p.half, is_b);
        partner = select(e + p.half, e - p.half, is_b);
    }
    var x: f32;
    var y: f32;
    if (src == 0u) {
        x = q[base + e];
        y = q[base + partner];
    } else {
        x = k_new[base + e];
        y = k_new[base + partner];
    }
    let cs = table[p.pos * p.table_half + i];
    return x * cs.x + select(-y, y, is_b) * cs.y;
}

fn store_kv(is_v: bool, e: u32, v: vec2<f32>) {  // cache elements e, e + 1 (e even)
    if (KV_F16) {
        if (is_v) {
            vc[e >> 1u] = pack2x16float(v);
        } else {
            kc[e >> 1u] = pack2x16float(v);
        }
    } else if (is_v) {
        vc[e] = bitcast<u32>(v.x);
        vc[e + 1u] = bitcast<u32>(v.y);
    } else {
        kc[e] = bitcast<u32>(v.x);
        kc[e + 1u] = bitcast<u32>(v.y);
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + li;
    let nq = p.heads * p.half;
    let nk = p.kv_heads * p.half;
    if (id < nq) {
        let h = id / p.half;
        let e = 2u * (id - h * p.half);
        q_rot[h * p.d + e] = rotated(0u, h * p.d, e);
        q_rot[h * p.d + e + 1u] = rotated(0u, h * p.d, e + 1u);
    } else if (id < nq + nk) {
        let u = id - nq;
        let h = u / p.half;
        let e = 2u * (u - h * p.half);
        let v = vec2<f32>(rotated(1u, h * p.d, e), rotated(1u, h * p.d, e + 1u));
        store_kv(false, (p.pos * p.kv_heads + h) * p.d + e, v);
    } else if (id < nq + 2u * nk) {
        let u = id - nq - nk;
        let h = u / p.half;
        let e = 2u * (u - h * p.half);
        store_kv(true, (p.pos * p.kv_heads + h) * p.d + e, vec2<f32>(v_new[h * p.d + e], v_new[h * p.d + e + 1u]));
    }
}
