// kv_store (see model_ops.wgsl): rotate and store `tokens` new K rows and store V rows into f16
// caches at rows pos0.. . Params: tokens, kv_heads, d, half, pos0, table_half.

struct Params {
    tokens: u32,
    kv_heads: u32,
    d: u32,
    half: u32,
    pos0: u32,
    table_half: u32,
    _p0: u32,
    _p1: u32,
}

override NEOX: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k_new: array<f32>;
@group(0) @binding(2) var<storage, read> v_new: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;

// Element e of the head starting at `base`, rotated at table row `row`.
fn rotated(base: u32, e: u32, row: u32) -> f32 {
    var i = e >> 1u;
    var partner = e ^ 1u;
    var is_b = (e & 1u) == 1u;
    if (NEOX) {
        is_b = e >= p.half;
        i = select(e, e - p.half, is_b);
        partner = select(e + p.half, e - p.half, is_b);
    }
    let x = k_new[base + e];
    let o = k_new[base + partner];
    let cs = table[row * p.table_half + i];
    return x * cs.x + select(-o, o, is_b) * cs.y;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + li;
    let per_token = p.kv_heads * p.half;
    if (id >= p.tokens * per_token) {
        return;
    }
    let t = id / per_token;
    let r = id - t * per_token;
    let h = r / p.half;
    let e = 2u * (r - h * p.half);
    let base = (t * p.kv_heads + h) * p.d;
    let row = p.pos0 + t;
    let kv = vec2<f32>(rotated(base, e, row), rotated(base, e + 1u, row));
    let dst = ((row * p.kv_heads + h) * p.d + e) >> 1u;
    kc[dst] = pack2x16float(kv);
    vc[dst] = pack2x16float(vec2<f32>(v_new[base + e], v_new[base + e + 1u]));
}
