// argmax: tok[0] = the lowest index i < p.b of the largest src[p.a + i] (greedy decoding's token:
// the same choice as model::sample::argmax); NaN never wins; no candidate (p.b = 0 or all NaN)
// gives 0xffffffff. One workgroup of 256: each invocation scans a stride of the row in
// increasing index order keeping its first maximum, then a tree over the 256 candidates.

struct Params {
    a: u32,
    b: u32,
    _p0: u32,
    _p1: u32,
}

const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;

var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

// Whether candidate (v2, i2) beats (v1, i1): a real candidate beats none; a larger value wins;
// equal values go to the lower index.
fn beats(v1: f32, i1: u32, v2: f32, i2: u32) -> bool {
    if (i2 == NONE) {
        return false;
    }
    if (i1 == NONE) {
        return true;
    }
    return v2 > v1 || (v2 == v1 && i2 < i1);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
    var v = 0.0;
    var idx = NONE;
    for (var i = li; i < p.b; i += 256u) {
        let x = src[p.a + i];
        // NaN: every exponent bit set and a mantissa. An integer test, not `x == x`, which fast
        // math (Metal compiles with it by default) may fold to true.
        let nan = (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
        if (!nan && (idx == NONE || x > v)) {
            v = x;
            idx = i;
        }
    }
    bv[li] = v;
    bi[li] = idx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (li < s && beats(bv[li], bi[li], bv[li + s], bi[li + s])) {
            bv[li] = bv[li + s];
            bi[li] = bi[li + s];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        tok[0] = bi[0];
    }
}
