// Subgroup variant of the INT4 quantiser's scale pass. Included after interleave.wgsl and int4_quant.wgsl, whose Params,
// bindings, load() and store_scale() it uses; the code pass stays codes_main.
// Twin of msl/int4_quantize.metal (int4_quant_scales_*): same algorithm, same Params and bindings.
//
// One workgroup per (row, group), grid-strided. Threads stride over the group's columns keeping a
// running min/max (both start at 0, as the CPU reference does), then reduce in two levels:
// subgroupMin/Max inside each subgroup, the lowest active lane of each subgroup stores its partial
// at part[subgroup_id], and after a barrier invocation 0 folds all num_subgroups partials. Nothing
// assumes a subgroup size or that invocation 0 sits in subgroup 0, so it is correct for any
// subgroup size and for workgroups spanning many subgroups. Min/max are exact, so the scales are
// bit-identical to the one-thread-per-group pass and to the CPU.

const QUANT_TG: u32 = 128u;

var<workgroup> part_lo: array<f32, 128>;
var<workgroup> part_hi: array<f32, 128>;

@compute @workgroup_size(128)
fn scales_subgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sid: u32,
                   @builtin(num_subgroups) nsg: u32) {
    let total = p.n * p.num_groups;
    let count = nwg.x * nwg.y;
    for (var id = wid.x + wid.y * nwg.x; id < total; id += count) {
        let row = id / p.num_groups;
        let c0 = (id % p.num_groups) * p.group_size;
        let c1 = min(p.k, c0 + p.group_size);
        var lo = 0.0;
        var hi = 0.0;
        for (var c = c0 + li; c < c1; c += QUANT_TG) {
            let v = scan_load(row * p.k + c);
            lo = min(lo, v);
            hi = max(hi, v);
        }
        lo = subgroupMin(lo);
        hi = subgroupMax(hi);
        if (subgroupExclusiveAdd(1u) == 0u) {
            part_lo[sid] = lo;
            part_hi[sid] = hi;
        }
        workgroupBarrier();
        if (li == 0u) {
            var glo = 0.0;
            var ghi = 0.0;
            for (var i = 0u; i < nsg; i++) {
                glo = min(glo, part_lo[i]);
                ghi = max(ghi, part_hi[i]);
            }
            store_scale(id, glo, ghi);
        }
        workgroupBarrier();
    }
}
