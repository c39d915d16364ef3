// Fused RoPE + flash attention prefill, Matrix variant: Q K^T and P V on 16x16x16 cooperative
// matrices (f16 inputs, f32 accumulation). Same rows as the other variants: one workgroup = one
// KV head x BQ = 16 NSG rows, a row being a (query token, query head of the KV head's group)
// pair, so each K/V tile in workgroup memory serves the whole GQA group. Query t sits at
// absolute position offset + t and, when causal, sees keys j <= offset + t; with a sliding window
// W only keys j > offset + t - W. Scores are soft-capped where asked (attn_softcap.wgsl).
//
// NSG subgroups (8, or 4 where 8 don't fit) of SG invocations; subgroup s owns rows 16 s ..
// 16 s + 15: it keeps their Q (rotated, pre-scaled by scale * log2 e, rounded to f16 by the
// staging pass, loaded straight from its buffer) as ND = D / 16 A matrices and their output as ND
// f32 accumulators. The kernel is built for the adapter's one subgroup size SG and
// checks num_subgroups == NSG at run time (a mismatch writes NaN: loud, never silently wrong).
// No early returns: cooperative-matrix operations need uniform control flow (naga checks it
// workgroup-wide, so a subgroup's own decision, e.g. subgroupAny, cannot guard them).
//
// One pass over the keys with an online softmax. A coop matrix has no element access, so a row
// of O cannot be rescaled in registers; instead each row keeps a reference max m and writes
// P = exp2(s - m) (log2 domain), raising m only when a tile's row max exceeds m + TAU, so
// P <= 2^TAU stays well inside f16. Raising m of a row that has seen keys sets a workgroup flag;
// then every subgroup passes its O through its rows of workgroup memory (coopStoreT, scale each
// row by exp2(m_old - m_new), coopLoadT), 16 columns at a time. After a row's first tile that is rare:
// its max must grow by TAU (a factor 2^TAU in P). O = acc / l at the end (l, f32, is rescaled
// alike). Each subgroup's lanes hold the softmax of its own 16 rows (TPR lanes per row, their
// max combined by lane shuffles), so S and P need only subgroup barriers.
// (Until 2026-11-25 this kernel made two passes, row max then P V: 1.5x the products.)

// Tiles: K and V (f16, K rotated: see the staging notes below) are copied into workgroup memory
// (rows padded to DS = D + 8 halves: 16-byte aligned rows that fall in different banks), the
// score tile S as f32 (stride SS) and P as f16 (stride PS). Keys past the tile's end are zero.
// Global loads are 16-byte vectors, CPT chunks of 16 elements per invocation, fetched into
// registers one step ahead of their use (the next K tile during the P V product, the V tile
// during Q K^T) so their latency overlaps the matrix work. O is f32.
//
// Matrices are named variables, never arrays: a line starting `//@ND ` and the lines between
// `//@ND begin` and `//@ND end` are repeated for k = 0 .. ND - 1 with {k} replaced by k
// (attention::expand_templates) before the text is compiled; likewise `//@NB` ({n}: the 16-key
// blocks of a tile), `//@JQ` ({q}: the groups of 4 keys an invocation takes in the softmax) and
// `//@CP` ({x}: the CPT chunks an invocation stages per tile). As arrays indexed in loops (until
// 2026-11-25), NVIDIA's driver kept Q and O in local memory: 384 bytes per invocation at D = 128,
// every product a round trip through L1 (examples/shader_stats.rs).

enable f16;
enable wgpu_cooperative_matrix;

override D: u32 = 128u;        // head dim, a multiple of 16 (= 16 * ND)
override ND: u32 = D / 16u;    // column blocks of 16 (the `//@ND` count)
override BK: u32 = 32u;        // keys per tile, a multiple of 16 (BK * ND <= CPT * WG)
override SG: u32 = 32u;        // subgroup size the pipeline is built for (16 | SG)
override TAU: f32 = 8.0;       // log2 headroom before a row's reference max is raised (P <= 2^TAU)
override NSG: u32 = 8u;        // subgroups per workgroup (4 or 8)
override BQ: u32 = 16u * NSG;  // rows per workgroup
const NEG: f32 = -3.0e38;
override WG: u32 = NSG * SG;
override DS: u32 = D + 8u;     // f16 row stride of the K / V tiles
override SS: u32 = BK + 4u;    // f32 row stride of S
override PS: u32 = BK + 8u;    // f16 row stride of P
override TPR: u32 = SG / 16u;  // invocations per row in the softmax steps (lanes of its subgroup)
override JP: u32 = BK / TPR;   // keys per invocation in the softmax (4 JQ: the `//@JQ` count)
override VOFF: u32 = BK * DS;  // start of the V tile in kv
override KV_LEN: u32 = 2u * BK * DS;
override SS_LEN: u32 = BQ * SS;
override PS_LEN: u32 = BQ * PS;
// Matrix loads from kv and ps take pointers to their vec4<f16> elements, so their offsets and
// strides count vec4s (4 halves), as SPIR-V counts them in the pointee type (checked on the H100).
override DS4: u32 = DS / 4u;
override PS4: u32 = PS / 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qs: array<f16>;   // Q staged: see below
@group(0) @binding(2) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> kv: array<vec4<f16>, KV_LEN / 4u>;   // K tile at 0, V tile at VOFF (4 halves per element)
var<workgroup> ss: array<f32, SS_LEN>;
var<workgroup> ps: array<vec4<f16>, PS_LEN / 4u>;
var<workgroup> part: array<f32, WG>;      // the row sums' shares of their TPR invocations
// Some row's O needs a rescale in this tile (.x). A vec4: every workgroup variable here is a multiple
// of 16 bytes, because NVIDIA's driver packs them back to back and cooperative-matrix loads and
// stores need 16-byte aligned addresses (a lone u32 here made the kernel wrong; 2026-11-25, H100).
var<workgroup> flag: vec4<u32>;

// K and V come as f16, two per u32 word, [kv_len][kv_heads][D], and K comes rotated: the staging
// pass (attn_prefill_stage.wgsl) makes them so when they don't. Chunk ch of a tile = key
// k0 + ch / ND, elements 16 c .. 16 c + 15 (c = ch % ND): two 16-byte vectors; each invocation
// fetches CPT chunks of a tile into registers (zero past kend; named kw0, vw0, .. by the `//@CP`
// template, {x}) and later stores them as they are.

// Chunk x of this invocation: (key offset j in the tile, column block c, in the tile).
fn chunk_at(li: u32, x: u32) -> vec3<u32> {
    let ch = li + x * WG;
    let j = ch / ND;
    return vec3<u32>(j, ch - j * ND, u32(ch < BK * ND));
}

// 16-byte vector index of chunk (key, c) of KV head hk.
fn chunk_vec(key: u32, c: u32, hk: u32) -> u32 {
    return ((key * p.kv_heads + hk) * D + 16u * c) / 8u;
}

// Chunk x of this invocation for the tile at key k0 of V (v) or K: two 16-byte vectors, zero
// past kend.
fn load_chunk(v: bool, li: u32, x: u32, k0: u32, kend: u32, hk: u32) -> array<vec4<u32>, 2> {
    let t = chunk_at(li, x);
    var w = array<vec4<u32>, 2>(vec4<u32>(0u), vec4<u32>(0u));
    if (t.z != 0u && k0 + t.x < kend) {
        let a = chunk_vec(k0 + t.x, t.y, hk);
        if (v) {
            w = array<vec4<u32>, 2>(vc[a], vc[a + 1u]);
        } else {
            w = array<vec4<u32>, 2>(kc[a], kc[a + 1u]);
        }
    }
    return w;
}

// Chunk x of this invocation into the tile at `off` of kv (0: K, VOFF: V).
fn store_chunk(w: array<vec4<u32>, 2>, li: u32, x: u32, off: u32) {
    let t = chunk_at(li, x);
    if (t.z != 0u) {
        let o = (off + t.x * DS + 16u * t.y) / 4u;
        // (naga 30 types bitcast<vec2<f16>>(u32) as f32, so unpack and convert: exact.)
        kv[o] = vec4<f16>(vec4<f32>(unpack2x16float(w[0].x), unpack2x16float(w[0].y)));
        kv[o + 1u] = vec4<f16>(vec4<f32>(unpack2x16float(w[0].z), unpack2x16float(w[0].w)));
        kv[o + 2u] = vec4<f16>(vec4<f32>(unpack2x16float(w[1].x), unpack2x16float(w[1].y)));
        kv[o + 3u] = vec4<f16>(vec4<f32>(unpack2x16float(w[1].z), unpack2x16float(w[1].w)));
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(subgroup_invocation_id) lane: u32,
        @builtin(num_subgroups) nsg: u32) {
    // Workgroups past the last block (the grid may be rounded up to 2D) compute block 0 again and
    // write nothing: cooperative-matrix operations need uniform control flow, so no early return.
    let wg_raw = wid.x + wid.y * nwg.x;
    let live = wg_raw < p.row_blocks * p.kv_heads;
    let wg_id = select(0u, wg_raw, live);
    // Row blocks last to first, each over all KV heads: with a causal mask the last blocks see
    // the most keys, so the longest workgroups start first and the short ones fill the tail.
    let rbi = wg_id / p.kv_heads;
    let hk = wg_id - rbi * p.kv_heads;
    let rb = p.row_blocks - 1u - rbi;
    let rows = p.tokens * p.group;
    let row0 = rb * BQ;
    let last_t = (min(rows, row0 + BQ) - 1u) / p.group;
    var kend = p.kv_len;
    if (p.causal != 0u) {
        kend = min(kend, p.offset + last_t + 1u);
    }
    let kbeg = window_start(p.offset + row0 / p.group);  // the block's first visible key
    // Built for another subgroup size than the one the driver chose: the outputs become NaN
    // (loud, never silently wrong); sid is clamped so nothing reads out of bounds meanwhile.
    let sized = nsg == NSG;
    let s = min(sid, NSG - 1u);
    // This invocation's row and share of it in the softmax and output steps.
    // Row r is one of subgroup s's 16 rows, so the softmax reads only S rows its own subgroup
    // stored and writes only P rows its own subgroup reads (subgroup barriers, lane shuffles).
    let r = 16u * s + lane / TPR;
    let c = lane % TPR;
    let gr = row0 + r;
    let t_r = gr / p.group;
    var lim = kend;  // keys < lim are visible to row r
    if (p.causal != 0u) {
        lim = min(kend, p.offset + t_r + 1u);
    }
    let lo = window_start(p.offset + t_r);  // and keys >= lo
    let out_base = (t_r * p.heads + hk * p.group + (gr - t_r * p.group)) * D;

    // This subgroup's 16 Q rows (rotated at offset + t, pre-scaled by scale * log2 e, f16, in row
    // order per KV head: the staging pass), kept as A tiles.
    let qrow = hk * p.row_blocks * BQ + row0 + 16u * s;
    //@ND let qa{k} = coopLoadT<coop_mat16x16<f16, A>>(&qs[qrow * D + 16u * {k}u], D);

    // One pass: per tile, S = Q K^T; the row's tile max mt; P = exp2(S - m) as f16 with m the
    // row's reference max, raised (to mt) only when mt > m + TAU, so P <= 2^TAU; O += P V.
    // Raising m of a row that has seen keys rescales its O and l by exp2(m_old - m_new): l here,
    // O through ss (see the file notes), entered by the whole workgroup when any row needs it.
    //@ND var o{k} = coop_mat16x16<f32, C>();
    // This invocation's CPT chunks of the next K tile and of this V tile, in registers.
    //@CP var kw{x} = load_chunk(false, li, {x}u, kbeg, kend, hk);
    //@CP var vw{x} = array<vec4<u32>, 2>();
    var m_r = NEG;  // the row's reference max (log2 domain); NEG until it sees a key
    var l_p = 0.0;  // this invocation's share of the row's sum of P
    if (li == 0u) {
        flag.x = 0u;
    }
    // Per tile: a workgroup barrier after staging K (before any subgroup's Q K^T) and the flag's
    // uniform load (a barrier before and after) after staging V (before any P V). A subgroup
    // stages the next K only after its own P V, and passes that K barrier only once every
    // subgroup has, so no tile is overwritten while read. S, the softmax, P and the rare O
    // rescale touch only the subgroup's own rows of ss and ps: subgroup barriers.
    for (var k0 = kbeg; k0 < kend; k0 += BK) {
        //@CP store_chunk(kw{x}, li, {x}u, 0u);
        workgroupBarrier();
        //@CP vw{x} = load_chunk(true, li, {x}u, k0, kend, hk);
        // S rows 16 s .. 16 s + 15 (log2 domain, unmasked) = Q_s K^T, into ss, one accumulator
        // per 16 keys (independent chains); B(d, j) = K[16 n + j][16 k + d]: column-major in the
        // K tile.
        //@NB var acc{n} = coop_mat16x16<f32, C>();
        //@ND begin
        //@NB acc{n} = coopMultiplyAdd(qa{k}, coopLoad<coop_mat16x16<f16, B>>(&kv[(16u * {n}u * DS + 16u * {k}u) / 4u], DS4), acc{n});
        //@ND end
        //@NB coopStoreT(acc{n}, &ss[16u * s * SS + 16u * {n}u], SS);
        subgroupBarrier();
        // The row's JP = BK / TPR scores c JP .. c JP + JP - 1 of this tile (masked: NEG), held
        // as named values; its max over the tile (lane shuffles), then P as f16.
        let c0 = c * JP;
        let sb = r * SS + c0;
        //@JQ let key{q} = vec4<u32>(k0 + c0 + 4u * {q}u) + vec4<u32>(0u, 1u, 2u, 3u);
        //@JQ let s{q} = select(vec4<f32>(NEG), softcap4(vec4<f32>(ss[sb + 4u * {q}u], ss[sb + 4u * {q}u + 1u], ss[sb + 4u * {q}u + 2u], ss[sb + 4u * {q}u + 3u]), p.softcap), (key{q} < vec4<u32>(lim)) & (key{q} >= vec4<u32>(lo)));
        var mt4 = vec4<f32>(NEG);
        //@JQ mt4 = max(mt4, s{q});
        var mt = max(max(mt4.x, mt4.y), max(mt4.z, mt4.w));
        for (var o = 1u; o < TPR; o <<= 1u) {
            mt = max(mt, subgroupShuffleXor(mt, o));
        }
        var alpha = 1.0;
        if (mt > m_r + TAU) {
            if (m_r > NEG) {
                flag.x = 1u;  // O holds earlier keys of this row: rescale it
            }
            alpha = exp2(m_r - mt);  // 0 for a row's first keys (O and l are 0 then)
            m_r = mt;
        }
        l_p *= alpha;
        // A row whose keys so far are all masked (before its sliding window) still has m_r = NEG:
        // masked keys give 0 explicitly (from a row's first visible key on, m_r > NEG and they would anyway).
        //@JQ let p{q} = select(vec4<f32>(0.0), exp2(s{q} - vec4<f32>(m_r)), s{q} > vec4<f32>(NEG));
        //@JQ l_p += (p{q}.x + p{q}.y) + (p{q}.z + p{q}.w);
        //@JQ ps[(r * PS + c0) / 4u + {q}u] = vec4<f16>(p{q});
        //@CP store_chunk(vw{x}, li, {x}u, VOFF);
        if (k0 + BK < kend) {
            //@CP kw{x} = load_chunk(false, li, {x}u, k0 + BK, kend, hk);
        }
        if (workgroupUniformLoad(&flag).x != 0u) {
            // O rows *= alpha (each invocation its row's factor), 16 columns at a time through
            // this subgroup's rows of ss (its S is read: the barrier first).
            //@ND begin
            subgroupBarrier();
            coopStoreT(o{k}, &ss[16u * s * SS], SS);
            subgroupBarrier();
            for (var x = c; x < 16u; x += TPR) {
                ss[r * SS + x] *= alpha;
            }
            subgroupBarrier();
            o{k} = coopLoadT<coop_mat16x16<f32, C>>(&ss[16u * s * SS], SS);
            //@ND end
        }
        if (li == 0u) {
            flag.x = 0u;  // every invocation has loaded it; the next set follows the next barrier
        }
        //@NB begin
        let pa{n} = coopLoadT<coop_mat16x16<f16, A>>(&ps[(16u * s * PS + 16u * {n}u) / 4u], PS4);
        //@ND o{k} = coopMultiplyAdd(pa{n}, coopLoadT<coop_mat16x16<f16, B>>(&kv[(VOFF + 16u * {n}u * DS + 16u * {k}u) / 4u], DS4), o{k});
        //@NB end
    }

    // l = the row's sum of P; O / l, 16 columns at a time through ss (each subgroup its own rows).
    workgroupBarrier();
    part[r * TPR + c] = l_p;
    workgroupBarrier();
    var l = 0.0;
    for (var x = 0u; x < TPR; x++) {
        l += part[r * TPR + x];
    }
    var inv_l = 1.0 / l;
    if (!sized) {
        let nan_bits = 0x7fc00000u;  // a runtime NaN (a NaN const-expression is invalid WGSL)
        inv_l = bitcast<f32>(nan_bits);
    }
    //@ND begin
    workgroupBarrier();
    coopStoreT(o{k}, &ss[16u * s * SS], SS);
    workgroupBarrier();
    if (live && gr < rows) {
        for (var x = c; x < 16u; x += TPR) {
            out[out_base + 16u * {k}u + x] = ss[r * SS + x] * inv_l;
        }
    }
    //@ND end
}
