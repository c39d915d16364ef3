// Decode attention straight over TurboQuant K and V caches, split-K pass. Included after
// tq_portable.wgsl or tq_subgroup.wgsl and the generated codebook constants.
//
// In the rotated domain a cached vector is y = c * norm / sqrt(d) (c: centroids of its codes),
// and q . k ~= q' . y_k with q' = H D_K q / sqrt(d) (H: unnormalised Walsh-Hadamard). So
//   score_j = scale * norm_j / d * sum_i (H D_K q)_i c_ji,
//   o       = D_V H (sum_j p_j * norm_j / d * c_j)         (unnormalised, per split).
// Each workgroup rotates its own queries (H D_K q) and rotates its split's output back
// (D_V H o'), so the split pass needs no rotate dispatch before it and the merge pass is a plain
// log-sum-exp combination.
//
// One workgroup of 128 per (kv head, quad of up to 4 query heads sharing it (GQA), split of
// up to 512 visible positions). The quad's 4 queries sit side by side in a vec4 per coordinate,
// so every code is decoded once for all of them. Positions are logical: the split covers
// positions lo + split * split_len + t, read from slot pos % capacity, so a ring buffer is
// masked by logical position, never by slot.
//   rotate:  q with K's signs into sh[0..d], transformed in place (`wht`).
//   K phase: one invocation per four keys (two on splits of at most 256 positions), sharing
//            each q' load; q' (vec4 per coordinate) and the 16 centroids in workgroup memory;
//            scores kept in workgroup memory (sh[512..]). The norms and the first code words
//            (K and V) are loaded before the rotation, the next K words before the current
//            ones' arithmetic.
//   softmax: max over the split, p = exp(s - max); p pre-multiplied by the V norm. The sum of
//            the p's is staged and read at the end (no reduction barrier of its own).
//   V phase: invocation (w, stripe) owns code word w (8 coordinates) and every stripe-th key,
//            eight keys a step, the code words of three steps ahead loaded before this step's
//            arithmetic (the first eight before the rotation, the next sixteen before the
//            max reduction): 24 words in flight per invocation.
//   output:  the stripes summed in workgroup memory, transformed back (`wht`), V's signs.
// Output row per (head, split): [max, sum, 0, 0, o[d]] (unnormalised, in the original domain).

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
    kscale: f32,     // softmax scale / d
    vscale: f32,     // 1 / d
    row: u32,        // floats per partial row (d + 4)
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

const ATT_WG: u32 = 128u;
// Placed before this file (turboquant::Footprint): SPLIT_MAX, positions per split at most; SH,
// vec4s of `sh`; STRIPE_ROUNDS, how many rounds the V stripes' sums take through `sh` (stripes *
// d = 1024 vec4s in all). The full plan (512, 1024, 1) takes 20.1 KiB of workgroup memory, the
// compact one (128, 640, 2) 12.6 KiB, inside WebGPU's default 16 KiB. SH >= SC + SPLIT_MAX and
// SH * STRIPE_ROUNDS >= 1024.
// Scores and softmax weights live at sh[SC + j].
const SC: u32 = 512u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kcodes: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> knorms: array<f32>;
@group(0) @binding(4) var<storage, read> vcodes: array<u32>;
@group(0) @binding(5) var<storage, read> vnorms: array<f32>;
@group(0) @binding(6) var<storage, read_write> partial: array<f32>;
// Sign masks of the K and V caches: coordinate i is negated when bit i % 32 of word i / 32 is set.
@group(0) @binding(7) var<storage, read> ksigns: array<u32>;
@group(0) @binding(8) var<storage, read> vsigns: array<u32>;

// sh[0..d]: the rotated queries (K phase), the output vector (end); sh[SC..SC + n]: scores, then
// softmax weights; sh[0..1024 / STRIPE_ROUNDS]: the V stripes' sums.
var<workgroup> sh: array<vec4<f32>, SH>;
var<workgroup> vn: array<f32, SPLIT_MAX>;
var<workgroup> lut: array<f32, 16>;

fn ksign(i: u32) -> bool {
    return ((ksigns[i / 32u] >> (i % 32u)) & 1u) != 0u;
}

fn vsign(i: u32) -> bool {
    return ((vsigns[i / 32u] >> (i % 32u)) & 1u) != 0u;
}

// Unnormalised Walsh-Hadamard transform of sh[0..d] (each vec4 lane a separate vector): the three
// low index bits in registers (8 consecutive coordinates per invocation), the others in place in
// workgroup memory, one barrier per bit. Every invocation must call it; it begins and ends with a
// barrier, so sh[0..d] written before is transformed after.
fn wht(li: u32) {
    workgroupBarrier();
    if (li < p.d / 8u) {
        let b = li * 8u;
        let x0 = sh[b] + sh[b + 1u];
        let x1 = sh[b] - sh[b + 1u];
        let x2 = sh[b + 2u] + sh[b + 3u];
        let x3 = sh[b + 2u] - sh[b + 3u];
        let x4 = sh[b + 4u] + sh[b + 5u];
        let x5 = sh[b + 4u] - sh[b + 5u];
        let x6 = sh[b + 6u] + sh[b + 7u];
        let x7 = sh[b + 6u] - sh[b + 7u];
        let y0 = x0 + x2;
        let y1 = x1 + x3;
        let y2 = x0 - x2;
        let y3 = x1 - x3;
        let y4 = x4 + x6;
        let y5 = x5 + x7;
        let y6 = x4 - x6;
        let y7 = x5 - x7;
        sh[b] = y0 + y4;
        sh[b + 1u] = y1 + y5;
        sh[b + 2u] = y2 + y6;
        sh[b + 3u] = y3 + y7;
        sh[b + 4u] = y0 - y4;
        sh[b + 5u] = y1 - y5;
        sh[b + 6u] = y2 - y6;
        sh[b + 7u] = y3 - y7;
    }
    for (var m = 8u; m < p.d; m <<= 1u) {
        workgroupBarrier();
        for (var t = li; t < p.d / 2u; t += ATT_WG) {
            let lo = t & (m - 1u);
            let i = ((t - lo) << 1u) | lo;
            let a = sh[i];
            let b = sh[i + m];
            sh[i] = a + b;
            sh[i + m] = a - b;
        }
    }
    workgroupBarrier();
}

// Scores of two keys (vec4 over the quad's heads) from their code vectors cv and cv2, whose
// first code words f0, f1 the caller loaded: every q' load from workgroup memory serves both,
// and the next words are loaded before the current ones' arithmetic. (Results and accumulators are named values, not
// arrays: an array indexed in a loop may be placed in local memory.)
struct KeyPair {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn key_dots(cv: u32, cv2: u32, f0: vec4<u32>, f1: vec4<u32>) -> KeyPair {
    let w4 = p.d / 32u;
    var a = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var w = f0;
    var w2 = f1;
    for (var c = 0u; c < w4; c++) {
        let cn = min(c + 1u, w4 - 1u);
        let n0 = kcodes[cv * w4 + cn];
        let n1 = kcodes[cv2 * w4 + cn];
        for (var e = 0u; e < 4u; e++) {
            let x = w[e];
            let y = w2[e];
            let i0 = c * 32u + e * 8u;
            for (var k = 0u; k < 8u; k++) {
                let qk = sh[i0 + k];
                a += lut[(x >> (4u * k)) & 15u] * qk;
                a2 += lut[(y >> (4u * k)) & 15u] * qk;
            }
        }
        w = n0;
        w2 = n1;
    }
    return KeyPair(a, a2);
}

// Scores of four keys from their code vectors cv, as key_dots.
struct KeyQuad {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
}

fn key_dots4(cv: vec4<u32>, f0: vec4<u32>, f1: vec4<u32>, f2: vec4<u32>, f3: vec4<u32>) -> KeyQuad {
    let w4 = p.d / 32u;
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    var c = vec4<f32>(0.0);
    var d = vec4<f32>(0.0);
    var w0 = f0;
    var w1 = f1;
    var w2 = f2;
    var w3 = f3;
    for (var u = 0u; u < w4; u++) {
        let un = min(u + 1u, w4 - 1u);
        let n0 = kcodes[cv.x * w4 + un];
        let n1 = kcodes[cv.y * w4 + un];
        let n2 = kcodes[cv.z * w4 + un];
        let n3 = kcodes[cv.w * w4 + un];
        for (var e = 0u; e < 4u; e++) {
            let x0 = w0[e];
            let x1 = w1[e];
            let x2 = w2[e];
            let x3 = w3[e];
            let i0 = u * 32u + e * 8u;
            for (var k = 0u; k < 8u; k++) {
                let qk = sh[i0 + k];
                a += lut[(x0 >> (4u * k)) & 15u] * qk;
                b += lut[(x1 >> (4u * k)) & 15u] * qk;
                c += lut[(x2 >> (4u * k)) & 15u] * qk;
                d += lut[(x3 >> (4u * k)) & 15u] * qk;
            }
        }
        w0 = n0;
        w1 = n1;
        w2 = n2;
        w3 = n3;
    }
    return KeyQuad(a, b, c, d);
}

// Store key j's score (dot * kscale * K norm) and scaled V norm; returns the score.
fn keep(j: u32, dot: vec4<f32>, kn: f32, vnj: f32) -> vec4<f32> {
    let s = dot * (p.kscale * kn);
    sh[SC + j] = s;
    vn[j] = p.vscale * vnj;
    return s;
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

// The V phase's keys of one invocation: j = s0 + st * k for k = 0, 1, .. while j < n.
struct VKeys {
    head: u32,
    first: u32,
    n: u32,
    s0: u32,
    st: u32,
    words: u32,
    w: u32,
}

// Code word of the invocation's k-th key (past the split's end: its last key, which `v_weight`
// gives weight 0).
fn v_word(v: VKeys, k: u32) -> u32 {
    let j = min(v.s0 + v.st * k, v.n - 1u);
    return vcodes[slot(v.head, v.first, j) * v.words + v.w];
}

fn v_weight(v: VKeys, k: u32) -> vec4<f32> {
    let j = v.s0 + v.st * k;
    return select(vec4<f32>(0.0), sh[SC + min(j, SPLIT_MAX - 1u)], j < v.n);
}

@compute @workgroup_size(128)
fn attend(g: TqGroup, ids: TqIds) {
    let t = tq_lanes(g, ids);
    let li = t.li;
    let wg = tq_wg(g);  // not t.wg: TqLanes is not uniform as a whole
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
    let t0 = split * p.split_len;
    let n = min(p.split_len, p.count - t0);
    let head = kvh * p.capacity;
    let first = (p.lo + t0) % p.capacity;

    // K phase plan: invocation li scores keys jk = li + t * h for t < 4, h = ceil(n / 4) (every
    // q' load serves four keys) where the split has more than 2 * ATT_WG positions, else for
    // t < 2, h = ceil(n / 2) (more invocations busy on short splits). Its norms and first code
    // words are loaded before the queries are rotated.
    let quadk = n > 2u * ATT_WG;
    let h = select((n + 1u) / 2u, (n + 3u) / 4u, quadk);
    let jk = vec4<u32>(li, li + h, li + 2u * h, li + 3u * h);
    let live = (jk < vec4<u32>(n)) & vec4<bool>(li < h, true, quadk, quadk);
    let w4 = p.d / 32u;
    var cv = vec4<u32>(0u);
    var kn = vec4<f32>(0.0);
    var vv = vec4<f32>(0.0);
    var f0 = vec4<u32>(0u);
    var f1 = vec4<u32>(0u);
    var f2 = vec4<u32>(0u);
    var f3 = vec4<u32>(0u);
    if (live.x) {
        let c0 = slot(head, first, jk.x);
        cv = vec4<u32>(c0, select(c0, slot(head, first, jk.y), live.y), select(c0, slot(head, first, jk.z), live.z), select(c0, slot(head, first, jk.w), live.w));
        kn = vec4<f32>(knorms[cv.x], knorms[cv.y], knorms[cv.z], knorms[cv.w]);
        vv = vec4<f32>(vnorms[cv.x], vnorms[cv.y], vnorms[cv.z], vnorms[cv.w]);
        f0 = kcodes[cv.x * w4];
        f1 = kcodes[cv.y * w4];
        if (quadk) {
            f2 = kcodes[cv.z * w4];
            f3 = kcodes[cv.w * w4];
        }
    }
    // The V phase's first eight code words.
    let words = p.d / 8u;
    let vk = VKeys(head, first, n, li / words, ATT_WG / words, words, li % words);
    var w0 = v_word(vk, 0u);
    var w1 = v_word(vk, 1u);
    var w2 = v_word(vk, 2u);
    var w3 = v_word(vk, 3u);
    var w4v = v_word(vk, 4u);
    var w5 = v_word(vk, 5u);
    var w6 = v_word(vk, 6u);
    var w7 = v_word(vk, 7u);

    for (var i = li; i < p.d; i += ATT_WG) {
        var v = vec4<f32>(0.0);
        for (var g = 0u; g < nh; g++) {
            v[g] = q[(h0 + g) * p.d + i];
        }
        sh[i] = select(v, -v, ksign(i));
    }
    wht(li);  // sh[0..d] = H D_K q (the 1 / sqrt(d) is in kscale)

    // K phase.
    var mloc = vec4<f32>(-3.0e38);
    if (live.x) {
        if (quadk) {
            let a = key_dots4(cv, f0, f1, f2, f3);
            mloc = keep(jk.x, a.a, kn.x, vv.x);
            if (live.y) {
                mloc = max(mloc, keep(jk.y, a.b, kn.y, vv.y));
            }
            if (live.z) {
                mloc = max(mloc, keep(jk.z, a.c, kn.z, vv.z));
            }
            if (live.w) {
                mloc = max(mloc, keep(jk.w, a.d, kn.w, vv.w));
            }
        } else {
            let a = key_dots(cv.x, cv.y, f0, f1);
            mloc = keep(jk.x, a.a, kn.x, vv.x);
            if (live.y) {
                mloc = max(mloc, keep(jk.y, a.b, kn.y, vv.y));
            }
        }
    }
    // The V phase's next sixteen code words, in flight through the reduction and the softmax.
    var x0 = v_word(vk, 8u);
    var x1 = v_word(vk, 9u);
    var x2 = v_word(vk, 10u);
    var x3 = v_word(vk, 11u);
    var x4 = v_word(vk, 12u);
    var x5 = v_word(vk, 13u);
    var x6 = v_word(vk, 14u);
    var x7 = v_word(vk, 15u);
    var y0 = v_word(vk, 16u);
    var y1 = v_word(vk, 17u);
    var y2 = v_word(vk, 18u);
    var y3 = v_word(vk, 19u);
    var y4 = v_word(vk, 20u);
    var y5 = v_word(vk, 21u);
    var y6 = v_word(vk, 22u);
    var y7 = v_word(vk, 23u);
    let m = tq_reduce4(mloc, t, true);

    // Softmax weights (the reduction's barriers make the scores and vn visible). Their sum is
    // staged and read at the end (after the stripes' barriers); one barrier makes the weights
    // visible to the V phase.
    var lloc = vec4<f32>(0.0);
    for (var j = li; j < n; j += ATT_WG) {
        let e = exp(sh[SC + j] - m);
        lloc += e;
        sh[SC + j] = e * vn[j];
    }
    tq_stage_sum4(lloc, t);
    workgroupBarrier();

    // V phase: eight keys a step; the words of the step three ahead are loaded before this
    // step's arithmetic.
    let z = vec4<f32>(0.0);
    var acc = VAcc(z, z, z, z, z, z, z, z);
    let keys = select(0u, (n - vk.s0 + vk.st - 1u) / vk.st, vk.s0 < n);
    for (var k = 0u; k < keys; k += 8u) {
        let n0 = v_word(vk, k + 24u);
        let n1 = v_word(vk, k + 25u);
        let n2 = v_word(vk, k + 26u);
        let n3 = v_word(vk, k + 27u);
        let n4 = v_word(vk, k + 28u);
        let n5 = v_word(vk, k + 29u);
        let n6 = v_word(vk, k + 30u);
        let n7 = v_word(vk, k + 31u);
        acc = v_fold(v_fold(acc, w0, v_weight(vk, k)), w1, v_weight(vk, k + 1u));
        acc = v_fold(v_fold(acc, w2, v_weight(vk, k + 2u)), w3, v_weight(vk, k + 3u));
        acc = v_fold(v_fold(acc, w4v, v_weight(vk, k + 4u)), w5, v_weight(vk, k + 5u));
        acc = v_fold(v_fold(acc, w6, v_weight(vk, k + 6u)), w7, v_weight(vk, k + 7u));
        w0 = x0;
        w1 = x1;
        w2 = x2;
        w3 = x3;
        w4v = x4;
        w5 = x5;
        w6 = x6;
        w7 = x7;
        x0 = y0;
        y0 = n0;
        x1 = y1;
        y1 = n1;
        x2 = y2;
        y2 = n2;
        x3 = y3;
        y3 = n3;
        x4 = y4;
        y4 = n4;
        x5 = y5;
        y5 = n5;
        x6 = y6;
        y6 = n6;
        x7 = y7;
        y7 = n7;
    }

    // Sum the stripes: invocation li's 8 coordinates at sh[(stripe % per) * d + 8 w + k] (per =
    // stripes per round; the first round's stripes store, the later ones add to the same entries),
    // then each coordinate's owner sums them into sh[coordinate] (only it reads or writes that
    // coordinate's entries).
    let per = vk.st / STRIPE_ROUNDS;
    let b = (vk.s0 % per) * p.d + 8u * vk.w;
    workgroupBarrier();
    if (vk.s0 < per) {
        sh[b] = acc.c0;
        sh[b + 1u] = acc.c1;
        sh[b + 2u] = acc.c2;
        sh[b + 3u] = acc.c3;
        sh[b + 4u] = acc.c4;
        sh[b + 5u] = acc.c5;
        sh[b + 6u] = acc.c6;
        sh[b + 7u] = acc.c7;
    }
    for (var r = 1u; r < STRIPE_ROUNDS; r++) {
        workgroupBarrier();
        if (vk.s0 / per == r) {
            sh[b] += acc.c0;
            sh[b + 1u] += acc.c1;
            sh[b + 2u] += acc.c2;
            sh[b + 3u] += acc.c3;
            sh[b + 4u] += acc.c4;
            sh[b + 5u] += acc.c5;
            sh[b + 6u] += acc.c6;
            sh[b + 7u] += acc.c7;
        }
    }
    workgroupBarrier();
    for (var i = li; i < p.d; i += ATT_WG) {
        var o = sh[i];
        for (var s = 1u; s < per; s++) {
            o += sh[s * p.d + i];
        }
        sh[i] = o;
    }
    wht(li);  // sh[0..d] = H o'
    for (var i = li; i < p.d; i += ATT_WG) {
        let v = sh[i];
        let o = select(v, -v, vsign(i));
        for (var g = 0u; g < nh; g++) {
            partial[((h0 + g) * p.splits + split) * p.row + 4u + i] = o[g];
        }
    }
    if (li < nh) {
        let l = tq_staged_sum4(t);
        let r = ((h0 + li) * p.splits + split) * p.row;
        partial[r] = m[li];
        partial[r + 1u] = l[li];
    }
}
