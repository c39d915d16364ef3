// The GEMVs' accumulator hooks of the row driver (mm_rows.wgsl): one vec4<f32> per lane
// (component r = row r of the block), the items' activations loaded once for the ROWS rows, and
// the epilogue. The activation file (mm_gemv.wgsl, mm_gemv_q8.wgsl + mm_items.wgsl, or
// mm_gemv_qk.wgsl) supplies the driver's hooks and, for this file, mm_item_x(item) (the
// activations of an item).

alias MmAcc = vec4<f32>;

fn mm_acc_zero() -> vec4<f32> {
    return vec4<f32>(0.0);
}

fn mm_acc_add(acc: ptr<function, vec4<f32>>, sl: MmSlab, i: u32) {
    *acc += mm_slab_dot(sl, mm_item_x(i));
}

fn mm_finish(acc: vec4<f32>, r0: u32, write: bool) {
    let tot = team_sum(acc);
    if (write) {
        mm_store(r0, tot);
    }
}

// The epilogue: EPI 0 stores y[y_off + r] = dot; EPI 1 accumulates y[y_off + r] += dot (a
// residual add); EPI 2 reads rows in (gate, up) pairs (row 2i = gate i, row 2i + 1 = up i; ROWS
// even, y_off even) and stores y[(y_off + 2i) / 2] = silu(gate) * up; EPI 3 as EPI 2 with
// gelu_tanh(gate) * up (glu.wgsl).
override EPI: u32 = 0u;

fn mm_put(o: u32, v: f32) {
    if (EPI == 1u) {
        y[o] += v;
    } else {
        y[o] = v;
    }
}

// The gated unit of a (gate, up) pair (glu.wgsl, composed after this file, with T = f32).
fn mm_glu(g: f32, u: f32) -> f32 {
    return glu_act(g, EPI == 3u) * u;
}

fn mm_store(r0: u32, tot: vec4<f32>) {
    let o = p.y_off + r0;
    if (EPI >= 2u) {
        y[o / 2u] = mm_glu(tot.x, tot.y);
        if (ROWS > 3u && r0 + 2u < p.n) {
            y[o / 2u + 1u] = mm_glu(tot.z, tot.w);
        }
        return;
    }
    mm_put(o, tot.x);
    if (ROWS > 1u && r0 + 1u < p.n) {
        mm_put(o + 1u, tot.y);
    }
    if (ROWS > 2u && r0 + 2u < p.n) {
        mm_put(o + 2u, tot.z);
    }
    if (ROWS > 3u && r0 + 3u < p.n) {
        mm_put(o + 3u, tot.w);
    }
}
