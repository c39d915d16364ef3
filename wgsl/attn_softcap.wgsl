// Logit soft-capping of attention scores, in the kernels' log2 domain: with s = score * log2(e)
// and c = cap * log2(e), cap * tanh(score / cap) * log2(e) = c * tanh(s / c). c = 0: off (the
// score unchanged). Applied to the scaled score before masking and the softmax. tanh's argument
// is clamped to +-15 (tanh(15) is 1 in f32): some drivers compute tanh from exponentials that
// overflow to inf / inf for large arguments.

fn softcap(s: f32, c: f32) -> f32 {
    if (c > 0.0) {
        return c * tanh(clamp(s / c, -15.0, 15.0));
    }
    return s;
}

fn softcap4(s: vec4<f32>, c: f32) -> vec4<f32> {
    if (c > 0.0) {
        return c * tanh(clamp(s / c, vec4<f32>(-15.0), vec4<f32>(15.0)));
    }
    return s;
}
