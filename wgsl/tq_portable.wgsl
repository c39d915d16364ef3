// TurboQuant invocation setup and reductions, Portable variant (no subgroup operations).
// Included before tq_transform.wgsl / tq_attention.wgsl. Provides:
//   TqGroup      the entry points' workgroup-uniform builtins (the WGSL uniformity analysis
//                sees them as such only in a struct of their own), tq_wg: its linear index
//   TqIds        the entry points' per-invocation builtins
//   tq_begin     -> TqLanes: linear workgroup index and a logical invocation index `l` (a
//                bijection onto 0..workgroup size that the transforms lay data out by)
//   tq_lanes     -> TqLanes for kernels that use only tq_reduce4 (l = local index)
//   tq_shfl_bits the number of low bits of `l` whose xor partners tq_shx reaches (0 here: every
//                exchange goes through workgroup memory); workgroup-uniform
//   tq_reduce4   max or sum of a vec4 over a 128-invocation workgroup (every invocation gets it)
// TqLanes mixes per-invocation values in, so no barrier's control flow may depend on it.

struct TqGroup {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}

struct TqIds {
    @builtin(local_invocation_index) li: u32,
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

fn tq_begin(g: TqGroup, ids: TqIds) -> TqLanes {
    return TqLanes(tq_wg(g), ids.li, ids.li, 0u, 1u, ids.li == 0u);
}

// tq_begin without a check (the Subgroup variant's skips its subgroup-shape check).
fn tq_lanes(g: TqGroup, ids: TqIds) -> TqLanes {
    return tq_begin(g, ids);
}

fn tq_shfl_bits() -> u32 {
    return 0u;
}

// Never called in this variant (tq_shfl_bits() = 0).
fn tq_shx(v: f32, mask: u32) -> f32 {
    return v;
}

var<workgroup> tq_red: array<vec4<f32>, 128>;

fn tq_reduce4(v: vec4<f32>, t: TqLanes, is_max: bool) -> vec4<f32> {
    tq_red[t.li] = v;
    workgroupBarrier();
    for (var s = 64u; s > 0u; s >>= 1u) {
        if (t.li < s) {
            let a = tq_red[t.li];
            let b = tq_red[t.li + s];
            tq_red[t.li] = select(a + b, max(a, b), is_max);
        }
        workgroupBarrier();
    }
    let r = tq_red[0];
    workgroupBarrier();
    return r;
}

// A sum staged without a barrier: tq_stage_sum4 (every invocation) stores its part, and after any
// later workgroupBarrier tq_staged_sum4 returns the workgroup's total to whoever asks. tq_red
// must not be reused in between.
fn tq_stage_sum4(v: vec4<f32>, t: TqLanes) {
    tq_red[t.li] = v;
}

fn tq_staged_sum4(t: TqLanes) -> vec4<f32> {
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    for (var i = 0u; i < 128u; i += 2u) {
        a += tq_red[i];
        b += tq_red[i + 1u];
    }
    return a + b;
}
