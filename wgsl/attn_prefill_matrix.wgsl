// Flash attention prefill, Matrix variant: Q K^T and P V on 16x16x16 cooperative matrices (f16
// inputs, f32 accumulation), one pass over the keys with an online softmax. It reads the f16
// operands attn_prefill_stage.wgsl wrote into one scratch buffer s16: Q' (rotated, times
// scale * log2 e) as [kv_heads][rows_pad][D], K' (rotated) and V' as [kv_heads][kv_pad][D],
// zero past the last row / key. One workgroup = one KV head x BQ = 16 NSG rows, a row being a
// (query token, query head of the KV head's group) pair, so each K/V tile in workgroup memory
// serves the whole GQA group. Query t sits at absolute position offset + t and, when causal,
// sees keys j <= offset + t.
//
// NSG subgroups of SG invocations; subgroup s owns rows 16 s .. 16 s + 15: their Q' as ND = D / 16
// A matrices and their output as ND f32 accumulators, and the TPR = SG / 16 invocations
// li = TPR r .. TPR r + TPR - 1 handle row r in the softmax (their max and sum combined through
// workgroup memory; no subgroup operations). The kernel is built for the adapter's one subgroup
// size SG and checks num_subgroups == NSG at run time: a mismatch writes NaN. No early returns:
// cooperative-matrix operations need uniform control flow.
//
// Online softmax without per-element access to the accumulators: each row keeps a running
// reference m and P = exp2(s - m). A tile raises m only when its row max exceeds m + TAU (P <=
// 2^TAU, fine in f16); then O's rows are rescaled by exp2(m_old - m_new) through this subgroup's
// rows of the score tile in workgroup memory (coopStore, scale, coopLoad), which the whole
// workgroup enters only when some row needs it (workgroupUniformLoad of a flag). With TAU = 8 that
// is rare after the first tile; l (f32) is rescaled with O, O / l at the end.
//
// Per tile of BK keys: K and V tiles staged as f16 in workgroup memory (row stride DS = D + 8
// halves), fetched into registers one tile ahead: by 16-byte vectors (default) or, STAGE_COOP, by
// 16x16 block copies (coopLoadT from s16, coopStoreT); S = Q K^T stored f32 (stride SS); P f16
// (stride PS); four barriers per tile. Q' comes through workgroup memory 64 rows at a time, or,
// Q_COOP, straight from s16. ND, KPS (blocks each subgroup copies) and CPT (vectors each
// invocation copies) come from `const` lines appended to this text (attn_prefill_matrix.rs):
// function-scope arrays need constant lengths.

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,      // heads / kv_heads
    rows: u32,       // tokens * group
    rows_pad: u32,   // row_blocks * BQ
    kv_len: u32,
    kv_pad: u32,     // kv_len rounded up to BK
    offset: u32,
    causal: u32,
    row_blocks: u32, // ceil(rows / BQ)
    k_base: u32,     // K' and V' in s16 (Q' at 0)
    v_base: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

override D: u32 = 128u;        // head dim, a multiple of 16 (= 16 * ND)
override BK: u32 = 32u;        // keys per tile, a multiple of 16
override SG: u32 = 32u;        // subgroup size the pipeline is built for (16 | SG)
override NSG: u32 = 4u;        // subgroups per workgroup
override TAU: f32 = 8.0;       // log2 headroom before a row's reference max is raised
override STAGE_COOP: bool = false; // stage K/V tiles by coopLoadT + coopStoreT (else vector copies)
override Q_COOP: bool = false;  // load Q' straight from s16 (else through workgroup memory)
const NEG: f32 = -3.0e38;
override WG: u32 = NSG * SG;
override BQ: u32 = 16u * NSG;  // rows per workgroup
override TPR: u32 = SG / 16u;  // invocations per row in the softmax
override DS: u32 = D + 8u;     // f16 row stride of the K / V tiles
override SS: u32 = BK + 4u;    // f32 row stride of S (>= 16: also the rescale / output scratch)
override PS: u32 = BK + 8u;    // f16 row stride of P
override NKB: u32 = BK / 16u;
override NBLK: u32 = NKB * ND; // 16x16 blocks of one K (or V) tile
override VOFF: u32 = BK * DS;  // start of the V tile in kv
override KV_LEN: u32 = max(2u * BK, 64u) * DS;  // also Q' staging, 64 rows at a time
override VPR: u32 = D / 8u;    // 16-byte vectors per row
override NCH: u32 = BK * VPR;  // vectors per K (or V) tile
override SS_LEN: u32 = BQ * SS;
override PS_LEN: u32 = BQ * PS;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> s16: array<f16>;      // the scratch, for coopLoad
@group(0) @binding(2) var<storage, read> sv: array<vec4<u32>>;  // the same scratch, 8 halves a vector
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> kv: array<f16, KV_LEN>;   // K tile at 0, V tile at VOFF
var<workgroup> ss: array<f32, SS_LEN>;
var<workgroup> ps: array<f16, PS_LEN>;
var<workgroup> flag: u32;                // some row needs O rescaled in this tile
var<workgroup> part: array<f32, WG>;     // row max / sum shares of the TPR invocations of a row

// This subgroup's blocks of the K or V tile at key k0 of the head whose rows start at `base`,
// into registers. Block x of the tile: keys 16 (x / ND) .., columns 16 (x % ND) ..; the last
// block is copied twice where NSG does not divide NBLK (same data, same place).
fn fetch(w: ptr<function, array<coop_mat16x16<f16, B>, KPS>>, s: u32, base: u32, k0: u32) {
    for (var x = 0u; x < KPS; x++) {
        let blk = min(s + x * NSG, NBLK - 1u);
        let b = blk / ND;
        let c = blk - b * ND;
        (*w)[x] = coopLoadT<coop_mat16x16<f16, B>>(&s16[base + (k0 + 16u * b) * D + 16u * c], D);
    }
}

fn stage(w: ptr<function, array<coop_mat16x16<f16, B>, KPS>>, s: u32, off: u32) {
    for (var x = 0u; x < KPS; x++) {
        let blk = min(s + x * NSG, NBLK - 1u);
        let b = blk / ND;
        let c = blk - b * ND;
        coopStoreT((*w)[x], &kv[off + 16u * b * DS + 16u * c], DS);
    }
}

// The same by 16-byte vectors: vector ch of the tile = key ch / VPR, halves 8 (ch % VPR) ..;
// CPT per invocation (the last one copied twice where WG does not divide NCH).
fn fetch_v(w: ptr<function, array<vec4<u32>, CPT>>, li: u32, base: u32, k0: u32) {
    for (var x = 0u; x < CPT; x++) {
        let ch = min(li + x * WG, NCH - 1u);
        let j = ch / VPR;
        (*w)[x] = sv[(base + (k0 + j) * D) / 8u + ch - j * VPR];
    }
}

fn put8(o: u32, w: vec4<u32>) {
    for (var y = 0u; y < 4u; y++) {
        let h = unpack2x16float(w[y]);
        kv[o + 2u * y] = f16(h.x);
        kv[o + 2u * y + 1u] = f16(h.y);
    }
}

fn stage_v(w: ptr<function, array<vec4<u32>, CPT>>, li: u32, off: u32) {
    for (var x = 0u; x < CPT; x++) {
        let ch = min(li + x * WG, NCH - 1u);
        let j = ch / VPR;
        put8(off + j * DS + 8u * (ch - j * VPR), (*w)[x]);
    }
}

// S rows 16 s .. 16 s + 15 (log2 domain, unmasked) = Q_s K^T, into ss.
fn scores(qa: ptr<function, array<coop_mat16x16<f16, A>, ND>>, s: u32) {
    for (var n = 0u; n < NKB; n++) {
        var acc = coop_mat16x16<f32, C>();
        for (var k = 0u; k < ND; k++) {
            // B(d, j) = K[16 n + j][16 k + d]: column-major in the K tile.
            let kb = coopLoad<coop_mat16x16<f16, B>>(&kv[16u * n * DS + 16u * k], DS);
            acc = coopMultiplyAdd((*qa)[k], kb, acc);
        }
        coopStoreT(acc, &ss[16u * s * SS + 16u * n], SS);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32) {
    // Workgroups past the last block (the grid may be rounded up to 2D) compute block 0 again and
    // write nothing: cooperative-matrix operations need uniform control flow, so no early return.
    let wg_raw = wid.x + wid.y * nwg.x;
    let live = wg_raw < p.row_blocks * p.kv_heads;
    let wg_id = select(0u, wg_raw, live);
    let hk = wg_id / p.row_blocks;
    let rb = wg_id - hk * p.row_blocks;
    let row0 = rb * BQ;
    let last_t = (min(p.rows, row0 + BQ) - 1u) / p.group;
    var kend = p.kv_len;
    if (p.causal != 0u) {
        kend = min(kend, p.offset + last_t + 1u);
    }
    // Built for another subgroup size than the one the driver chose: the outputs become NaN
    // (loud, never silently wrong); sid is clamped so nothing reads out of bounds meanwhile.
    let sized = nsg == NSG;
    let s = min(sid, NSG - 1u);
    // This invocation's row and share of it in the softmax and output steps.
    let r = li / TPR;
    let c = li - r * TPR;
    let gr = row0 + r;
    let t_r = gr / p.group;
    var lim = kend;  // keys < lim are visible to row r
    if (p.causal != 0u) {
        lim = min(kend, p.offset + t_r + 1u);
    }
    let out_base = (t_r * p.heads + hk * p.group + (gr - t_r * p.group)) * D;

    var qa: array<coop_mat16x16<f16, A>, ND>;
    let qblock = (hk * p.rows_pad + row0) * D;
    if (Q_COOP) {
        for (var k = 0u; k < ND; k++) {
            qa[k] = coopLoadT<coop_mat16x16<f16, A>>(&s16[qblock + 16u * s * D + 16u * k], D);
        }
    } else {
        // 64 rows of Q' at a time through kv; each subgroup keeps the A tiles of its 16 rows.
        for (var q0 = 0u; q0 < BQ; q0 += 64u) {
            for (var ch = li; ch < 64u * VPR; ch += WG) {
                let j = ch / VPR;
                put8(j * DS + 8u * (ch - j * VPR), sv[(qblock + (q0 + j) * D) / 8u + ch - j * VPR]);
            }
            workgroupBarrier();
            let mine = 16u * s >= q0 && 16u * s < q0 + 64u;
            let lr = select(0u, 16u * s - q0, mine);
            for (var k = 0u; k < ND; k++) {
                let t = coopLoadT<coop_mat16x16<f16, A>>(&kv[lr * DS + 16u * k], DS);
                if (mine) {
                    qa[k] = t;
                }
            }
            workgroupBarrier();
        }
    }
    let kbase = p.k_base + hk * p.kv_pad * D;
    let vbase = p.v_base + hk * p.kv_pad * D;
    var kw: array<coop_mat16x16<f16, B>, KPS>;
    var vw: array<coop_mat16x16<f16, B>, KPS>;
    var km: array<vec4<u32>, CPT>;
    var vm: array<vec4<u32>, CPT>;
    if (STAGE_COOP) {
        fetch(&kw, s, kbase, 0u);
        fetch(&vw, s, vbase, 0u);
        stage(&kw, s, 0u);
        stage(&vw, s, VOFF);
    } else {
        fetch_v(&km, li, kbase, 0u);
        fetch_v(&vm, li, vbase, 0u);
        stage_v(&km, li, 0u);
        stage_v(&vm, li, VOFF);
    }
    if (li == 0u) {
        flag = 0u;
    }
    workgroupBarrier();

    var oacc: array<coop_mat16x16<f32, C>, ND>;
    for (var k = 0u; k < ND; k++) {
        oacc[k] = coop_mat16x16<f32, C>();
    }
    var m_run = NEG;  // the row's reference max (log2 domain)
    var l_p = 0.0;    // this invocation's share of the row's sum of P
    for (var k0 = 0u; k0 < kend; k0 += BK) {
        // Tile k0's K and V are in workgroup memory; fetch the next tile's blocks meanwhile.
        let more = k0 + BK < kend;
        if (more) {
            if (STAGE_COOP) {
                fetch(&kw, s, kbase, k0 + BK);
                fetch(&vw, s, vbase, k0 + BK);
            } else {
                fetch_v(&km, li, kbase, k0 + BK);
                fetch_v(&vm, li, vbase, k0 + BK);
            }
        }
        scores(&qa, s);
        workgroupBarrier();  // S complete; every subgroup is done with this K tile
        if (more) {
            if (STAGE_COOP) {
                stage(&kw, s, 0u);
            } else {
                stage_v(&km, li, 0u);
            }
        }
        var mt = NEG;
        for (var j = c; j < BK; j += TPR) {
            if (k0 + j < lim) {
                mt = max(mt, ss[r * SS + j]);
            }
        }
        // The row's max over its TPR invocations through workgroup memory (no subgroup operations).
        part[li] = mt;
        workgroupBarrier();
        for (var x = 0u; x < TPR; x++) {
            mt = max(mt, part[r * TPR + x]);
        }
        var alpha = 1.0;
        if (mt > m_run + TAU) {
            if (m_run > NEG) {
                flag = 1u;  // O holds earlier keys: rescale it (l is rescaled here)
            }
            alpha = exp2(m_run - mt);
            m_run = mt;
        }
        l_p *= alpha;
        for (var j = c; j < BK; j += TPR) {
            var pj = 0.0;
            if (k0 + j < lim) {
                pj = exp2(ss[r * SS + j] - m_run);
            }
            l_p += pj;
            ps[r * PS + j] = f16(pj);
        }
        // Also the barrier after the softmax's reads of ss and writes of ps.
        if (workgroupUniformLoad(&flag) != 0u) {
            // O rows *= alpha (1 for rows that kept their reference; 0 for rows that had seen no
            // key yet, whose O is 0), 16 columns at a time through this subgroup's rows of ss.
            for (var k = 0u; k < ND; k++) {
                let col = 16u * (k % NKB);
                coopStoreT(oacc[k], &ss[16u * s * SS + col], SS);
                workgroupBarrier();
                for (var x = c; x < 16u; x += TPR) {
                    ss[r * SS + col + x] *= alpha;
                }
                workgroupBarrier();
                oacc[k] = coopLoadT<coop_mat16x16<f32, C>>(&ss[16u * s * SS + col], SS);
            }
        }
        for (var kk = 0u; kk < NKB; kk++) {
            let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[16u * s * PS + 16u * kk], PS);
            for (var k = 0u; k < ND; k++) {
                // B(j, d) = V[16 kk + j][16 k + d]: row-major in the V tile.
                let vb = coopLoadT<coop_mat16x16<f16, B>>(&kv[VOFF + 16u * kk * DS + 16u * k], DS);
                oacc[k] = coopMultiplyAdd(pa, vb, oacc[k]);
            }
        }
        workgroupBarrier();  // every subgroup is done with V, P, S and the flag
        if (more) {
            if (STAGE_COOP) {
                stage(&vw, s, VOFF);
            } else {
                stage_v(&vm, li, VOFF);
            }
        }
        if (li == 0u) {
            flag = 0u;
        }
    }

    // l = the row's sum of P over its TPR invocations; O / l, NKB x 16 columns at a time through
    // ss (each subgroup its own rows).
    part[li] = l_p;
    workgroupBarrier();
    var l = 0.0;
    for (var x = 0u; x < TPR; x++) {
        l += part[r * TPR + x];
    }
    var inv_l = 1.0 / l;
    if (!sized) {
        inv_l = bitcast<f32>(0x7fc00000u);
    }
    for (var k = 0u; k < ND; k += NKB) {
        for (var kk = 0u; kk < NKB; kk++) {
            if (k + kk < ND) {
                coopStoreT(oacc[k + kk], &ss[16u * s * SS + 16u * kk], SS);
            }
        }
        workgroupBarrier();
        if (live && gr < p.rows) {
            for (var x = c; x < 16u * NKB; x += TPR) {
                if (16u * k + x < D) {
                    out[out_base + 16u * k + x] = ss[r * SS + x] * inv_l;
                }
            }
        }
        workgroupBarrier();
    }
}
