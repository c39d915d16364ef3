// TurboQuant invocation setup and reductions, Subgroup variant. Same interface as
// tq_portable.wgsl. Nothing assumes a subgroup size or how invocations map onto subgroups:
// tq_begin checks, once per workgroup, that every subgroup is full and that all have the same
// power-of-two size S. Only then is the logical index l = subgroup_id * S + lane (so the xor
// partner of l for a mask below S is lane ^ mask of the same subgroup, which subgroupShuffleXor
// reaches) and tq_shfl_bits() = log2 S; otherwise l = local_invocation_index and 0, and the
// transforms fall back to workgroup memory for every exchange. The reductions use subgroup
// sums/maxima of scalars (vector subgroup reductions trip the Metal compiler), combined across
// subgroups in workgroup memory, which works for any subgroup size and partial subgroups.

struct TqGroup {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(num_subgroups) nsg: u32,
}

struct TqIds {
    @builtin(local_invocation_index) li: u32,
    @builtin(subgroup_invocation_id) sl: u32,
    @builtin(subgroup_size) ss: u32,
    @builtin(subgroup_id) sid: u32,
}

fn tq_wg(g: TqGroup) -> u32 {
    return g.wid.x + g.wid.y * g.nwg.x;
}

struct TqLanes {
    wg: u32,
    l: u32,
    li: u32,
    sid: u32,
    nsg: u32,
    first: bool,
}

var<workgroup> tq_flags: array<atomic<u32>, 2>;  // [0]: a subgroup is partial or not a power of two; [1]: OR of sizes
var<workgroup> tq_bits: u32;

fn tq_begin(g: TqGroup, ids: TqIds) -> TqLanes {
    if (ids.li == 0u) {
        atomicStore(&tq_flags[0], 0u);
        atomicStore(&tq_flags[1], 0u);
    }
    workgroupBarrier();
    let members = subgroupAdd(1u);
    let bad = members != ids.ss || countOneBits(ids.ss) != 1u;
    atomicOr(&tq_flags[0], select(0u, 1u, bad));
    atomicOr(&tq_flags[1], ids.ss);
    workgroupBarrier();
    if (ids.li == 0u) {
        let sizes = atomicLoad(&tq_flags[1]);
        let ok = atomicLoad(&tq_flags[0]) == 0u && countOneBits(sizes) == 1u;
        tq_bits = select(0u, firstTrailingBit(sizes), ok);
    }
    let bits = workgroupUniformLoad(&tq_bits);
    let l = select(ids.li, ids.sid * ids.ss + ids.sl, bits > 0u);
    let first = subgroupExclusiveAdd(1u) == 0u;
    return TqLanes(tq_wg(g), l, ids.li, ids.sid, g.nsg, first);
}

// The subgroup facts tq_reduce4 needs, without tq_begin's check of the subgroup shape (for
// kernels that exchange nothing by shuffles). Call in uniform control flow.
fn tq_lanes(g: TqGroup, ids: TqIds) -> TqLanes {
    let first = subgroupExclusiveAdd(1u) == 0u;
    return TqLanes(tq_wg(g), ids.li, ids.li, ids.sid, g.nsg, first);
}

// Set once by tq_begin (which must run first); workgroupUniformLoad keeps it provably uniform.
fn tq_shfl_bits() -> u32 {
    return workgroupUniformLoad(&tq_bits);
}

fn tq_shx(v: f32, mask: u32) -> f32 {
    return subgroupShuffleXor(v, mask);
}

var<workgroup> tq_red: array<vec4<f32>, 128>;

fn tq_reduce4(v: vec4<f32>, t: TqLanes, is_max: bool) -> vec4<f32> {
    var r: vec4<f32>;
    if (is_max) {
        r = vec4<f32>(subgroupMax(v.x), subgroupMax(v.y), subgroupMax(v.z), subgroupMax(v.w));
    } else {
        r = vec4<f32>(subgroupAdd(v.x), subgroupAdd(v.y), subgroupAdd(v.z), subgroupAdd(v.w));
    }
    if (t.first) {
        tq_red[t.sid] = r;
    }
    workgroupBarrier();
    var acc = tq_red[0];
    for (var i = 1u; i < t.nsg; i++) {
        let b = tq_red[i];
        acc = select(acc + b, max(acc, b), is_max);
    }
    workgroupBarrier();
    return acc;
}

// A sum staged without a barrier: tq_stage_sum4 (every invocation, in uniform control flow)
// stores its subgroup's part, and after any later workgroupBarrier tq_staged_sum4 returns the
// workgroup's total to whoever asks. tq_red must not be reused in between.
fn tq_stage_sum4(v: vec4<f32>, t: TqLanes) {
    let r = vec4<f32>(subgroupAdd(v.x), subgroupAdd(v.y), subgroupAdd(v.z), subgroupAdd(v.w));
    if (t.first) {
        tq_red[t.sid] = r;
    }
}

fn tq_staged_sum4(t: TqLanes) -> vec4<f32> {
    var acc = tq_red[0];
    for (var i = 1u; i < t.nsg; i++) {
        acc += tq_red[i];
    }
    return acc;
}
