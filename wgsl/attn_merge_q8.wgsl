// Decode attention's merge pass with the int8 quantisation of its output (the Q8 activations of
// the output projection; spec: src/reference/q8.rs): each workgroup merges its head
// (attn_merge.wgsl's merge_head), then quantises the head's d / 32 blocks (d % 32 == 0, so no
// block straddles two heads) with q8_records.wgsl, writing exactly what q8_quantize.wgsl writes
// for the same columns of the whole [heads * d] output: the head's INT4-order words, and of the
// Q4_K order the components its blocks own. A Q4_K super-block (256 columns) spans several heads
// when d < 256 (and a head may start inside one), and its vec4 records mix sub-blocks, so xk is
// bound as u32 words: each component is one store, never a store to part of a vector another
// workgroup writes. 256 invocations cover the (at most two) super-blocks a head of d <= 256
// touches: 2 x 4 quads x 8 vec4 x 4 components.

@group(0) @binding(4) var<storage, read_write> x4: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> xk: array<u32>;

// Per invocation: the magnitude of its output value as bits (sign cleared; 0 past d).
var<workgroup> wmb: array<u32, WG>;

@compute @workgroup_size(WG)
fn main_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let h = wid.x + wid.y * nwg.x;
    if (h >= p.heads) {
        return;
    }
    let v = merge_head(h, li);
    let d = p.d;
    let nb = d / 32u;
    wmb[li] = select(0u, bitcast<u32>(v) & 0x7fffffffu, li < d);
    workgroupBarrier();
    let j = li / 32u;                  // the block of column li (< 8)
    var mb = 0u;
    for (var i = 0u; i < 32u; i++) {
        mb = max(mb, wmb[32u * j + i]);
    }
    let s = q8_scale(mb);
    if (li < d) {
        wq[li] = q8_code(v, s);
        if (li % 32u == 0u) {
            q8_set_block(j, s);
        }
    }
    workgroupBarrier();
    // INT4 order: the head's d / 8 words.
    if (li < d / 8u) {
        x4[h * (d / 8u) + li] = q8_int4_record(8u * li);
    }
    // Q4_K order: component c of vec4 t of quad u of the head's first or second super-block,
    // where its source block is one of the head's.
    if (p.quads != 0u) {
        let b0 = h * nb;
        let sb = b0 / 8u + li / 128u;
        let r = li % 128u;
        let u = r / 32u;
        let t = (r / 4u) % 8u;
        let c = r % 4u;
        let sk = q8_q4k_source(t, c);
        let blk = sb * 8u + sk.x;
        if (blk >= b0 && blk < b0 + nb) {
            xk[(t * p.quads + 4u * sb + u) * 4u + c] = q8_q4k_word(blk - b0, u, sk.y);
        }
    }
}
