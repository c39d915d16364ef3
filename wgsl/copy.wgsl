// Copy kernel: the in-process bandwidth reference for the benchmarks (read + write).
struct Params {
    len: u32,  // vec4 elements
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let stride = nwg.x * nwg.y * 256u;
    for (var i = (wid.x + wid.y * nwg.x) * 256u + li; i < p.len; i += stride) {
        dst[i] = src[i];
    }
}

// Busy kernel (timing::measure): arithmetic only, no memory traffic, so the GPU is kept at its
// working clocks right up to a timed dispatch without touching the caches the timed kernel uses.
// `len` is the iteration count; the store never happens for finite inputs but keeps the loop alive.
@compute @workgroup_size(256)
fn busy(@builtin(global_invocation_id) gid: vec3<u32>) {
    var x = f32(gid.x & 255u) * 1.0e-3;
    for (var i = 0u; i < p.len; i++) {
        x = fma(x, 0.999, 1.0e-3);
    }
    if (x < -1.0) {
        dst[0] = vec4<f32>(x);
    }
}

// Read kernel (timing::read_ceiling): reads `len` vec4s once and writes one XOR digest per
// workgroup (1/1024 of the bytes read), so its time is the floor for any kernel that must read
// the same bytes once: launch, ramp-up and drain included. Each invocation loads 4 vec4s
// (coalesced: consecutive invocations, consecutive vec4s), all issued before they are combined.
var<workgroup> digest: atomic<u32>;

@compute @workgroup_size(256)
fn read_once(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (li == 0u) {
        atomicStore(&digest, 0u);  // workgroup memory is not zero-initialised (unchecked shaders)
    }
    workgroupBarrier();
    let i0 = wg * 1024u + li;
    let last = p.len - 1u;
    let a = bitcast<vec4<u32>>(src[min(i0, last)]);
    let b = bitcast<vec4<u32>>(src[min(i0 + 256u, last)]);
    let c = bitcast<vec4<u32>>(src[min(i0 + 512u, last)]);
    let d = bitcast<vec4<u32>>(src[min(i0 + 768u, last)]);
    var h = 0u;
    if (i0 < p.len) { h ^= a.x ^ a.y ^ a.z ^ a.w; }
    if (i0 + 256u < p.len) { h ^= b.x ^ b.y ^ b.z ^ b.w; }
    if (i0 + 512u < p.len) { h ^= c.x ^ c.y ^ c.z ^ c.w; }
    if (i0 + 768u < p.len) { h ^= d.x ^ d.y ^ d.z ^ d.w; }
    atomicXor(&digest, h);
    workgroupBarrier();
    if (li == 0u && wg * 1024u < p.len) {
        let v = atomicLoad(&digest);
        dst[wg] = vec4<f32>(f32(v & 0xffffu), f32(v >> 16u), 0.0, 0.0);
    }
}
