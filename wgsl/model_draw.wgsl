// draw: tok[0] = a token drawn from the candidates of a top-k (the output of model_top_k.wgsl:
// p.k (logit bits, id) word pairs in rank order, the largest logit first, empty slots with id
// 0xffffffff only after the filled ones), as model::sample::Sampler draws from them:
//   weights w_i = exp((logit_i - logit_0) / p.temperature) over the n filled slots;
//   top-p: keep the first `keep` of them, the fewest whose sum reaches p.top_p of the total
//          (all n when p.top_p >= 1);
//   the draw: the first i < keep whose running sum exceeds p.r * (the sum of the kept weights),
//          the last kept one if none does (p.r in [0, 1)).
// No filled slot gives 0xffffffff. One workgroup of 256 (p.k <= 256): each invocation weighs one
// slot, an inclusive scan in workgroup memory gives the running sums, and invocation 0 finds
// `keep` and the drawn slot by binary search over them (they never decrease).

struct Params {
    k: u32,
    temperature: f32,
    top_p: f32,
    r: f32,
}

const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cand: array<u32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;

var<workgroup> sums: array<f32, 256>;

// The first i < hi with sums[i] >= x (or > x where `strict`); hi where there is none.
fn first_reaching(hi: u32, x: f32, strict: bool) -> u32 {
    var lo = 0u;
    var end = hi;
    while (lo < end) {
        let mid = (lo + end) / 2u;
        let s = sums[mid];
        if (s > x || (!strict && s == x)) {
            end = mid;
        } else {
            lo = mid + 1u;
        }
    }
    return lo;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
    var w = 0.0;
    if (li < p.k && cand[2u * li + 1u] != NONE) {
        w = exp((bitcast<f32>(cand[2u * li]) - bitcast<f32>(cand[0])) / p.temperature);
    }
    sums[li] = w;
    workgroupBarrier();
    for (var s = 1u; s < 256u; s <<= 1u) {
        var add = 0.0;
        if (li >= s) {
            add = sums[li - s];
        }
        workgroupBarrier();
        sums[li] += add;
        workgroupBarrier();
    }
    if (li != 0u) {
        return;
    }
    // The filled slots: a prefix of the p.k.
    var lo = 0u;
    var end = p.k;
    while (lo < end) {
        let mid = (lo + end) / 2u;
        if (cand[2u * mid + 1u] == NONE) {
            end = mid;
        } else {
            lo = mid + 1u;
        }
    }
    let n = lo;
    if (n == 0u) {
        tok[0] = NONE;
        return;
    }
    var keep = n;
    if (p.top_p < 1.0) {
        keep = min(first_reaching(n, p.top_p * sums[n - 1u], false) + 1u, n);
    }
    let i = min(first_reaching(keep, p.r * sums[keep - 1u], true), keep - 1u);
    tok[0] = cand[2u * i + 1u];
}
