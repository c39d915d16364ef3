// Elementwise operations shared by elementwise_binary.wgsl (y = op(a, b)), elementwise_inplace.wgsl
// (a = op(a, b)) and elementwise_unary.wgsl (a = unary(a)).
// OP 0: a + b (residual add); OP 1: silu(a) * b (SwiGLU gate); OP 2: gelu_tanh(a) * b (GeGLU
// gate with the tanh approximation): glu.wgsl's glu_act, composed after this file;
// unary, OP 0: the logit soft-cap c * tanh(a / c), c = p.scalar > 0; OP 1: a * p.scalar.
// The element type T (f32, or vec4<f32> when the length is a multiple of 4; then `len` counts
// vectors) comes from an `alias T = ...;` line the host puts first. One T per invocation, 2-D grid
// of 256-wide workgroups, ids >= len ignored.

struct Params {
    len: u32,
    scalar: f32,
    _p1: u32,
    _p2: u32,
}

override OP: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;

// tanh, accurate relative to its value: drivers' tanh is accurate to a few ulp of 1 (absolute)
// near 0 (lavapipe's, computed from exponentials, is 1e-4 off relative at |x| ~ 1e-3), so below
// |x| = 1/16 the series x - x^3 / 3 + 2 x^5 / 15 (relative error under 4e-9 there); above it the
// builtin, its argument clamped to +-15 (tanh(15) is 1 in f32) because some drivers compute it
// from exponentials that overflow to inf / inf.
fn tanh_accurate(x: T) -> T {
    let x2 = x * x;
    let series = x * (1.0 - x2 * (0.3333333333333333 - x2 * 0.13333333333333333));
    return select(tanh(clamp(x, T(-15.0), T(15.0))), series, abs(x) < T(0.0625));
}

fn op(a: T, b: T) -> T {
    if (OP == 1u) {
        return glu_act(a, false) * b;
    }
    if (OP == 2u) {
        return glu_act(a, true) * b;
    }
    return a + b;
}

fn unary(a: T) -> T {
    if (OP == 1u) {
        return a * p.scalar;
    }
    return p.scalar * tanh_accurate(a / p.scalar);
}

fn elem_index(wid: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + li;
}
