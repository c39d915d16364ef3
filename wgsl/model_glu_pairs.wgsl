// glu_pairs: out[i] = act(gu[2i]) * gu[2i + 1] for i < p.a (a GEMM over an interleaved (gate, up)
// matrix leaves each token's pairs side by side). GELU false: act = silu, silu(g) = g / (1 + exp(-g))
// (SwiGLU); true: GELU's tanh approximation g / 2 * (1 + tanh(u)), u = sqrt(2 / pi) * (g + 0.044715 g^3),
// computed as the equal g / (1 + exp(-2u)) (GeGLU; no cancellation where tanh(u) is near -1).

struct Params {
    a: u32,
    b: u32,
    _p0: u32,
    _p1: u32,
}

override GELU: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + li;
    if (i < p.a) {
        let v = gu[i];
        let e = select(-v.x, -1.5957691216057308 * (v.x + 0.044715 * v.x * v.x * v.x), GELU);
        // v.x / (1 + exp(e)) without an infinity on the way: see mm_glu (wgsl/mm_gemv_acc.wgsl).
        let t = exp(-abs(e));
        out[i] = select(v.x, v.x * t, e > 0.0) / (1.0 + t) * v.y;
    }
}
