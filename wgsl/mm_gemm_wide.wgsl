// Second pass of the two-pass Matrix GEMM (src/kernels/matmul/wide.rs): y[i, y_off + r] =
// sum_c xh[i, c] * wh[r, c] (y row stride ldy) on 16x16x16 cooperative matrices, f16 inputs,
// f32 accumulation. xh and wh are the first pass's f16 copies of x and of the weight chunk: rows
// of kp4 vec4s (whole TK-column steps), rows padded to whole tiles, padding zero; so every tile
// and step is loaded whole, without bounds, and only the output is bounded (rows < m, columns <
// n). A workgroup computes a TM x TN tile with SGM x SGN subgroups of MI x NJ accumulators (as
// mm_gemm_matrix.wgsl); per TK-column step each invocation copies CX x and CW weight vec4s into
// workgroup memory (rows padded to KS = TK + 8 halves), loaded one step ahead into registers.
// Full tiles store their accumulators straight into y; edge tiles through a per-subgroup 16x16
// staging block, bounded. Workgroups past the last tile run no step and write nothing (control
// flow around matrix operations stays workgroup-uniform). Built for the adapter's one subgroup
// size SG; num_subgroups != NSG writes NaN.

enable f16;
enable wgpu_cooperative_matrix;

struct Wide {
    m: u32,        // x rows
    n: u32,        // weight rows of this chunk
    kp4: u32,      // row stride of xh and wh in vec4s
    steps: u32,    // TK-column steps
    ldy: u32,      // output row stride
    y_off: u32,    // the chunk's first output column
    tiles_m: u32,  // tiles along m
    tiles: u32,    // tiles in all
}

@group(0) @binding(0) var<uniform> p: Wide;
@group(0) @binding(1) var<storage, read> xh: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> wh: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

override SG: u32 = 32u;
override SGM: u32 = 2u;
override SGN: u32 = 4u;
override MI: u32 = 4u;
override NJ: u32 = 2u;
override TK: u32 = 64u;
override NSG: u32 = SGM * SGN;
override WG: u32 = NSG * SG;
override TM: u32 = 16u * MI * SGM;
override TN: u32 = 16u * NJ * SGN;
override TK4: u32 = TK / 4u;
override KS4: u32 = TK4 + 2u;
override XS_LEN: u32 = TM * KS4;
override WS_LEN: u32 = TN * KS4;
override OS_LEN: u32 = NSG * 256u;

var<workgroup> xs: array<vec4<f16>, XS_LEN>;
var<workgroup> ws: array<vec4<f16>, WS_LEN>;
var<workgroup> os: array<f32, OS_LEN>;

// Copy vec4 e of a step (row e / TK4 of the tile, vec4 e % TK4 of the step) from `row0`.
fn x_load(e: u32, row0: u32, s: u32) -> vec4<f16> {
    var v = vec4<f16>(0.0);
    if (e < TM * TK4) {
        v = xh[(row0 + e / TK4) * p.kp4 + s * TK4 + e % TK4];
    }
    return v;
}

fn w_load(e: u32, row0: u32, s: u32) -> vec4<f16> {
    var v = vec4<f16>(0.0);
    if (e < TN * TK4) {
        v = wh[(row0 + e / TK4) * p.kp4 + s * TK4 + e % TK4];
    }
    return v;
}

fn x_store(v: vec4<f16>, e: u32) {
    if (e < TM * TK4) {
        xs[(e / TK4) * KS4 + e % TK4] = v;
    }
}

fn w_store(v: vec4<f16>, e: u32) {
    if (e < TN * TK4) {
        ws[(e / TK4) * KS4 + e % TK4] = v;
    }
}

// Block (bi, bj) of the tile at (m0, n0) from this subgroup's staging block at `ob`: each lane
// every SG-th element, rows < m and columns < n only.
fn out_block(m0: u32, n0: u32, bi: u32, bj: u32, ob: u32, lane: u32, sized: bool) {
    for (var e = lane; e < 256u; e += SG) {
        let row = m0 + 16u * bi + e / 16u;
        let col = n0 + 16u * bj + e % 16u;
        if (row < p.m && col < p.n) {
            var v = os[ob + e];
            if (!sized) {
                v = bitcast<f32>(0x7fc00000u);
            }
            y[row * p.ldy + p.y_off + col] = v;
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(num_subgroups) nsg: u32) {
    let tile = wid.x + wid.y * nwg.x;
    let live = tile < p.tiles;
    let t = select(0u, tile, live);
    let tmi = t % p.tiles_m;
    let m0 = TM * tmi;
    let n0 = TN * (t / p.tiles_m);
    let sized = nsg == NSG;
    let s = min(sid, NSG - 1u);
    let sm = s / SGN;
    let sn = s - sm * SGN;
    let s_end = select(0u, p.steps, live);
    // The stores' stride and offsets go through `let`s: naga 30's SPIR-V writer fails (an
    // uncached expression) on a uniform's field used directly as a cooperative store's stride
    // or inside its index.
    let ldy = p.ldy;
    //@MI begin
    //@NJ var c{i}_{j} = coop_mat16x16<f32, C>();
    //@MI end
    //@CX var xv{x} = x_load(li + {x}u * WG, m0, 0u);
    //@CW var wv{w} = w_load(li + {w}u * WG, n0, 0u);
    for (var st = 0u; st < s_end; st++) {
        //@CX x_store(xv{x}, li + {x}u * WG);
        //@CW w_store(wv{w}, li + {w}u * WG);
        workgroupBarrier();
        let nx = min(st + 1u, s_end - 1u);
        //@CX xv{x} = x_load(li + {x}u * WG, m0, nx);
        //@CW wv{w} = w_load(li + {w}u * WG, n0, nx);
        for (var kk = 0u; kk < TK / 16u; kk++) {
            //@MI let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&xs[16u * (MI * sm + {i}u) * KS4 + 4u * kk], KS4);
            //@NJ let b{j} = coopLoad<coop_mat16x16<f16, B>>(&ws[16u * (NJ * sn + {j}u) * KS4 + 4u * kk], KS4);
            //@MI begin
            //@NJ c{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{i}_{j});
            //@MI end
        }
        workgroupBarrier();
    }

    let full = live && sized && m0 + TM <= p.m && n0 + TN <= p.n;
    if (full) {
        //@MI begin
        //@NJ let o{i}_{j} = (m0 + 16u * (MI * sm + {i}u)) * ldy + p.y_off + n0 + 16u * (NJ * sn + {j}u);
        //@NJ coopStoreT(c{i}_{j}, &y[o{i}_{j}], ldy);
        //@MI end
    } else if (live) {
        let ob = 256u * s;
        //@MI begin
        //@NJ begin
        coopStoreT(c{i}_{j}, &os[ob], 16u);
        workgroupBarrier();
        out_block(m0, n0, MI * sm + {i}u, NJ * sn + {j}u, ob, lane, sized);
        workgroupBarrier();
        //@NJ end
        //@MI end
    }
}
