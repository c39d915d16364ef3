// Fused RoPE + flash attention prefill, Matrix variant: Q K^T and P V on 16x16x16 cooperative
// matrices (f16 inputs, f32 accumulation). Same rows as the other variants: one workgroup = one
// KV head x BQ = 64 rows, a row being a (query token, query head of the KV head's group) pair, so
// each K/V tile in workgroup memory serves the whole GQA group. Query t sits at absolute
// position offset + t and, when causal, sees keys j <= offset + t.
//
// NSG = 4 subgroups of SG invocations; subgroup s owns rows 16 s .. 16 s + 15: it keeps their Q
// (rotated, pre-scaled by scale * log2 e, rounded to f16) as ND = D / 16 A matrices and their
// output as ND f32 accumulators. The kernel is built for the adapter's one subgroup size SG and
// checks num_subgroups == NSG at run time (a mismatch writes NaN: loud, never silently wrong).
// No early returns: cooperative-matrix operations need uniform control flow.
//
// Two passes over the keys, so the accumulators never need a per-row rescale (a coop matrix has
// no element access): pass 1 computes the scores tile by tile and each invocation keeps a running
// (max, sum) of its share of one row; pass 2 recomputes the scores, writes P = exp2(s - m) as f16
// and accumulates P V. O = acc / l at the end. The extra Q K^T costs 1.5x the matrix flops of a
// one-pass kernel and avoids a workgroup-memory round trip of O per tile.
//
// Tiles: K (rotated on load unless it comes rotated) and V are staged as f16 in workgroup memory
// (rows padded to DS = D + 8 halves: 16-byte aligned rows that fall in different banks), the
// score tile S as f32 (stride SS) and P as f16 (stride PS). Keys past the tile's end are zero.
// Q, O f32; K, V f32 or f16 stored two per u32 word (KV_F16). ND comes from a `const` appended to
// this text (attn_prefill_matrix.rs), since function-scope arrays need a constant length.

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    group: u32,      // heads / kv_heads
    kv_len: u32,
    offset: u32,
    causal: u32,
    rotate_k: u32,
    row_blocks: u32, // ceil(tokens * group / BQ)
    table_half: u32, // pairs per table row (= D / 2)
    scale_log2: f32, // softmax scale * log2(e)
    _p: u32,
}

override D: u32 = 128u;        // head dim, a multiple of 16 (= 16 * ND)
override BK: u32 = 32u;        // keys per tile, a multiple of 16
override SG: u32 = 32u;        // subgroup size the pipeline is built for (16 | SG)
override KV_F16: bool = false;
override NEOX: bool = false;
const BQ: u32 = 64u;
const NSG: u32 = 4u;
const NEG: f32 = -3.0e38;
override WG: u32 = NSG * SG;
override HALF: u32 = D / 2u;
override DS: u32 = D + 8u;     // f16 row stride of the Q / K / V staging
override SS: u32 = BK + 4u;    // f32 row stride of S
override PS: u32 = BK + 8u;    // f16 row stride of P
override TPR: u32 = WG / BQ;   // invocations per row in the softmax steps
override VOFF: u32 = BK * DS;  // start of the V tile in kv
override KV_LEN: u32 = max(2u * BK, BQ) * DS;
override SS_LEN: u32 = BQ * SS;
override PS_LEN: u32 = BQ * PS;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<u32>;
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

var<workgroup> kv: array<f16, KV_LEN>;   // Q staging, then K tile at 0 and V tile at VOFF
var<workgroup> ss: array<f32, SS_LEN>;
var<workgroup> ps: array<f16, PS_LEN>;
var<workgroup> part: array<vec2<f32>, WG>;
var<workgroup> m_s: array<f32, BQ>;
var<workgroup> l_s: array<f32, BQ>;

fn k_elem(e: u32) -> f32 {
    if (KV_F16) {
        return unpack2x16float(kc[e >> 1u])[e & 1u];
    }
    return bitcast<f32>(kc[e]);
}

fn v_pair(e: u32) -> vec2<f32> {  // elements e, e + 1 (e even)
    if (KV_F16) {
        return unpack2x16float(vc[e >> 1u]);
    }
    return vec2<f32>(bitcast<f32>(vc[e]), bitcast<f32>(vc[e + 1u]));
}

fn pair_at(i: u32) -> vec2<u32> {
    if (NEOX) {
        return vec2<u32>(i, i + HALF);
    }
    return vec2<u32>(2u * i, 2u * i + 1u);
}

fn rot(a: f32, b: f32, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a * cs.x - b * cs.y, b * cs.x + a * cs.y);
}

// K tile: keys k0 .. k0 + BK (zero past kend), rotated at the key's position unless K is rotated.
fn load_k(li: u32, k0: u32, kend: u32, hk: u32) {
    for (var idx = li; idx < BK * HALF; idx += WG) {
        let j = idx / HALF;
        let i = idx - j * HALF;
        let e = pair_at(i);
        let key = k0 + j;
        var v = vec2<f32>(0.0);
        if (key < kend) {
            let base = (key * p.kv_heads + hk) * D;
            v = vec2<f32>(k_elem(base + e.x), k_elem(base + e.y));
            if (p.rotate_k != 0u) {
                v = rot(v.x, v.y, table[key * p.table_half + i]);
            }
        }
        kv[j * DS + e.x] = f16(v.x);
        kv[j * DS + e.y] = f16(v.y);
    }
}

fn load_v(li: u32, k0: u32, kend: u32, hk: u32) {
    for (var idx = li; idx < BK * HALF; idx += WG) {
        let j = idx / HALF;
        let c = 2u * (idx - j * HALF);
        let key = k0 + j;
        var v = vec2<f32>(0.0);
        if (key < kend) {
            v = v_pair((key * p.kv_heads + hk) * D + c);
        }
        kv[VOFF + j * DS + c] = f16(v.x);
        kv[VOFF + j * DS + c + 1u] = f16(v.y);
    }
}

// S rows 16 s .. 16 s + 15 (log2 domain, unmasked) = Q_s K^T, into ss.
fn scores(qa: ptr<function, array<coop_mat16x16<f16, A>, ND>>, s: u32) {
    for (var n = 0u; n < BK / 16u; n++) {
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
    let rows = p.tokens * p.group;
    let row0 = rb * BQ;
    let last_t = (min(rows, row0 + BQ) - 1u) / p.group;
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

    // Q rows, rotated at offset + t, pre-scaled, f16; each subgroup keeps its 16 rows as A tiles.
    for (var idx = li; idx < BQ * HALF; idx += WG) {
        let rr = idx / HALF;
        let i = idx - rr * HALF;
        let e = pair_at(i);
        let g = row0 + rr;
        var v = vec2<f32>(0.0);
        if (g < rows) {
            let t = g / p.group;
            let h = hk * p.group + (g - t * p.group);
            let base = (t * p.heads + h) * D;
            v = rot(q[base + e.x], q[base + e.y], table[(p.offset + t) * p.table_half + i]) * p.scale_log2;
        }
        kv[rr * DS + e.x] = f16(v.x);
        kv[rr * DS + e.y] = f16(v.y);
    }
    workgroupBarrier();
    var qa: array<coop_mat16x16<f16, A>, ND>;
    for (var k = 0u; k < ND; k++) {
        qa[k] = coopLoadT<coop_mat16x16<f16, A>>(&kv[16u * s * DS + 16u * k], DS);
    }
    workgroupBarrier();

    // Pass 1: row max and sum. Invocation (r, c) covers keys j = c, c + TPR, ... of every tile.
    var m_p = NEG;
    var l_p = 0.0;
    for (var k0 = 0u; k0 < kend; k0 += BK) {
        load_k(li, k0, kend, hk);
        workgroupBarrier();
        scores(&qa, s);
        workgroupBarrier();
        var mx = m_p;
        for (var j = c; j < BK; j += TPR) {
            if (k0 + j < lim) {
                mx = max(mx, ss[r * SS + j]);
            }
        }
        var sum = l_p * exp2(m_p - mx);
        for (var j = c; j < BK; j += TPR) {
            if (k0 + j < lim) {
                sum += exp2(ss[r * SS + j] - mx);
            }
        }
        m_p = mx;
        l_p = sum;
    }
    part[li] = vec2<f32>(m_p, l_p);
    workgroupBarrier();
    if (c == 0u) {
        var m = NEG;
        for (var x = 0u; x < TPR; x++) {
            m = max(m, part[li + x].x);
        }
        var l = 0.0;
        for (var x = 0u; x < TPR; x++) {
            l += part[li + x].y * exp2(part[li + x].x - m);
        }
        m_s[r] = m;
        l_s[r] = l;
    }
    workgroupBarrier();
    let m_r = m_s[r];

    // Pass 2: P = exp2(S - m) as f16, O += P V.
    var oacc: array<coop_mat16x16<f32, C>, ND>;
    for (var k = 0u; k < ND; k++) {
        oacc[k] = coop_mat16x16<f32, C>();
    }
    for (var k0 = 0u; k0 < kend; k0 += BK) {
        load_k(li, k0, kend, hk);
        workgroupBarrier();
        scores(&qa, s);
        workgroupBarrier();
        for (var j = c; j < BK; j += TPR) {
            var pj = 0.0;
            if (k0 + j < lim) {
                pj = exp2(ss[r * SS + j] - m_r);
            }
            ps[r * PS + j] = f16(pj);
        }
        load_v(li, k0, kend, hk);
        workgroupBarrier();
        for (var kk = 0u; kk < BK / 16u; kk++) {
            let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[16u * s * PS + 16u * kk], PS);
            for (var k = 0u; k < ND; k++) {
                let vb = coopLoadT<coop_mat16x16<f16, B>>(&kv[VOFF + 16u * kk * DS + 16u * k], DS);
                oacc[k] = coopMultiplyAdd(pa, vb, oacc[k]);
            }
        }
    }

    // O / l, 16 columns at a time through ss (each subgroup its own 16 rows).
    var inv_l = 1.0 / l_s[r];
    if (!sized) {
        inv_l = bitcast<f32>(0x7fc00000u);
    }
    for (var k = 0u; k < ND; k++) {
        workgroupBarrier();
        coopStoreT(oacc[k], &ss[16u * s * SS], SS);
        workgroupBarrier();
        if (live && gr < rows) {
            for (var x = c; x < 16u; x += TPR) {
                out[out_base + 16u * k + x] = ss[r * SS + x] * inv_l;
            }
        }
    }
}
