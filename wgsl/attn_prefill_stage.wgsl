// Staging pass of the Matrix prefill (attn_prefill_matrix.wgsl): K, rotated at its position when
// it comes unrotated, or V, converted to f16 once per call into a scratch buffer, so the kernel's
// workgroups (every one of them stages every K/V tile it reads) load f16 that needs no rotation.
// Same layout as the input, [kv_len][kv_heads][D], two halves per u32 word; one invocation per
// output word (elements 2w, 2w + 1 of the flattened tensor).
//
// Q mode (q_rows > 0): Q [tokens][heads][D] (f32), rotated at position offset + t and multiplied
// by `scale` (softmax scale * log2 e), into the kernel's row order [kv_head][row][D], row
// g = t * group + (head - kv_head * group) (the GQA group's heads of a token side by side), with
// q_rows_pad >= q_rows rows per KV head (the rows past q_rows are zero), so the kernel loads each
// subgroup's 16 rows as one matrix straight from this buffer.
//
// Rotation as in the kernel's store_k: pair (a, b) = (x[e.x], x[e.y]) at position j becomes
// (a cos - b sin, b cos + a sin), e the pair's elements (2i, 2i + 1, or i, i + D/2 for NEOX).

enable f16;

struct Params {
    words: u32,      // output words = kv_len * kv_heads * D / 2
    kv_heads: u32,
    table_half: u32, // (cos, sin) pairs per table row
    rotate: u32,     // 1: rotate (K that comes unrotated); 0: convert only
    q_rows: u32,     // Q mode: rows per KV head (tokens * group); 0: K / V mode
    q_rows_pad: u32, // Q mode: rows per KV head in dst
    group: u32,      // Q mode: query heads per KV head
    heads: u32,      // Q mode: query heads
    offset: u32,     // Q mode: position of token 0
    scale: f32,      // Q mode: factor after the rotation (1 for K / V)
    _p0: u32,
    _p1: u32,
}

override D: u32 = 128u;
override IN_F16: bool = false;  // input f16 (two per u32 word) or f32
override NEOX: bool = false;
override HALF: u32 = D / 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>;  // (cos, sin) of pair i at position j: j * table_half + i
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

fn at(e: u32) -> f32 {
    if (IN_F16) {
        return unpack2x16float(src[e / 2u])[e % 2u];
    }
    return bitcast<f32>(src[e]);
}

// Element i of the row starting at `base`, of key j, rotated when asked.
fn elem(base: u32, i: u32, j: u32) -> f32 {
    let x = at(base + i);
    if (p.rotate == 0u) {
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
    let y = at(base + partner);
    return select(x * cs.x - y * cs.y, x * cs.x + y * cs.y, second);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let w = (wid.x + wid.y * nwg.x) * 256u + li;
    if (w >= p.words) {
        return;
    }
    let e = 2u * w;
    let row = e / D;             // K / V: key j, KV head hk: row = j * kv_heads + hk
    let i = e - row * D;
    var base = row * D;
    var j = row / p.kv_heads;
    if (p.q_rows > 0u) {
        let hk = row / p.q_rows_pad;
        let g = row - hk * p.q_rows_pad;
        if (g >= p.q_rows) {
            dst[w] = 0u;
            return;
        }
        let t = g / p.group;
        base = (t * p.heads + hk * p.group + (g - t * p.group)) * D;
        j = p.offset + t;
    }
    let x = vec2<f32>(elem(base, i, j), elem(base, i + 1u, j)) * p.scale;
    // Rounded by the f16 conversion (to nearest), so pack2x16float only packs exact values.
    dst[w] = pack2x16float(vec2<f32>(vec2<f16>(x)));
}
