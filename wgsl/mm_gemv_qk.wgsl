// Weight-matrix GEMV (m = 1) on int8 activations in quad order (the q8 quantiser's Q4_K-order
// records, see MmQx in mm_common.wgsl), for formats whose part defines fmt_qdot: the format
// multiplies its integer codes with the activation codes directly (dot4I8Packed: DP4A on
// devices with integer dot products, a polyfill elsewhere). Items are quads (64 columns; the
// host passes p.items = k / 64), loaded by the part's fmt_qload.
// Prepended/appended as mm_gemv.wgsl.

@group(0) @binding(2) var<storage, read> xk: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn mm_x4(c4: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

// Records t = 0..7 of quad qd lie at t * quads + qd (struct of arrays: lanes on consecutive
// quads load consecutive 16-byte records).
fn mm_item_x(qd: u32) -> MmQx {
    let q = p.items;
    return MmQx(xk[qd], xk[q + qd], xk[2u * q + qd], xk[3u * q + qd],
                bitcast<vec4<f32>>(xk[4u * q + qd]), bitcast<vec4<f32>>(xk[5u * q + qd]),
                bitcast<vec4<f32>>(xk[6u * q + qd]), bitcast<vec4<f32>>(xk[7u * q + qd]));
}

alias MmRow = FmtQRow;
alias MmX = MmQx;

fn mm_item_load(base: u32, qd: u32) -> FmtQRow {
    return fmt_qload(base, qd);
}

fn mm_item_dot(r: FmtQRow, xs: MmQx) -> f32 {
    return fmt_qdot(r, xs);
}
