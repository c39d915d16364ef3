// Split-K decode attention, partial pass, Subgroup variant (self-contained). The Portable variant
// is attn_decode_portable.wgsl + attn_decode.wgsl.
//
// One workgroup = one KV head hk x up to GB query heads of its GQA group x one chunk of keys
// [key0, key1): every K/V byte is read from memory once and serves all GB heads. The chunks cover
// keys key_lo .. kv_len - 1 (key_lo > 0: a sliding window); scores are soft-capped where asked
// (attn_softcap.wgsl, appended to this text).
//
// Teams. The WG invocations form KG = WG / L teams of L consecutive subgroup lanes (L a power of
// two, at most the subgroup size, so a team never spans two subgroups). A K or V row (D elements)
// is cut into NP pieces of 16 bytes (8 f16 or 4 f32; one 4-byte word per piece when rows are not
// whole 16-byte pieces); lane `lane` of a team owns pieces lane, lane + L, ... (PPL of them), so
// consecutive lanes read consecutive 16-byte pieces of a row: one load instruction of a 32-lane
// subgroup covers 512 contiguous bytes (two f16 rows of 256 B or one f32 row), no row is split
// across cache lines more than it must be, and each piece is read exactly once.
//
// Step. Team `team` takes B keys per step (key t + b * KG + team): it issues all their K and V
// loads first (2 * B * PPL 16-byte loads in flight per lane; with PF the loads of step n + 1 are
// issued before the math of step n, software pipelining), dots each K piece with the lane's
// q pieces of the GB heads (held in registers, pre-scaled by scale * log2 e), completes the dots
// with a butterfly of subgroupShuffleXor over the team's L lanes (every lane ends with the full
// scores), then runs its own online softmax (running max m, sum l, log2 domain; one rescale per
// step) and accumulates P V into the O columns it owns. Teams never wait for each other: there is
// no barrier in the key loop. At the end the KG team results are combined in workgroup memory
// (log-sum-exp weights) and the workgroup writes one partial row per head (O not normalised, m, l)
// for attn_merge.wgsl. Loop bounds are workgroup-uniform, so every shuffle runs with all lanes.
//
// Lanes: flat = subgroup_id * subgroup_size + subgroup_invocation_id (the subgroup-major index),
// team = flat / L, lane = flat % L = subgroup_invocation_id % L; the host picks L <= the adapter's
// smallest subgroup size, and WG a power of two, so subgroups are full (or the only one).
// Register arrays have fixed maximum sizes (WGSL function arrays cannot be override-sized): the
// host keeps GB * PPL <= 16 and B * PPL <= 32. With D, GB, L, B, PPL fixed at pipeline creation
// every loop has a constant trip count and every index is a constant after unrolling, so the
// arrays live in registers; no loop may run over the arrays' full declared size.

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
override GB: u32 = 4u;         // query heads per workgroup, <= 8
override WG: u32 = 128u;       // invocations, power of two
override L: u32 = 16u;         // lanes per team, power of two <= subgroup size
override B: u32 = 4u;          // keys per team per step, <= 8
override KV_F16: bool = true;
override VEC: bool = true;     // pieces are vec4<u32> (16 B); else one u32 word
override PF: bool = true;      // prefetch: the next step's loads are issued before this step's math
override SOFTCAP: bool = true; // scores soft-capped where p.softcap asks; false: that code left out
override WORDS: u32 = select(D, D / 2u, KV_F16);              // u32 words per K/V row
override NP: u32 = select(WORDS, WORDS / 4u, VEC);            // pieces per row
override EP: u32 = select(1u, 4u, VEC) * select(1u, 2u, KV_F16);  // elements per piece
override PPL: u32 = (NP + L - 1u) / L;                        // pieces per lane, <= 8
override KG: u32 = WG / L;                                    // teams per workgroup
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qr: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(5) var<storage, read_write> part_ml: array<vec2<f32>>;

// Team results for the final combine: (m, l) per team and head, then the weighted O sum.
override TML_LEN: u32 = KG * GB;
override TO_LEN: u32 = GB * D;
var<workgroup> t_ml: array<vec2<f32>, TML_LEN>;
var<workgroup> t_o: array<f32, TO_LEN>;

// Piece j of the row starting at u32 word `row`.
fn k_piece(row: u32, j: u32) -> vec4<u32> {
    if (VEC) {
        return kc[(row >> 2u) + j];
    }
    let w = row + j;
    return vec4<u32>(kc[w >> 2u][w & 3u], 0u, 0u, 0u);
}

fn v_piece(row: u32, j: u32) -> vec4<u32> {
    if (VEC) {
        return vc[(row >> 2u) + j];
    }
    let w = row + j;
    return vec4<u32>(vc[w >> 2u][w & 3u], 0u, 0u, 0u);
}

// A piece's elements as f32: elements 0..3 in .lo, 4..7 in .hi; unused ones are 0.
struct Wide {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// f16 pair -> f32 (unpack2x16float; a native-f16 bitcast<vec2<f16>> version computed wrong
// results on both lavapipe and the NVIDIA driver).
fn h2(w: u32) -> vec2<f32> {
    return unpack2x16float(w);
}

fn widen(w: vec4<u32>) -> Wide {
    if (KV_F16) {
        return Wide(vec4<f32>(h2(w.x), h2(w.y)), vec4<f32>(h2(w.z), h2(w.w)));
    }
    return Wide(bitcast<vec4<f32>>(w), vec4<f32>(0.0));
}

// Issue the K and V loads of the step starting at key t (keys t + b * KG + team, clamped to the
// last key of the chunk, so every load is in bounds).
fn load_step(kd: ptr<function, array<vec4<u32>, 32>>, vd: ptr<function, array<vec4<u32>, 32>>,
             t: u32, key1: u32, team: u32, lane: u32, hk: u32) {
    for (var b = 0u; b < B; b++) {
        let key = min(t + b * KG + team, key1 - 1u);
        let row = (key * p.kv_heads + hk) * WORDS;
        for (var i = 0u; i < PPL; i++) {
            let j = min(lane + i * L, NP - 1u);
            (*kd)[b * PPL + i] = k_piece(row, j);
            (*vd)[b * PPL + i] = v_piece(row, j);
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sl: u32,
        @builtin(subgroup_size) ss: u32, @builtin(subgroup_id) sid: u32) {
    let wg_id = wid.x + wid.y * nwg.x;
    if (wg_id >= p.nchunks * p.gblocks * p.kv_heads) {
        return;
    }
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

    let flat = sid * ss + sl;
    let team = flat / L;
    let lane = flat % L;

    // q pieces of this lane: q[(g * PPL + i) * 2 + half] holds elements of piece lane + i * L of
    // head g (zero past the row or the block), pre-scaled.
    var q: array<vec4<f32>, 32>;
    for (var g = 0u; g < GB; g++) {
        for (var i = 0u; i < PPL; i++) {
            let j = lane + i * L;
            var e8: array<f32, 8>;
            for (var e = 0u; e < 8u; e++) {
                var x = 0.0;
                if (g < gbn && j < NP && e < EP) {
                    x = qr[(h0 + g) * D + j * EP + e] * p.scale_log2;
                }
                e8[e] = x;
            }
            q[(g * PPL + i) * 2u] = vec4<f32>(e8[0], e8[1], e8[2], e8[3]);
            q[(g * PPL + i) * 2u + 1u] = vec4<f32>(e8[4], e8[5], e8[6], e8[7]);
        }
    }
    var m_run: array<f32, 8>;
    var l_run: array<f32, 8>;
    var o: array<vec4<f32>, 32>;
    for (var g = 0u; g < GB; g++) {
        m_run[g] = NEG;
        l_run[g] = 0.0;
    }
    for (var i = 0u; i < 2u * GB * PPL; i++) {
        o[i] = vec4<f32>(0.0);
    }

    // K and V pieces of the step: kp/vp are the step being computed; with PF the next step's
    // loads (kn/vn) are issued before this step's math, so a lane keeps two steps of loads in
    // flight and the memory system is not idle while a team computes. Keys past the chunk load
    // the last key (in bounds) and are masked below; pieces past the row load the last piece and
    // meet zero q / are never stored.
    var kp: array<vec4<u32>, 32>;
    var vp: array<vec4<u32>, 32>;
    var kn: array<vec4<u32>, 32>;
    var vn: array<vec4<u32>, 32>;
    if (PF) {
        load_step(&kn, &vn, key0, key1, team, lane, hk);
    }
    for (var t = key0; t < key1; t += KG * B) {
        if (PF) {
            kp = kn;
            vp = vn;
            load_step(&kn, &vn, t + KG * B, key1, team, lane, hk);
        } else {
            load_step(&kp, &vp, t, key1, team, lane, hk);
        }
        // Partial dots of this lane's pieces, then the butterfly over the team's lanes.
        var s: array<f32, 64>;
        for (var b = 0u; b < B; b++) {
            for (var g = 0u; g < GB; g++) {
                s[b * GB + g] = 0.0;
            }
            for (var i = 0u; i < PPL; i++) {
                let k = widen(kp[b * PPL + i]);
                for (var g = 0u; g < GB; g++) {
                    s[b * GB + g] += dot(q[(g * PPL + i) * 2u], k.lo) + dot(q[(g * PPL + i) * 2u + 1u], k.hi);
                }
            }
        }
        for (var mask = 1u; mask < L; mask = mask << 1u) {
            for (var x = 0u; x < B * GB; x++) {
                s[x] += subgroupShuffleXor(s[x], mask);
            }
        }
        if (SOFTCAP) {
            for (var x = 0u; x < B * GB; x++) {
                s[x] = softcap(s[x], p.softcap);
            }
        }
        // Online softmax per head: one rescale per step; s becomes p.
        for (var g = 0u; g < GB; g++) {
            var mx = m_run[g];
            for (var b = 0u; b < B; b++) {
                if (t + b * KG + team < key1) {
                    mx = max(mx, s[b * GB + g]);
                }
            }
            let alpha = exp2(m_run[g] - mx);
            m_run[g] = mx;
            var sum = 0.0;
            for (var b = 0u; b < B; b++) {
                let pb = select(0.0, exp2(s[b * GB + g] - mx), t + b * KG + team < key1);
                s[b * GB + g] = pb;
                sum += pb;
            }
            l_run[g] = l_run[g] * alpha + sum;
            for (var i = 0u; i < 2u * PPL; i++) {
                o[g * 2u * PPL + i] *= alpha;
            }
        }
        // O += P V.
        for (var b = 0u; b < B; b++) {
            for (var i = 0u; i < PPL; i++) {
                let v = widen(vp[b * PPL + i]);
                for (var g = 0u; g < GB; g++) {
                    let pb = s[b * GB + g];
                    o[(g * PPL + i) * 2u] += pb * v.lo;
                    o[(g * PPL + i) * 2u + 1u] += pb * v.hi;
                }
            }
        }
    }

    // Combine the teams: M = max m, L = sum l 2^(m - M), O = sum O 2^(m - M).
    if (lane == 0u) {
        for (var g = 0u; g < GB; g++) {
            t_ml[team * GB + g] = vec2<f32>(m_run[g], l_run[g]);
        }
    }
    workgroupBarrier();
    var w_own: array<f32, 8>;
    for (var g = 0u; g < GB; g++) {
        var mx = NEG;
        for (var r = 0u; r < KG; r++) {
            mx = max(mx, t_ml[r * GB + g].x);
        }
        w_own[g] = exp2(m_run[g] - mx);
    }
    // Teams add their weighted O in turn (KG barriers, once per workgroup).
    for (var r = 0u; r < KG; r++) {
        if (team == r) {
            for (var g = 0u; g < GB; g++) {
                for (var i = 0u; i < PPL; i++) {
                    let j = lane + i * L;
                    if (j < NP) {
                        for (var e = 0u; e < EP; e++) {
                            let idx = g * D + j * EP + e;
                            let x = w_own[g] * o[(g * PPL + i) * 2u + e / 4u][e % 4u];
                            t_o[idx] = select(t_o[idx] + x, x, r == 0u);
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }
    for (var idx = li; idx < gbn * D; idx += WG) {
        let g = idx / D;
        part_o[((h0 + g) * p.nchunks + c) * D + (idx - g * D)] = t_o[idx];
    }
    if (li < gbn) {
        var mx = NEG;
        for (var r = 0u; r < KG; r++) {
            mx = max(mx, t_ml[r * GB + li].x);
        }
        var l = 0.0;
        for (var r = 0u; r < KG; r++) {
            let ml = t_ml[r * GB + li];
            l += ml.y * exp2(ml.x - mx);
        }
        part_ml[(h0 + li) * p.nchunks + c] = vec2<f32>(mx, l);
    }
}
