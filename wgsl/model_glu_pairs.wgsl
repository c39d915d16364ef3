// glu_pairs: out[i] = act(gu[2i]) * gu[2i + 1] for i < p.a (a GEMM over an interleaved (gate, up)
// matrix leaves each token's pairs side by side). GELU false: act = silu (SwiGLU); true: GELU's
// tanh approximation (GeGLU): glu.wgsl's glu_act, composed after this file with T = f32.

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
        out[i] = glu_act(v.x, GELU) * v.y;
    }
}
