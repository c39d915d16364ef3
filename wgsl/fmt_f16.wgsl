// F16 format part (contract: src/formats/mod.rs). Row = halves packed two per word (even column
// low), padded with zeros to 8 weights; item = one vec4<u32> (8 weights).

struct FmtRow {
    w: vec4<u32>,
}

fn fmt_load(base: u32, item: u32) -> FmtRow {
    return FmtRow(wq[base + item]);
}

struct FmtX {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn fmt_x(item: u32) -> FmtX {
    return FmtX(mm_x4(2u * item), mm_x4(2u * item + 1u));
}

fn fmt_dot(w: FmtRow, x: FmtX) -> f32 {
    let a = vec4<f32>(mm_f16x2(w.w.x), mm_f16x2(w.w.y));
    let b = vec4<f32>(mm_f16x2(w.w.z), mm_f16x2(w.w.w));
    return dot(a, x.a) + dot(b, x.b);
}

fn fmt_w4(base: u32, c4: u32) -> vec4<f32> {
    let v = wq[base + c4 / 2u];
    let h = select(v.xy, v.zw, (c4 & 1u) == 1u);
    return vec4<f32>(mm_f16x2(h.x), mm_f16x2(h.y));
}
