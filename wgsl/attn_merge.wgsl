// Split-K decode attention, merge pass: per query head, combine the chunks' partial results
// (o_c not normalised, running max m_c and sum l_c in the log2 domain) by log-sum-exp:
// M = max m_c, L = sum l_c 2^(m_c - M), out = sum o_c 2^(m_c - M) / L.
// One workgroup per head. The chunk weights 2^(m_c - M) go to workgroup memory; then R = WG / d
// rows of d invocations each sum every R-th chunk (U loads in flight per invocation) and the
// rows are added in workgroup memory.

struct Params {
    heads: u32,
    nchunks: u32,
    d: u32,
    _p: u32,
}

const WG: u32 = 256u;
const MAX_CHUNKS: u32 = 256u;
// Chunks summed per round: loads in flight per invocation (1..8). The partials are L2 hits just
// written by the split pass, so the rounds' latency, not bandwidth, bounds this loop.
override U: u32 = 8u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part_o: array<f32>;
@group(0) @binding(2) var<storage, read> part_ml: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> w: array<f32, MAX_CHUNKS>;
var<workgroup> red: array<f32, WG>;

// Max (op 0) or sum (op 1) of red[0..WG]; every invocation gets the result.
fn reduce(li: u32, op: u32) -> f32 {
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            let a = red[li];
            let b = red[li + s];
            red[li] = select(a + b, max(a, b), op == 0u);
        }
    }
    workgroupBarrier();
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let h = wid.x + wid.y * nwg.x;
    if (h >= p.heads) {
        return;
    }
    let n = p.nchunks;
    let s0 = h * n;
    var mx = -3.0e38;
    for (var c = li; c < n; c += WG) {
        mx = max(mx, part_ml[s0 + c].x);
    }
    red[li] = mx;
    let m = reduce(li, 0u);
    var l = 0.0;
    for (var c = li; c < n; c += WG) {
        let ml = part_ml[s0 + c];
        let wc = exp2(ml.x - m);
        w[c] = wc;
        l += ml.y * wc;
    }
    red[li] = l;
    let inv_l = 1.0 / reduce(li, 1u);  // the barriers in reduce also publish w

    let rows = WG / p.d;           // d <= 256 <= WG
    let r = li / p.d;
    let e = li - r * p.d;
    var o = 0.0;
    if (r < rows) {
        var acc: array<f32, 8>;
        for (var u = 0u; u < U; u++) {
            acc[u] = 0.0;
        }
        var c = r;
        for (; c + (U - 1u) * rows < n; c += U * rows) {
            for (var u = 0u; u < U; u++) {
                acc[u] += part_o[(s0 + c + u * rows) * p.d + e] * w[c + u * rows];
            }
        }
        for (; c < n; c += rows) {
            acc[0] += part_o[(s0 + c) * p.d + e] * w[c];
        }
        for (var u = 0u; u < U; u++) {
            o += acc[u];
        }
    }
    red[li] = o;
    workgroupBarrier();
    if (li < p.d) {
        var sum = 0.0;
        for (var k = 0u; k < rows; k++) {
            sum += red[k * p.d + li];
        }
        out[h * p.d + li] = sum * inv_l;
    }
}
