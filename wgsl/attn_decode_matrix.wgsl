// Split-K decode attention, partial pass, Matrix variant: Q K^T and P V on 16x16x16 cooperative
// matrices (f16 inputs, f32 accumulation) for an f16 K/V cache. Same split and same partial rows
// as the other variants (attn_merge.wgsl combines them): one workgroup = NW subgroups = one KV
// head hk x up to GB query heads of its GQA group x one chunk of keys [key0, key1). The chunks
// cover keys key_lo .. kv_len - 1 (key_lo > 0: a sliding window); scores are soft-capped where
// asked (attn_softcap.wgsl, appended to this text).
//
// Rows of the matrix products. The A operand's 16 rows hold, for the GB heads g of the block,
// row g = hi(q_g) and row GB + g = lo(q_g), where hi(x) = f16(x) and lo(x) = f16(x - hi(x)):
// the query is split into two f16 parts whose sum carries about 22 significant bits, and the
// product's rows g and GB + g add up to the score computed from the f32 query (K is f16 exactly,
// products of two f16 are exact in f32, sums are f32). Rows past 2 GB are zero. The same split
// is applied to the probabilities P in the P V product. So the Matrix decode is as accurate as the
// f32-arithmetic kernels; the products have spare rows for it (GB <= 8). Before the split q_g
// (pre-scaled by scale * log2 e) is multiplied by 2^e_g, e_g chosen so that max |q_g| 2^e_g lies
// in [2^13, 2^14): no f16 overflow, and small queries keep their bits; the scores are multiplied
// back by 2^-e_g.
//
// Passes within the chunk (no per-tile rescale of the accumulators, which coop matrices cannot
// do by row): 1. S = Q K^T block by block; 2. m_g = max of head g's scores over the chunk;
// 3. block by block, P = exp2(s - m_g) split into hi / lo rows, O += P V, l_g = sum P (f32).
// At the end the NW subgroups' O (same m_g) are added, rows g and GB + g together, and written
// with (m_g, l_g).
//
// Blocks. A block is BK = 16 NW keys; subgroup w takes its 16-key tile w. The block's K (pass 1)
// or V (pass 3) rows are staged as stored (f16) in workgroup memory (kvs, rows of DS = D + 8
// halves: the padding puts consecutive rows in different banks) with 8-byte vec4<f16> global
// loads, CPT per invocation, fetched into registers one block ahead (the next block's loads are
// in flight while this block's products run); no conversion. (A cooperative matrix takes its
// scalar type from the pointer it is loaded through, so the staging must be f16-typed.) The score
// tile of each subgroup goes through workgroup memory (f32) where rows g and GB + g are added and
// scaled back; the chunk's scores stay there (sc) for pass 3, which writes each subgroup's P
// tile (f16) there.
//
// Tiles never read past the cache's last valid key: a tile that would (the last, partial one)
// starts at kv_len - 16 instead (the host requires kv_len >= 16), and its keys before the tile's
// nominal start, or at or past key1, get no score and P = 0. Their K/V rows are real cache rows
// (finite), so 0 * V stays 0. Cooperative-matrix operations need uniform control flow: loop
// bounds are workgroup-uniform and there is no early return (a workgroup past the grid's end
// computes on a clamped block and writes nothing).
// Matrices are named variables, never arrays: a line starting `//@ND ` is repeated for
// k = 0 .. ND - 1 (ND = D / 16) with {k} replaced by k when the pipeline is made
// (attn_decode_matrix.rs). (Function-scope arrays of cooperative matrices measured several times
// slower on the NVIDIA driver.) The load registers are a fixed array of 32 of which the
// CPT-bounded loops (constant trip counts) use the first CPT.

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    kv_len: u32,
    kv_heads: u32,
    heads: u32,
    group: u32,       // heads / kv_heads
    chunk: u32,       // keys per workgroup, a multiple of BK
    nchunks: u32,
    gblocks: u32,     // ceil(group / GB)
    scale_log2: f32,  // softmax scale * log2(e)
    key_lo: u32,      // first key attended (sliding window); chunk c starts at key_lo + c * chunk
    softcap: f32,     // score soft-cap * log2(e) (attn_softcap.wgsl); 0: off
    _p0: u32,
    _p1: u32,
}

override D: u32 = 128u;        // head dim = 16 ND
override GB: u32 = 4u;         // query heads per workgroup, <= 8
override SG: u32 = 32u;        // subgroup size, a multiple of 16
override NW: u32 = 4u;         // subgroups per workgroup
override MAXC: u32 = 256u;     // keys per chunk the score store holds (>= p.chunk)
override WG: u32 = SG * NW;
override BK: u32 = 16u * NW;   // keys per block
override PR: u32 = D / 4u;     // 8-byte vectors per K/V row
override DS: u32 = D + 8u;     // staged row stride in halves
override CPT: u32 = (BK * PR + WG - 1u) / WG;  // vectors per invocation and block, <= 32
override LPK: u32 = SG / 16u;  // lanes per key of a tile in the scalar steps
const NEG: f32 = -3.0e38;
const HMAX: u32 = 8u;          // heads per block, at most

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qr: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<f16>>;
@group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(5) var<storage, read_write> part_ml: array<vec2<f32>>;

override KVS_LEN: u32 = max(BK, 16u) * DS;
override SC_LEN: u32 = GB * MAXC;
override TILE_LEN: u32 = 256u * NW;
var<workgroup> kvs: array<f16, KVS_LEN>;        // Q rows (prologue), then K or V rows of a block
var<workgroup> sc: array<f32, SC_LEN>;          // scores of the chunk: sc[g * MAXC + key - key0]
var<workgroup> tile: array<f32, TILE_LEN>;      // per subgroup: a 16x16 f32 tile (S, then O)
var<workgroup> pt: array<f16, TILE_LEN>;        // per subgroup: a 16x16 f16 P tile (A operand)
var<workgroup> hm: array<f32, HMAX>;            // per head: max score m_g
var<workgroup> hb: array<f32, HMAX>;            // per head: 2^-e_g
var<workgroup> hl: array<f32, 512>;             // hl[(w * 8 + g) * 16 + j]: sums of P (NW <= 4)
var<workgroup> red: array<f32, 64>;             // per subgroup and head: partial maxima

// Start of the tile with nominal first key t: t, or kv_len - 16 where t + 16 would pass the end.
fn tile_start(t: u32) -> u32 {
    return select(t, p.kv_len - 16u, t + 16u > p.kv_len);
}

// Global loads of block b0's rows (K, or V if `is_v`) into registers: invocation li takes
// vectors li + x WG of the block (row = vector / PR).
fn fetch(r: ptr<function, array<vec4<f16>, 32>>, is_v: bool, b0: u32, hk: u32, li: u32) {
    for (var x = 0u; x < CPT; x++) {
        let v = li + x * WG;
        let row = min(v / PR, BK - 1u);
        let key = tile_start(b0 + (row & ~15u)) + (row & 15u);
        let at = (key * p.kv_heads + hk) * PR + v % PR;
        if (is_v) {
            (*r)[x] = vc[at];
        } else {
            (*r)[x] = kc[at];
        }
    }
}

fn stage(r: ptr<function, array<vec4<f16>, 32>>, li: u32) {
    for (var x = 0u; x < CPT; x++) {
        let v = li + x * WG;
        if (v < BK * PR) {
            let at = (v / PR) * DS + (v % PR) * 4u;
            let h = (*r)[x];
            kvs[at] = h.x;
            kvs[at + 1u] = h.y;
            kvs[at + 2u] = h.z;
            kvs[at + 3u] = h.w;
        }
    }
}

// Columns 16 k .. 16 k + 15 of the partial rows of heads h0 .. h0 + gbn - 1 (row `slot` of the
// first, then every nchunks-th), from the NW subgroups' O tiles in `tile`; nothing if `slot` is
// past the rows.
fn write_slice(k: u32, slot: u32, gbn: u32, li: u32) {
    if (slot >= p.heads * p.nchunks) {
        return;
    }
    for (var i = li; i < gbn * 16u; i += WG) {
        let g = i / 16u;
        let jj = i % 16u;
        var s = 0.0;
        for (var u = 0u; u < NW; u++) {
            s += tile[256u * u + g * 16u + jj] + tile[256u * u + (GB + g) * 16u + jj];
        }
        part_o[(slot + g * p.nchunks) * D + 16u * k + jj] = s;
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(subgroup_invocation_id) sl: u32) {
    let blocks = p.nchunks * p.gblocks * p.kv_heads;
    let wg_raw = wid.x + wid.y * nwg.x;
    let live = wg_raw < blocks;
    let wg_id = min(wg_raw, blocks - 1u);
    // KV head fastest: workgroups running together read neighbouring rows of the cache.
    let hk = wg_id % p.kv_heads;
    let rest = wg_id / p.kv_heads;
    let gb = rest % p.gblocks;
    let c = rest / p.gblocks;
    let g0 = gb * GB;
    let gbn = min(GB, p.group - g0);        // heads in this block
    let h0 = hk * p.group + g0;             // first query head
    let key0 = p.key_lo + c * p.chunk;
    let key1 = min(p.kv_len, key0 + p.chunk);
    let w = sid;                            // this subgroup's tile of a block
    let j = sl % 16u;                       // key of the tile this lane handles in scalar steps
    let gl = sl / 16u;                      // first head slot; heads gl, gl + LPK, ...

    // The first K block's loads go out before the prologue.
    var r: array<vec4<f16>, 32>;
    fetch(&r, false, key0, hk, li);

    // Q rows: per head the exponent from max |q_g| (every subgroup finds it, the first
    // invocation writes it), then the hi / lo halves into rows g / GB + g of kvs (rows 2 GB .. 15
    // zero).
    for (var g = 0u; g < GB; g++) {
        var mx = 0.0;
        if (g < gbn) {
            for (var e = sl; e < D; e += SG) {
                mx = max(mx, abs(qr[(h0 + g) * D + e] * p.scale_log2));
            }
        }
        mx = subgroupMax(mx);
        var sh = 0;
        if (mx > 0.0) {
            sh = clamp(14 - frexp(mx).exp, -100, 100);
        }
        if (li == 0u) {
            hb[g] = ldexp(1.0, -sh);
            hm[g] = ldexp(1.0, sh);
        }
    }
    for (var i = li; i < 512u; i += WG) {
        hl[i] = 0.0;
    }
    workgroupBarrier();
    for (var i = li; i < 16u * D; i += WG) {
        let row = i / D;
        let e = i % D;
        var h = f16(0.0);
        if (row < 2u * GB && row % GB < gbn) {
            let g = row % GB;
            let x = qr[(h0 + g) * D + e] * p.scale_log2 * hm[g];
            h = f16(x);
            if (row >= GB) {
                h = f16(x - f32(h));
            }
        }
        kvs[row * DS + e] = h;
    }
    workgroupBarrier();
    //@ND let qa{k} = coopLoadT<coop_mat16x16<f16, A>>(&kvs[16u * {k}u], DS);
    let n = key1 - key0;
    let nblk = (n + BK - 1u) / BK;

    // 1. Scores.
    for (var b = 0u; b < nblk; b++) {
        let b0 = key0 + b * BK;
        workgroupBarrier();
        stage(&r, li);
        workgroupBarrier();
        // Next block (or the first V block) in flight during this block's products.
        let last = b + 1u == nblk;
        fetch(&r, last, select(b0 + BK, key0, last), hk, li);
        var acc = coop_mat16x16<f32, C>();
        //@ND acc = coopMultiplyAdd(qa{k}, coopLoad<coop_mat16x16<f16, B>>(&kvs[16u * w * DS + 16u * {k}u], DS), acc);
        coopStoreT(acc, &tile[256u * w], 16u);
        workgroupBarrier();
        let tn = b0 + 16u * w;
        let key = tile_start(tn) + j;
        if (key >= tn && key < key1) {
            for (var g = gl; g < GB; g += LPK) {
                sc[g * MAXC + key - key0] = softcap((tile[256u * w + g * 16u + j] + tile[256u * w + (GB + g) * 16u + j]) * hb[g], p.softcap);
            }
        }
    }
    workgroupBarrier();

    // 2. Max per head over the chunk.
    for (var g = 0u; g < GB; g++) {
        var mx = NEG;
        for (var i = li; i < n; i += WG) {
            mx = max(mx, sc[g * MAXC + i]);
        }
        mx = subgroupMax(mx);
        if (sl == 0u) {
            red[w * HMAX + g] = mx;
        }
    }
    workgroupBarrier();
    if (li < GB) {
        var mx = NEG;
        for (var i = 0u; i < NW; i++) {
            mx = max(mx, red[i * HMAX + li]);
        }
        hm[li] = mx;
    }

    // 3. P V.
    //@ND var o{k} = coop_mat16x16<f32, C>();
    for (var b = 0u; b < nblk; b++) {
        let b0 = key0 + b * BK;
        workgroupBarrier();
        stage(&r, li);
        let tn = b0 + 16u * w;
        let key = tile_start(tn) + j;
        let ok = key >= tn && key < key1;
        for (var g = gl; g < GB; g += LPK) {
            var pv = 0.0;
            if (ok) {
                pv = exp2(sc[g * MAXC + key - key0] - hm[g]);
            }
            hl[(w * HMAX + g) * 16u + j] += pv;
            let hi = f16(pv);
            pt[256u * w + g * 16u + j] = hi;
            pt[256u * w + (GB + g) * 16u + j] = f16(pv - f32(hi));
        }
        workgroupBarrier();
        if (b + 1u < nblk) {
            fetch(&r, true, b0 + BK, hk, li);
        }
        let pa = coopLoadT<coop_mat16x16<f16, A>>(&pt[256u * w], 16u);
        //@ND o{k} = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kvs[16u * w * DS + 16u * {k}u], DS), o{k});
    }

    // Partial row: the subgroups' O added, rows g and GB + g together; (m_g, l_g).
    let slot = select(p.heads * p.nchunks, h0 * p.nchunks + c, live);  // past every row if not live
    //@ND workgroupBarrier(); coopStoreT(o{k}, &tile[256u * w], 16u); workgroupBarrier(); write_slice({k}u, slot, gbn, li);
    if (live && li < gbn) {
        var l = 0.0;
        for (var u = 0u; u < NW; u++) {
            for (var i = 0u; i < 16u; i++) {
                l += hl[(u * HMAX + li) * 16u + i];
            }
        }
        part_ml[(h0 + li) * p.nchunks + c] = vec2<f32>(hm[li], l);
    }
}
