// top_k: one level of an exact top-k. Workgroup w takes the entries w * 1024 .. w * 1024 + 1023
// (those below p.n) of its input, sorts them in workgroup memory (a bitonic network) by rank
// and writes the first p.k (p.k <= 256) as (logit bits, id) word pairs to
// dst[2 (w p.k + r)], dst[2 (w p.k + r) + 1], r < p.k.
//   p.mode = 0: the input is a logits row, src[p.off + i] for i < p.n (f32 bits), entry i has id
//               i; non-finite logits (NaN, +-inf) are no candidates.
//   p.mode = 1: the input is the output of an earlier level, pairs (src[2 i], src[2 i + 1]).
// Rank: a larger logit first, the lower id first among equal logits (-0 equals +0), no candidate
// (id 0xffffffff) last; so a level's output holds, per block, the k best of the block, and the
// k best of all the blocks' outputs are the k best of the row. Logits are compared as integers
// (an order-preserving map of their bits), so no float arithmetic (or subnormal flush) enters.

struct Params {
    n: u32,
    k: u32,
    off: u32,
    mode: u32,
}

const NONE: u32 = 0xffffffffu;
const BLOCK: u32 = 1024u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> sv: array<u32, 1024>;
var<workgroup> si: array<u32, 1024>;

// An unsigned key that orders finite f32 bits as their values: negative values flipped whole,
// positive ones above them; -0 maps to +0's key.
fn key(bits: u32) -> u32 {
    if (bits == 0x80000000u) {
        return 0x80000000u;
    }
    if ((bits & 0x80000000u) != 0u) {
        return ~bits;
    }
    return bits | 0x80000000u;
}

// Whether entry a ranks strictly before entry b.
fn before(a: u32, b: u32) -> bool {
    let ia = si[a];
    let ib = si[b];
    if (ia == NONE) {
        return false;
    }
    if (ib == NONE) {
        return true;
    }
    let ka = key(sv[a]);
    let kb = key(sv[b]);
    return ka > kb || (ka == kb && ia < ib);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = wid.x + wid.y * nwg.x;
    // A grid split over two dimensions may have workgroups past the last block (p.n >= 1).
    if (block > (p.n - 1u) / BLOCK) {
        return;
    }
    let base = block * BLOCK;
    for (var j = li; j < BLOCK; j += 256u) {
        var v = 0u;
        var id = NONE;
        let g = base + j;
        if (g < p.n) {
            if (p.mode == 0u) {
                v = src[p.off + g];
                // Exponent all ones: NaN or +-inf.
                if ((v & 0x7f800000u) != 0x7f800000u) {
                    id = g;
                }
            } else {
                v = src[2u * g];
                id = src[2u * g + 1u];
            }
        }
        sv[j] = v;
        si[j] = id;
    }
    workgroupBarrier();
    // Bitonic sort of the 1024 entries into rank order; 512 compare-exchanges per stage, two per
    // invocation.
    for (var size = 2u; size <= BLOCK; size <<= 1u) {
        for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
            for (var q = li; q < BLOCK / 2u; q += 256u) {
                let a = (q / stride) * 2u * stride + q % stride;
                let b = a + stride;
                // Runs with (a & size) == 0 go in rank order, the others reversed.
                let fwd = (a & size) == 0u;
                if (select(before(a, b), before(b, a), fwd)) {
                    let tv = sv[a];
                    let ti = si[a];
                    sv[a] = sv[b];
                    si[a] = si[b];
                    sv[b] = tv;
                    si[b] = ti;
                }
            }
            workgroupBarrier();
        }
    }
    if (li < p.k) {
        let o = 2u * (block * p.k + li);
        dst[o] = sv[li];
        dst[o + 1u] = si[li];
    }
}
