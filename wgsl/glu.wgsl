// The gate of a gated linear unit, shared by the elementwise gates (elementwise_ops.wgsl), the
// GEMV epilogue (mm_gemv_acc.wgsl) and the prefill's (gate, up) pairs (model_glu_pairs.wgsl). The
// element type T (f32, or vec4<f32>) comes from an `alias T = ...;` line the host puts first.
//
// glu_act(g, false) = silu(g) = g / (1 + exp(-g)) (SwiGLU); glu_act(g, true) = GELU's tanh
// approximation g / 2 * (1 + tanh(u)), u = sqrt(2 / pi) * (g + 0.044715 g^3), computed as the
// equal g / (1 + exp(-2 u)), which does not cancel where tanh(u) is near -1 (GeGLU). Both are
// g / (1 + exp(e)), evaluated without an infinity on the way: with t = exp(-|e|) in (0, 1], it is
// g / (1 + t) for e <= 0 and g t / (1 + t) for e > 0, where exp(e) would overflow (fast-math
// division, Metal's default, may turn g / inf into NaN).
fn glu_act(g: T, gelu: bool) -> T {
    let e = select(-g, -1.5957691216057308 * (g + 0.044715 * g * g * g), gelu);
    let t = exp(-abs(e));
    return select(g, g * t, e > T(0.0)) / (1.0 + t);
}
