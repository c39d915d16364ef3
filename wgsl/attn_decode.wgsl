// Split-K decode attention, partial pass. One workgroup = one KV head x up to GB query heads of
// its group x one chunk of the cache; each K/V row read from memory serves all GB heads.
// The chunk is walked in tiles of TILE keys with an online softmax; the partial result (O not yet
// normalised, running max m and sum l, log2 domain) goes to part_o / part_ml for attn_merge.wgsl.
// K is already rotated (cache), q is rotated (attn_append.wgsl). K/V f32, or f16 two per u32 word.
// The chunks cover keys key_lo .. kv_len - 1 (key_lo > 0: a sliding window); scores are
// soft-capped where asked (attn_softcap.wgsl).
// Portable variant (also the Subgroup variant's fallback for rows too long for its teams kernel,
// attn_decode_subgroup.wgsl). Included after attn_decode_portable.wgsl, which provides the entry
// point and reduce() (the max / sum over the workgroup of each head's red[g * WG + li]).

struct Params {
    kv_len: u32,
    kv_heads: u32,
    heads: u32,
    group: u32,       // heads / kv_heads
    chunk: u32,       // keys per workgroup
    nchunks: u32,
    gblocks: u32,     // ceil(group / GB)
    scale_log2: f32,  // softmax scale * log2(e)
    key_lo: u32,      // first key attended (sliding window); chunk c starts at key_lo + c * chunk
    softcap: f32,     // score soft-cap * log2(e) (attn_softcap.wgsl); 0: off
    _p0: u32,
    _p1: u32,
}

override D: u32 = 128u;
override GB: u32 = 8u;        // query heads per workgroup, <= 8
override TILE: u32 = 128u;    // keys per tile
override WG: u32 = 64u;       // power of two, >= D / 2
override KV_F16: bool = false;
override VEC4: bool = true;   // rows are whole vec4<u32>s (WORDS % 4 == 0)
override WORDS: u32 = select(D, D / 2u, KV_F16);  // u32 words per K/V row
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qr: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(5) var<storage, read_write> part_ml: array<vec2<f32>>;

override QS_LEN: u32 = GB * D;
override SC_LEN: u32 = GB * TILE;
override RED_LEN: u32 = GB * WG;
var<workgroup> qs: array<f32, QS_LEN>;
var<workgroup> sc: array<f32, SC_LEN>;
var<workgroup> red: array<f32, RED_LEN>;

// V elements 2li, 2li + 1 of key `key`, head hk.
fn v_pair(key: u32, hk: u32, li: u32) -> vec2<f32> {
    let e = (key * p.kv_heads + hk) * D + 2u * li;
    if (KV_F16) {
        return unpack2x16float(vc[e >> 3u][(e >> 1u) & 3u]);
    }
    let w = vc[e >> 2u];
    return bitcast<vec2<f32>>(select(w.zw, w.xy, (e & 2u) == 0u));
}

fn k_word(w: u32) -> u32 {
    return kc[w >> 2u][w & 3u];
}

// Dot of K word w (elements 2w, 2w+1 for f16; w for f32) with q element(s) of head g.
fn word_dot(word: u32, w: u32, g: u32) -> f32 {
    if (KV_F16) {
        let kv = unpack2x16float(word);
        return kv.x * qs[g * D + 2u * w] + kv.y * qs[g * D + 2u * w + 1u];
    }
    return bitcast<f32>(word) * qs[g * D + w];
}

// Dot of K row `row` (in words) with all GB heads over words [w0, w0 + 4) or scalar word w0.
fn add_words(acc: ptr<function, array<f32, 8>>, row: u32, c: u32, gbn: u32) {
    let v = kc[row / 4u + c];
    for (var g = 0u; g < GB; g++) {
        if (g < gbn) {
            (*acc)[g] += word_dot(v.x, 4u * c, g) + word_dot(v.y, 4u * c + 1u, g)
                       + word_dot(v.z, 4u * c + 2u, g) + word_dot(v.w, 4u * c + 3u, g);
        }
    }
}

fn add_word(acc: ptr<function, array<f32, 8>>, row: u32, w: u32, gbn: u32) {
    let word = k_word(row + w);
    for (var g = 0u; g < GB; g++) {
        if (g < gbn) {
            (*acc)[g] += word_dot(word, w, g);
        }
    }
}

// Q K^T for one tile: one invocation per key, reading its K row as vec4<u32>s (all of a row's
// bytes are used, through the cache) and dotting it with all GB query heads in workgroup memory.
fn tile_scores(t0: u32, n: u32, hk: u32, gbn: u32, li: u32) {
    for (var j = li; j < n; j += WG) {
        let row = ((t0 + j) * p.kv_heads + hk) * WORDS;
        var acc: array<f32, 8>;
        for (var g = 0u; g < 8u; g++) {
            acc[g] = 0.0;
        }
        if (VEC4) {
            for (var c = 0u; c < WORDS / 4u; c++) {
                add_words(&acc, row, c, gbn);
            }
        } else {
            for (var w = 0u; w < WORDS; w++) {
                add_word(&acc, row, w, gbn);
            }
        }
        for (var g = 0u; g < GB; g++) {
            sc[g * TILE + j] = select(0.0, softcap(acc[g], p.softcap), g < gbn);
        }
    }
}

fn decode_main(wg_id: u32, li: u32) {
    if (wg_id >= p.nchunks * p.gblocks * p.kv_heads) {
        return;
    }
    let c = wg_id % p.nchunks;
    let rest = wg_id / p.nchunks;
    let gb = rest % p.gblocks;
    let hk = rest / p.gblocks;
    let g0 = gb * GB;
    let gbn = min(GB, p.group - g0);        // heads in this block
    let h0 = hk * p.group + g0;             // first query head
    let key0 = p.key_lo + c * p.chunk;
    let key1 = min(p.kv_len, key0 + p.chunk);

    for (var idx = li; idx < GB * D; idx += WG) {
        let g = idx / D;
        var v = 0.0;
        if (g < gbn) {
            v = qr[(h0 + g) * D + (idx - g * D)] * p.scale_log2;
        }
        qs[idx] = v;
    }
    var m_run: array<f32, 8>;
    var l_run: array<f32, 8>;
    var acc: array<vec2<f32>, 8>;
    for (var g = 0u; g < 8u; g++) {
        m_run[g] = NEG;
        l_run[g] = 0.0;
        acc[g] = vec2<f32>(0.0);
    }
    workgroupBarrier();

    for (var t0 = key0; t0 < key1; t0 += TILE) {
        let n = min(TILE, key1 - t0);
        tile_scores(t0, n, hk, gbn, li);
        workgroupBarrier();
        // Tile max per head.
        for (var g = 0u; g < GB; g++) {
            var mx = NEG;
            for (var j = li; j < n; j += WG) {
                mx = max(mx, sc[g * TILE + j]);
            }
            red[g * WG + li] = mx;
        }
        reduce(li, 0u);
        var m_new: array<f32, 8>;
        for (var g = 0u; g < GB; g++) {
            m_new[g] = max(m_run[g], red[g * WG]);
        }
        workgroupBarrier();
        for (var g = 0u; g < GB; g++) {
            var sum = 0.0;
            for (var j = li; j < n; j += WG) {
                let pj = exp2(sc[g * TILE + j] - m_new[g]);
                sc[g * TILE + j] = pj;
                sum += pj;
            }
            red[g * WG + li] = sum;
        }
        reduce(li, 1u);
        // O = O * alpha + P V; invocation li owns output columns 2li, 2li + 1.
        for (var g = 0u; g < GB; g++) {
            let alpha = exp2(m_run[g] - m_new[g]);
            l_run[g] = l_run[g] * alpha + red[g * WG];
            m_run[g] = m_new[g];
            acc[g] *= alpha;
        }
        if (2u * li < D) {
            // Four keys per step: their V loads are independent and issue together.
            var j = 0u;
            for (; j + 4u <= n; j += 4u) {
                let v0 = v_pair(t0 + j, hk, li);
                let v1 = v_pair(t0 + j + 1u, hk, li);
                let v2 = v_pair(t0 + j + 2u, hk, li);
                let v3 = v_pair(t0 + j + 3u, hk, li);
                for (var g = 0u; g < GB; g++) {
                    let b = g * TILE + j;
                    acc[g] += sc[b] * v0 + sc[b + 1u] * v1 + sc[b + 2u] * v2 + sc[b + 3u] * v3;
                }
            }
            for (; j < n; j++) {
                let v = v_pair(t0 + j, hk, li);
                for (var g = 0u; g < GB; g++) {
                    acc[g] += sc[g * TILE + j] * v;
                }
            }
        }
        workgroupBarrier();
    }
    for (var g = 0u; g < gbn; g++) {
        let slot = (h0 + g) * p.nchunks + c;
        if (2u * li < D) {
            part_o[slot * D + 2u * li] = acc[g].x;
            part_o[slot * D + 2u * li + 1u] = acc[g].y;
        }
        if (li == 0u) {
            part_ml[slot] = vec2<f32>(m_run[g], l_run[g]);
        }
    }
}
