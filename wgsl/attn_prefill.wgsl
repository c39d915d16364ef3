// Fused RoPE + flash attention, prefill. One workgroup = one KV head x BQ "rows", a row being a
// (query token t, query head g of the KV head's group) pair, so every K/V tile loaded into
// workgroup memory serves the whole GQA group. Query t sits at absolute position offset + t and,
// when causal, sees keys j <= offset + t; with a sliding window W, only keys j > offset + t - W
// (the tiles before the block's first window are skipped). Scores are soft-capped where asked
// (attn_softcap.wgsl) before masking. Q is rotated (and pre-scaled by scale * log2 e) as it is
// loaded, K too unless it comes rotated (K_ROT == 0 means: rotate key j at position j).
// Online softmax over KV tiles of BK keys; O accumulates in registers (RO rows x PP pairs of
// columns per invocation).
// Scores: each invocation computes an RQ x RK block (rows rb*RQ + a, keys kb + b*BK/RK), so
// every value read from workgroup memory is used RK or RQ times. Rows of qs/kvs are padded to an
// odd stride (DP) and ps rows to BK + 1, so invocations reading consecutive keys hit distinct banks.
// Q/O f32; K/V f32, or f16 stored two per u32 word (KV_F16).
// The variant prologue (attn_prefill_portable.wgsl / attn_prefill_subgroup.wgsl) holds the entry
// point, which calls prefill_main, and softmax_tile, the online-softmax step over ps. sg is the
// subgroup's (size, id, count) as entry-point arguments (zeros in the Portable variant): values
// the WGSL uniformity analysis can see are the same across a subgroup, as the bounds of a loop
// around subgroup shuffles must be (a module-scope private copy would not be).

override D: u32 = 128u;        // head dim (even)
override BQ: u32 = 16u;        // rows per workgroup (power of two, <= WG)
override BK: u32 = 16u;        // keys per tile
override RQ: u32 = 1u;         // score rows per invocation (RQ * RK <= 8, BQ/RQ * BK/RK <= WG)
override RK: u32 = 1u;         // score keys per invocation
override KV_F16: bool = false;
override NEOX: bool = false;
const WG: u32 = 128u;
const NEG: f32 = -3.0e38;
override HALF: u32 = D / 2u;
override RO: u32 = 1u;                       // rows per invocation in the PV phase
override TPR: u32 = WG * RO / BQ;            // invocations per row group in the PV phase
override PP: u32 = (HALF + TPR - 1u) / TPR;  // column pairs per invocation (RO * PP <= 32)
override DP: u32 = D + 1u;                    // padded row stride of qs / kvs
override BKP: u32 = BK + 1u;                  // padded row stride of ps
override NKB: u32 = BK / RK;                  // key blocks

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<u32>;
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

override QS_LEN: u32 = BQ * DP;
override KVS_LEN: u32 = BK * DP;
override PS_LEN: u32 = BQ * BKP;
var<workgroup> qs: array<f32, QS_LEN>;
var<workgroup> kvs: array<f32, KVS_LEN>;
var<workgroup> ps: array<f32, PS_LEN>;
var<workgroup> m_s: array<f32, BQ>;
var<workgroup> l_s: array<f32, BQ>;
var<workgroup> a_s: array<f32, BQ>;

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

fn prefill_main(wg_id: u32, li: u32, sg: vec3<u32>) {
    if (wg_id >= p.row_blocks * p.kv_heads) {
        return;  // uniform across the workgroup
    }
    let hk = wg_id / p.row_blocks;
    let rb = wg_id - hk * p.row_blocks;
    let rows = p.tokens * p.group;
    let row0 = rb * BQ;
    let last_t = (min(rows, row0 + BQ) - 1u) / p.group;
    let kbeg = window_start(p.offset + row0 / p.group);  // the block's first visible key

    // Q tile, rotated at offset + t and pre-scaled.
    for (var idx = li; idx < BQ * HALF; idx += WG) {
        let r = idx / HALF;
        let i = idx - r * HALF;
        let e = pair_at(i);
        let gr = row0 + r;
        var v = vec2<f32>(0.0);
        if (gr < rows) {
            let t = gr / p.group;
            let h = hk * p.group + (gr - t * p.group);
            let base = (t * p.heads + h) * D;
            v = rot(q[base + e.x], q[base + e.y], table[(p.offset + t) * p.table_half + i]) * p.scale_log2;
        }
        qs[r * DP + e.x] = v.x;
        qs[r * DP + e.y] = v.y;
    }
    for (var r = li; r < BQ; r += WG) {
        m_s[r] = NEG;
        l_s[r] = 0.0;
    }
    var acc: array<vec2<f32>, 32>;
    for (var k = 0u; k < RO * PP; k++) {
        acc[k] = vec2<f32>(0.0);
    }
    let ro = (li / TPR) * RO;  // first of this invocation's RO rows
    let lane = li % TPR;

    var kend = p.kv_len;
    if (p.causal != 0u) {
        kend = min(kend, p.offset + last_t + 1u);
    }
    for (var k0 = kbeg; k0 < kend; k0 += BK) {
        // K tile (rotated at the key's position unless K comes rotated).
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
            kvs[j * DP + e.x] = v.x;
            kvs[j * DP + e.y] = v.y;
        }
        workgroupBarrier();
        // Scores (log2 domain), masked entries NEG.
        let sr = li / NKB;
        let sk = li - sr * NKB;
        if (sr * RQ < BQ) {
            var s: array<f32, 8>;
            for (var x = 0u; x < 8u; x++) {
                s[x] = 0.0;
            }
            for (var e = 0u; e < D; e++) {
                var kv: array<f32, 8>;
                for (var b = 0u; b < RK; b++) {
                    kv[b] = kvs[(sk + b * NKB) * DP + e];
                }
                for (var a = 0u; a < RQ; a++) {
                    let qv = qs[(sr * RQ + a) * DP + e];
                    for (var b = 0u; b < RK; b++) {
                        s[a * RK + b] += qv * kv[b];
                    }
                }
            }
            for (var a = 0u; a < RQ; a++) {
                let r = sr * RQ + a;
                let t = (row0 + r) / p.group;
                for (var b = 0u; b < RK; b++) {
                    let j = sk + b * NKB;
                    let key = k0 + j;
                    let visible = key < kend && (p.causal == 0u || key <= p.offset + t) && key >= window_start(p.offset + t);
                    ps[r * BKP + j] = select(NEG, softcap(s[a * RK + b], p.softcap), visible);
                }
            }
        }
        workgroupBarrier();
        // Online softmax per row; meanwhile the V tile replaces K.
        softmax_tile(li, sg);
        for (var idx = li; idx < BK * HALF; idx += WG) {
            let j = idx / HALF;
            let c = 2u * (idx - j * HALF);
            let key = k0 + j;
            var v = vec2<f32>(0.0);
            if (key < kend) {
                v = v_pair((key * p.kv_heads + hk) * D + c);
            }
            kvs[j * DP + c] = v.x;
            kvs[j * DP + c + 1u] = v.y;
        }
        workgroupBarrier();
        // O = O * alpha + P V: RO rows x PP column pairs per invocation, so each V pair read
        // from workgroup memory serves RO rows.
        for (var a = 0u; a < RO; a++) {
            let alpha = a_s[ro + a];
            for (var k = 0u; k < PP; k++) {
                acc[a * PP + k] *= alpha;
            }
        }
        for (var j = 0u; j < BK; j++) {
            var pj: array<f32, 4>;
            for (var a = 0u; a < RO; a++) {
                pj[a] = ps[(ro + a) * BKP + j];
            }
            for (var k = 0u; k < PP; k++) {
                let cp = lane + k * TPR;
                if (cp < HALF) {
                    let v = vec2<f32>(kvs[j * DP + 2u * cp], kvs[j * DP + 2u * cp + 1u]);
                    for (var a = 0u; a < RO; a++) {
                        acc[a * PP + k] += pj[a] * v;
                    }
                }
            }
        }
        workgroupBarrier();
    }
    for (var a = 0u; a < RO; a++) {
        let gr = row0 + ro + a;
        if (gr < rows) {
            let t = gr / p.group;
            let h = hk * p.group + (gr - t * p.group);
            let inv_l = 1.0 / l_s[ro + a];
            for (var k = 0u; k < PP; k++) {
                let cp = lane + k * TPR;
                if (cp < HALF) {
                    let o = acc[a * PP + k] * inv_l;
                    let base = (t * p.heads + h) * D + 2u * cp;
                    out[base] = o.x;
                    out[base + 1u] = o.y;
                }
            }
        }
    }
}
