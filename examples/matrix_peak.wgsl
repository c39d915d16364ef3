// Cooperative-matrix throughput probe (examples/matrix_peak.rs). Every subgroup runs `p.iters`
// steps of MA x 4 coopMultiplyAdd (16x16x16, f16 inputs, ACC accumulators) on 2 x 4 register
// accumulators. Operands: MODE 0 = A and B loaded once into registers before the loop; MODE 1 =
// loaded from workgroup memory every step; MODE 2 = loaded from the storage buffer every step.
// LOAD_A (modes 1, 2): reload A each step too (else only B: one load per product, as in the
// attention kernel's Q K^T with Q in registers). The operand set alternates between two sets
// (set = (step + p.salt) % 2, salt a run-time 0) so no load can be hoisted out of the loop.
// Result: C[i][j] = sum over steps of A_i(set) B_j(set), stored by every subgroup of the
// workgroups < p.writers (coopStore needs uniform control flow: the test is per workgroup).
// `alias ACC = f32;` or `= f16;` is appended by the example.

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    iters: u32,
    writers: u32,
    salt: u32,
    _p: u32,
}

override MODE: u32 = 0u;
override MA: u32 = 2u;        // A tiles per subgroup (1 or 2): MA x 4 products per step
override LOAD_A: bool = true;
override WG: u32 = 128u;
const SET: u32 = 6u * 256u;   // halves per operand set: A0, A1, B0..B3, 16x16 each

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f16>;
@group(0) @binding(2) var<storage, read_write> dst: array<ACC>;

var<workgroup> tile: array<f16, 3072>;  // both operand sets

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(num_subgroups) nsg: u32) {
    let w = wid.x + wid.y * nwg.x;
    for (var i = li; i < 2u * SET; i += WG) {
        tile[i] = src[i];
    }
    workgroupBarrier();
    var a0 = coopLoad<coop_mat16x16<f16, A>>(&src[0], 16u);
    var a1 = coopLoad<coop_mat16x16<f16, A>>(&src[256], 16u);
    var b0 = coopLoad<coop_mat16x16<f16, B>>(&src[512], 16u);
    var b1 = coopLoad<coop_mat16x16<f16, B>>(&src[768], 16u);
    var b2 = coopLoad<coop_mat16x16<f16, B>>(&src[1024], 16u);
    var b3 = coopLoad<coop_mat16x16<f16, B>>(&src[1280], 16u);
    var c00 = coop_mat16x16<ACC, C>();
    var c01 = coop_mat16x16<ACC, C>();
    var c02 = coop_mat16x16<ACC, C>();
    var c03 = coop_mat16x16<ACC, C>();
    var c10 = coop_mat16x16<ACC, C>();
    var c11 = coop_mat16x16<ACC, C>();
    var c12 = coop_mat16x16<ACC, C>();
    var c13 = coop_mat16x16<ACC, C>();
    for (var it = 0u; it < p.iters; it++) {
        let o = ((it + p.salt) % 2u) * SET;
        if (MODE == 1u) {
            if (LOAD_A) {
                a0 = coopLoad<coop_mat16x16<f16, A>>(&tile[o], 16u);
                a1 = coopLoad<coop_mat16x16<f16, A>>(&tile[o + 256u], 16u);
            }
            b0 = coopLoad<coop_mat16x16<f16, B>>(&tile[o + 512u], 16u);
            b1 = coopLoad<coop_mat16x16<f16, B>>(&tile[o + 768u], 16u);
            b2 = coopLoad<coop_mat16x16<f16, B>>(&tile[o + 1024u], 16u);
            b3 = coopLoad<coop_mat16x16<f16, B>>(&tile[o + 1280u], 16u);
        } else if (MODE == 2u) {
            if (LOAD_A) {
                a0 = coopLoad<coop_mat16x16<f16, A>>(&src[o], 16u);
                a1 = coopLoad<coop_mat16x16<f16, A>>(&src[o + 256u], 16u);
            }
            b0 = coopLoad<coop_mat16x16<f16, B>>(&src[o + 512u], 16u);
            b1 = coopLoad<coop_mat16x16<f16, B>>(&src[o + 768u], 16u);
            b2 = coopLoad<coop_mat16x16<f16, B>>(&src[o + 1024u], 16u);
            b3 = coopLoad<coop_mat16x16<f16, B>>(&src[o + 1280u], 16u);
        }
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c02 = coopMultiplyAdd(a0, b2, c02);
        c03 = coopMultiplyAdd(a0, b3, c03);
        if (MA == 2u) {
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            c12 = coopMultiplyAdd(a1, b2, c12);
            c13 = coopMultiplyAdd(a1, b3, c13);
        }
    }
    if (w < p.writers) {
        let slot = (w * nsg + sid) * 8u * 256u;  // one 8-matrix slot per subgroup
        coopStore(c00, &dst[slot], 16u);
        coopStore(c01, &dst[slot + 256u], 16u);
        coopStore(c02, &dst[slot + 512u], 16u);
        coopStore(c03, &dst[slot + 768u], 16u);
        coopStore(c10, &dst[slot + 1024u], 16u);
        coopStore(c11, &dst[slot + 1280u], 16u);
        coopStore(c12, &dst[slot + 1536u], 16u);
        coopStore(c13, &dst[slot + 1792u], 16u);
    }
}
