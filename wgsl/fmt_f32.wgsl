// F32 format part (contract: src/formats/mod.rs). Row = k f32 words; item = one vec4 (4 weights).

struct FmtRow {
    w: vec4<f32>,
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    return FmtRow(bitcast<vec4<f32>>(wq[base + item]));
}

struct FmtX {
    v: vec4<f32>,
}

fn fmt_x(item: u32) -> FmtX {
    return FmtX(mm_x4(item));
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    return dot(w.w, x.v);
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(wq[base + c4]);
}
