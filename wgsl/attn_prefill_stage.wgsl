// Staging pass of the Matrix prefill (attn_prefill_matrix.wgsl), one dispatch for up to three
// regions, so the kernel's workgroups (every one of them reads every K/V tile and Q block it
// needs) load f16 that needs no rotation, scaling or conversion. One invocation per output word
// (two halves), the regions one after the other in the invocation index:
//
// Q (q_words > 0): Q [tokens][heads][D] (f32), rotated at position offset + t and multiplied by
// `scale` (softmax scale * log2 e), into the kernel's row order [kv_head][row][D], row
// g = t * group + (head - kv_head * group) (the GQA group's heads of a token side by side), with
// q_rows_pad >= q_rows rows per KV head (the rows past q_rows are zero), so the kernel loads each
// subgroup's 16 rows as one matrix straight from this buffer.
// K (k_words > 0): K [kv_len][kv_heads][D] (f16 or f32: IN_F16), rotated at its position j when
// rotate_k is 1, same layout.
// V (v_words > 0): V, converted only, same layout.
// A region with no words is not staged (its buffers are bound but never touched).
//
// Rotation: pair (a, b) = (x[e.x], x[e.y]) at position j becomes (a cos - b sin, b cos + a sin),
// e the pair's elements (2i, 2i + 1, or i, i + D/2 for NEOX). Each output is rounded to f16 once.

enable f16;

struct Params {
    q_words: u32,    // output words of each region (0: not staged)
    k_words: u32,
    v_words: u32,
    kv_heads: u32,
    table_half: u32, // (cos, sin) pairs per table row
    rotate_k: u32,   // 1: K comes unrotated
    q_rows: u32,     // Q: rows per KV head (tokens * group)
    q_rows_pad: u32, // Q: rows per KV head in q_dst
    group: u32,      // query heads per KV head
    heads: u32,      // query heads
    offset: u32,     // position of token 0
    scale: f32,      // Q: factor after the rotation
}

override D: u32 = 128u;
override IN_F16: bool = false;  // K and V come as f16 (two per u32 word) or f32; Q is always f32
override NEOX: bool = false;
override HALF: u32 = D / 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q_src: array<u32>;
@group(0) @binding(2) var<storage, read> k_src: array<u32>;
@group(0) @binding(3) var<storage, read> v_src: array<u32>;
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>;  // (cos, sin) of pair i at position j: j * table_half + i
@group(0) @binding(5) var<storage, read_write> q_dst: array<u32>;
@group(0) @binding(6) var<storage, read_write> k_dst: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_dst: array<u32>;

const REGION_Q: u32 = 0u;
const REGION_K: u32 = 1u;

// Element e of the region's input.
fn at(region: u32, e: u32) -> f32 {
    if (region == REGION_Q) {
        return bitcast<f32>(q_src[e]);
    }
    var word: u32;
    if (region == REGION_K) {
        word = k_src[select(e, e / 2u, IN_F16)];
    } else {
        word = v_src[select(e, e / 2u, IN_F16)];
    }
    if (IN_F16) {
        return unpack2x16float(word)[e % 2u];
    }
    return bitcast<f32>(word);
}

// Element i of the row starting at `base`, at position j, rotated when asked.
fn elem(region: u32, base: u32, i: u32, j: u32, rotate: bool) -> f32 {
    let x = at(region, base + i);
    if (!rotate) {
        return x;
    }
    var pair = i / 2u;
    var partner = i ^ 1u;
    var second = (i & 1u) == 1u;
    if (NEOX) {
        second = i >= HALF;
        pair = select(i, i - HALF, second);
        partner = select(i + HALF, i - HALF, second);
    }
    let cs = table[j * p.table_half + pair];
    let y = at(region, base + partner);
    return select(x * cs.x - y * cs.y, x * cs.x + y * cs.y, second);
}

// Two values rounded to f16 (to nearest) and packed: pack2x16float then packs exact values.
fn pack(a: f32, b: f32) -> u32 {
    return pack2x16float(vec2<f32>(vec2<f16>(vec2<f32>(a, b))));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    var w = (wid.x + wid.y * nwg.x) * 256u + li;
    if (w < p.q_words) {
        let row = 2u * w / D;
        let i = 2u * w - row * D;
        let hk = row / p.q_rows_pad;
        let g = row - hk * p.q_rows_pad;
        if (g >= p.q_rows) {
            q_dst[w] = 0u;
            return;
        }
        let t = g / p.group;
        let base = (t * p.heads + hk * p.group + (g - t * p.group)) * D;
        let j = p.offset + t;
        q_dst[w] = pack(elem(REGION_Q, base, i, j, true) * p.scale, elem(REGION_Q, base, i + 1u, j, true) * p.scale);
        return;
    }
    w -= p.q_words;
    var region = REGION_K;
    if (w >= p.k_words) {
        w -= p.k_words;
        region = 2u;
        if (w >= p.v_words) {
            return;
        }
    }
    let row = 2u * w / D;        // key j, KV head hk: row = j * kv_heads + hk
    let i = 2u * w - row * D;
    let base = row * D;
    let j = row / p.kv_heads;
    let rotate = region == REGION_K && p.rotate_k != 0u;
    let x = pack(elem(region, base, i, j, rotate), elem(region, base, i + 1u, j, rotate));
    if (region == REGION_K) {
        k_dst[w] = x;
    } else {
        v_dst[w] = x;
    }
}
