// Layout probe (examples/matrix_peak.rs `probe`): one subgroup loads a 16x16 f16 matrix of role
// ROLE (0 A, 1 B, 2 C) from the storage buffer (stride 24; row-major if LT, else column-major),
// stores it into workgroup memory (stride 40; row-major if ST) and copies that region out. The
// CPU checks the element placement: does a load / store pair of each role and layout move
// element (i, j) where the layouts say?

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    iters: u32,
    writers: u32,
    salt: u32,
    _p: u32,
}

override ROLE: u32 = 0u;
override LT: bool = false;
override ST: bool = false;
override WG: u32 = 32u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f16>;
@group(0) @binding(2) var<storage, read_write> dst: array<f16>;

var<workgroup> tile: array<f16, 640>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32) {
    for (var i = li; i < 640u; i += WG) {
        tile[i] = f16(-7.0);
    }
    workgroupBarrier();
    if (ROLE == 0u) {
        var m: coop_mat16x16<f16, A>;
        if (LT) {
            m = coopLoadT<coop_mat16x16<f16, A>>(&src[8], 24u);
        } else {
            m = coopLoad<coop_mat16x16<f16, A>>(&src[8], 24u);
        }
        if (ST) {
            coopStoreT(m, &tile[0], 40u);
        } else {
            coopStore(m, &tile[0], 40u);
        }
    } else if (ROLE == 1u) {
        var m: coop_mat16x16<f16, B>;
        if (LT) {
            m = coopLoadT<coop_mat16x16<f16, B>>(&src[8], 24u);
        } else {
            m = coopLoad<coop_mat16x16<f16, B>>(&src[8], 24u);
        }
        if (ST) {
            coopStoreT(m, &tile[0], 40u);
        } else {
            coopStore(m, &tile[0], 40u);
        }
    } else {
        var m: coop_mat16x16<f16, C>;
        if (LT) {
            m = coopLoadT<coop_mat16x16<f16, C>>(&src[8], 24u);
        } else {
            m = coopLoad<coop_mat16x16<f16, C>>(&src[8], 24u);
        }
        if (ST) {
            coopStoreT(m, &tile[0], 40u);
        } else {
            coopStore(m, &tile[0], 40u);
        }
    }
    workgroupBarrier();
    for (var i = li; i < 640u; i += WG) {
        dst[i] = tile[i];
    }
}
