// Binary elementwise operations shared by elementwise_binary.wgsl (y = op(a, b)) and
// elementwise_inplace.wgsl (a = op(a, b)). OP 0: a + b (residual add); OP 1: silu(a) * b
// (SwiGLU gate, silu(a) = a / (1 + exp(-a))). The element type T (f32, or vec4<f32> when the
// length is a multiple of 4; then `len` counts vectors) comes from an `alias T = ...;` line the
// host puts first. One T per invocation, 2-D grid of 256-wide workgroups, ids >= len ignored.

struct Params {
    len: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

override OP: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;

fn op(a: T, b: T) -> T {
    if (OP == 1u) {
        return a / (1.0 + exp(-a)) * b;
    }
    return a + b;
}

fn elem_index(wid: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + li;
}
