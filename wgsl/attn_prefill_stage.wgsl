// Staging pass of the Matrix prefill (attn_prefill_matrix.wgsl): writes its f16 operands into one
// scratch buffer (s32: f16 pairs), so RoPE and the f16 rounding happen once per element instead of once per
// workgroup that reads it:
//   Q' at 0:      [kv_heads][rows_pad][D], row g = t * group + (h - hk * group) of KV head hk,
//                 rotated at offset + t and multiplied by scale * log2 e; rows >= rows zero;
//   K' at k_base: [kv_heads][kv_pad][D], key j rotated at position j (unless it comes rotated);
//   V' at v_base: [kv_heads][kv_pad][D]; keys >= kv_len zero in both.
// One invocation per two RoPE pairs (2 m, 2 m + 1) of one row, which it writes as two whole u32
// words of the scratch (halves 4 m .. 4 m + 3, or 2 m, 2 m + 1 and HALF + 2 m, HALF + 2 m + 1 for
// NEOX): the nq Q items first, then the nkv K/V items. K, V f32 or f16 (two per u32 word, KV_F16).

enable f16;

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,
    rows: u32,
    rows_pad: u32,
    kv_len: u32,
    kv_pad: u32,
    offset: u32,
    rotate_k: u32,
    table_half: u32,
    nq: u32,         // kv_heads * rows_pad * D / 4
    nkv: u32,        // kv_heads * kv_pad * D / 4
    k_base: u32,
    v_base: u32,
    scale_log2: f32, // softmax scale * log2(e)
}

override D: u32 = 128u;
override KV_F16: bool = false;
override NEOX: bool = false;
override HALF: u32 = D / 2u;
override QPR: u32 = D / 4u;  // invocations per row
const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>;  // (cos, sin) of pair i at position pos: pos * table_half + i
@group(0) @binding(5) var<storage, read_write> s32: array<u32>;  // f16 pairs

fn pair_at(i: u32) -> vec2<u32> {
    if (NEOX) {
        return vec2<u32>(i, i + HALF);
    }
    return vec2<u32>(2u * i, 2u * i + 1u);
}

fn rot(a: f32, b: f32, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a * cs.x - b * cs.y, b * cs.x + a * cs.y);
}

fn k_at(e: u32) -> f32 {
    if (KV_F16) {
        return unpack2x16float(k[e / 2u])[e % 2u];
    }
    return bitcast<f32>(k[e]);
}

fn v_at(e: u32) -> f32 {
    if (KV_F16) {
        return unpack2x16float(v[e / 2u])[e % 2u];
    }
    return bitcast<f32>(v[e]);
}

// Word indices (of the row's D / 2 words) holding pairs 2 m and 2 m + 1.
fn words(m: u32) -> vec2<u32> {
    if (NEOX) {
        return vec2<u32>(m, HALF / 2u + m);
    }
    return vec2<u32>(2u * m, 2u * m + 1u);
}

// Pairs 2 m, 2 m + 1 of a row as (a0, b0, a1, b1) -> the two words in element order. Rounded by
// the f16 conversion (to nearest), so pack2x16float only packs exact values.
fn pack(x: vec4<f32>) -> vec2<u32> {
    if (NEOX) {
        // words: (a0, a1) and (b0, b1)
        return vec2<u32>(pack2x16float(vec2<f32>(vec2<f16>(x.xz))), pack2x16float(vec2<f32>(vec2<f16>(x.yw))));
    }
    return vec2<u32>(pack2x16float(vec2<f32>(vec2<f16>(x.xy))), pack2x16float(vec2<f32>(vec2<f16>(x.zw))));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * WG + li;
    if (id < p.nq) {
        let m = id % QPR;
        let rest = id / QPR;
        let g = rest % p.rows_pad;
        let hk = rest / p.rows_pad;
        var x = vec4<f32>(0.0);
        if (g < p.rows) {
            let t = g / p.group;
            let h = hk * p.group + (g - t * p.group);
            let base = (t * p.heads + h) * D;
            let tb = (p.offset + t) * p.table_half + 2u * m;
            let e0 = pair_at(2u * m);
            let e1 = pair_at(2u * m + 1u);
            let r0 = rot(q[base + e0.x], q[base + e0.y], table[tb]);
            let r1 = rot(q[base + e1.x], q[base + e1.y], table[tb + 1u]);
            x = vec4<f32>(r0, r1) * p.scale_log2;
        }
        let o = (hk * p.rows_pad + g) * (D / 2u);
        let w = words(m);
        let v = pack(x);
        s32[o + w.x] = v.x;
        s32[o + w.y] = v.y;
        return;
    }
    let id2 = id - p.nq;
    if (id2 >= p.nkv) {
        return;
    }
    let m = id2 % QPR;
    let rest = id2 / QPR;
    let j = rest % p.kv_pad;
    let hk = rest / p.kv_pad;
    var kx = vec4<f32>(0.0);
    var vx = vec4<f32>(0.0);
    if (j < p.kv_len) {
        let base = (j * p.kv_heads + hk) * D;
        let e0 = pair_at(2u * m);
        let e1 = pair_at(2u * m + 1u);
        var k0 = vec2<f32>(k_at(base + e0.x), k_at(base + e0.y));
        var k1 = vec2<f32>(k_at(base + e1.x), k_at(base + e1.y));
        if (p.rotate_k != 0u) {
            let tb = j * p.table_half + 2u * m;
            k0 = rot(k0.x, k0.y, table[tb]);
            k1 = rot(k1.x, k1.y, table[tb + 1u]);
        }
        kx = vec4<f32>(k0, k1);
        vx = vec4<f32>(v_at(base + e0.x), v_at(base + e0.y), v_at(base + e1.x), v_at(base + e1.y));
    }
    let o = (hk * p.kv_pad + j) * (D / 2u);
    let w = words(m);
    let kp = pack(kx);
    let vp = pack(vx);
    s32[p.k_base / 2u + o + w.x] = kp.x;
    s32[p.k_base / 2u + o + w.y] = kp.y;
    s32[p.v_base / 2u + o + w.x] = vp.x;
    s32[p.v_base / 2u + o + w.y] = vp.y;
}
