// Decode attention straight over TurboQuant K and V caches, split-K pass. Included after
// tq_portable.wgsl or tq_subgroup.wgsl and the generated codebook constants.
//
// In the rotated domain a cached vector is y = c * norm / sqrt(d) (c: centroids of its codes),
// and q . k ~= q' . y_k with q' = H D_K q / sqrt(d) (the `rotate` pass). So
//   score_j = scale * norm_j / sqrt(d) * sum_i q'_i c_ji,
//   o'      = sum_j p_j * norm_j / sqrt(d) * c_j        (rotated back once by the `merge` pass).
//
// One workgroup of 128 per (kv head, quad of up to 4 query heads sharing it (GQA), split of
// up to 512 visible positions). The quad's 4 queries sit side by side in a vec4 per coordinate,
// so every code is decoded once for all of them. Positions are logical: the split covers
// positions lo + split * split_len + t, read from slot pos % capacity, so a ring buffer is
// masked by logical position, never by slot.
//   K phase: one invocation per pair of keys (sharing each q' load), q' (vec4 per coordinate)
//            and the 16 centroids in workgroup memory; scores kept in workgroup memory.
//   softmax: max over the split, p = exp(s - max), sum; p pre-multiplied by the V norm.
//   V phase: invocation (w, stripe) owns code word w (8 coordinates) and every stripe-th key
//            (four keys a step); the stripes are summed in workgroup memory at the end, two
//            coordinates a round.
// Output row per (head, split): [max, sum, 0, 0, o'[d]] (unnormalised).

struct Params {
    kv_heads: u32,
    heads: u32,
    d: u32,
    capacity: u32,
    lo: u32,         // first visible logical position
    count: u32,      // visible positions
    split_len: u32,  // positions per split, <= SPLIT_MAX
    splits: u32,
    group: u32,      // query heads per kv head
    quads: u32,      // ceil(group / 4)
    kscale: f32,     // softmax scale / sqrt(d)
    vscale: f32,     // 1 / sqrt(d)
    row: u32,        // floats per partial row (d + 4)
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

const ATT_WG: u32 = 128u;
const SPLIT_MAX: u32 = 512u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qrot: array<f32>;
@group(0) @binding(2) var<storage, read> kcodes: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> knorms: array<f32>;
@group(0) @binding(4) var<storage, read> vcodes: array<u32>;
@group(0) @binding(5) var<storage, read> vnorms: array<f32>;
@group(0) @binding(6) var<storage, read_write> partial: array<f32>;

var<workgroup> qv: array<vec4<f32>, 512>;
var<workgroup> sc: array<vec4<f32>, SPLIT_MAX>;
var<workgroup> lut: array<f32, 16>;

// Scores of two keys (vec4 over the quad's heads) from their code vectors cv and cv2: every q'
// load from workgroup memory serves both. (Results and accumulators are named values, not
// arrays: an array indexed in a loop may be placed in local memory.)
struct KeyPair {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn key_dots(cv: u32, cv2: u32) -> KeyPair {
    let w4 = p.d / 32u;
    var a = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    for (var c = 0u; c < w4; c++) {
        let w = kcodes[cv * w4 + c];
        let w2 = kcodes[cv2 * w4 + c];
        for (var e = 0u; e < 4u; e++) {
            let x = w[e];
            let y = w2[e];
            let i0 = c * 32u + e * 8u;
            for (var k = 0u; k < 8u; k++) {
                let q = qv[i0 + k];
                a += lut[(x >> (4u * k)) & 15u] * q;
                a2 += lut[(y >> (4u * k)) & 15u] * q;
            }
        }
    }
    return KeyPair(a, a2);
}

// Cache vector of the split's position j (j < count <= capacity): the slots run on from
// `first` = slot of the split's first position and wrap at most once. (The caches' sizes keep
// capacity far below 2^32, so first + j does not overflow.)
fn slot(head: u32, first: u32, j: u32) -> u32 {
    let s = first + j;
    return head + select(s, s - p.capacity, s >= p.capacity);
}

// V accumulators of one invocation: coordinate k of its code word, vec4 over the quad's heads.
struct VAcc {
    c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>,
    c4: vec4<f32>, c5: vec4<f32>, c6: vec4<f32>, c7: vec4<f32>,
}

// acc += p * centroids of the 8 codes of `word`.
fn v_fold(acc: VAcc, word: u32, pj: vec4<f32>) -> VAcc {
    return VAcc(acc.c0 + lut[word & 15u] * pj, acc.c1 + lut[(word >> 4u) & 15u] * pj,
                acc.c2 + lut[(word >> 8u) & 15u] * pj, acc.c3 + lut[(word >> 12u) & 15u] * pj,
                acc.c4 + lut[(word >> 16u) & 15u] * pj, acc.c5 + lut[(word >> 20u) & 15u] * pj,
                acc.c6 + lut[(word >> 24u) & 15u] * pj, acc.c7 + lut[word >> 28u] * pj);
}

// Sum coordinate pair (k, k + 1) of every stripe (in sc: invocation li's two at li and
// ATT_WG + li) and write them to the partial rows. Every invocation calls it (barriers).
fn v_out(lo: vec4<f32>, hi: vec4<f32>, k: u32, li: u32, words: u32, stripes: u32, h0: u32, nh: u32, split: u32) {
    sc[li] = lo;
    sc[ATT_WG + li] = hi;
    workgroupBarrier();
    if (li < words) {
        var o = vec4<f32>(0.0);
        var o2 = vec4<f32>(0.0);
        for (var s = 0u; s < stripes; s++) {
            o += sc[s * words + li];
            o2 += sc[ATT_WG + s * words + li];
        }
        for (var g = 0u; g < nh; g++) {
            let r = ((h0 + g) * p.splits + split) * p.row + 4u + 8u * li + k;
            partial[r] = o[g];
            partial[r + 1u] = o2[g];
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(128)
fn attend(ids: TqIds) {
    let t = tq_begin(ids);
    let li = t.li;
    let wg = ids.wid.x + ids.wid.y * ids.nwg.x;
    if (wg >= p.kv_heads * p.quads * p.splits) {
        return;  // whole workgroup
    }
    let split = wg % p.splits;
    let kvh = wg / p.splits / p.quads;
    let quad = (wg / p.splits) % p.quads;
    let h0 = kvh * p.group + quad * 4u;
    let nh = min(4u, p.group - quad * 4u);

    if (li < 16u) {
        lut[li] = TQ_CENTROIDS[li];
    }
    for (var i = li; i < p.d; i += ATT_WG) {
        var v = vec4<f32>(0.0);
        for (var g = 0u; g < nh; g++) {
            v[g] = qrot[(h0 + g) * p.d + i];
        }
        qv[i] = v;
    }
    let t0 = split * p.split_len;
    let n = min(p.split_len, p.count - t0);
    let head = kvh * p.capacity;
    let first = (p.lo + t0) % p.capacity;
    workgroupBarrier();

    // K phase: invocation li scores keys j = li and j + h (h = ceil(n / 2)).
    let h = (n + 1u) / 2u;
    var mloc = vec4<f32>(-3.0e38);
    for (var j = li; j < h; j += ATT_WG) {
        let j2 = j + h;
        let has2 = j2 < n;
        let cv = slot(head, first, j);
        let cv2 = select(cv, slot(head, first, j2), has2);
        let a = key_dots(cv, cv2);
        let s = a.a * (p.kscale * knorms[cv]);
        sc[j] = s;
        mloc = max(mloc, s);
        if (has2) {
            let s2 = a.b * (p.kscale * knorms[cv2]);
            sc[j2] = s2;
            mloc = max(mloc, s2);
        }
    }
    let m = tq_reduce4(mloc, t, true);

    // Softmax weights (the reduction's barriers make sc visible).
    var lloc = vec4<f32>(0.0);
    for (var j = li; j < n; j += ATT_WG) {
        let e = exp(sc[j] - m);
        lloc += e;
        sc[j] = e * (p.vscale * vnorms[slot(head, first, j)]);
    }
    let l = tq_reduce4(lloc, t, false);

    // V phase: four keys per step, so four code loads are in flight.
    let words = p.d / 8u;
    let st = ATT_WG / words;  // stripes
    let w = li % words;
    let z = vec4<f32>(0.0);
    var acc = VAcc(z, z, z, z, z, z, z, z);
    var j = li / words;
    for (; j + 3u * st < n; j += 4u * st) {
        let w0 = vcodes[slot(head, first, j) * words + w];
        let w1 = vcodes[slot(head, first, j + st) * words + w];
        let w2 = vcodes[slot(head, first, j + 2u * st) * words + w];
        let w3 = vcodes[slot(head, first, j + 3u * st) * words + w];
        acc = v_fold(v_fold(acc, w0, sc[j]), w1, sc[j + st]);
        acc = v_fold(v_fold(acc, w2, sc[j + 2u * st]), w3, sc[j + 3u * st]);
    }
    for (; j < n; j += st) {
        acc = v_fold(acc, vcodes[slot(head, first, j) * words + w], sc[j]);
    }
    workgroupBarrier();
    v_out(acc.c0, acc.c1, 0u, li, words, st, h0, nh, split);
    v_out(acc.c2, acc.c3, 2u, li, words, st, h0, nh, split);
    v_out(acc.c4, acc.c5, 4u, li, words, st, h0, nh, split);
    v_out(acc.c6, acc.c7, 6u, li, words, st, h0, nh, split);
    if (li < nh) {
        let r = ((h0 + li) * p.splits + split) * p.row;
        partial[r] = m[li];
        partial[r + 1u] = l[li];
    }
}
