// Shared by rope_apply.wgsl and rope_apply_vec.wgsl (prepended): the params, the position and
// table bindings, the (cos, sin) lookup and the work unit of an invocation.

struct Params {
    tokens: u32,
    heads: u32,
    d: u32,
    half: u32,
    units: u32,      // work units per head (see each kernel)
    pos_start: u32,  // position of token 0 when use_buf == 0
    use_buf: u32,
    rows: u32,       // table length
}

override F16: bool = false;
override NEOX: bool = false;  // pairs (i, i + d/2); else (2i, 2i + 1)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> positions: array<u32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;

fn cos_sin(pos: u32, i: u32) -> vec2<f32> {
    if (pos >= p.rows) {
        // Beyond the table: loud NaN, never a wrong angle. A runtime value: the WGSL
        // specification rejects a NaN const-expression.
        let nan_bits = 0x7fc00000u;
        return vec2<f32>(bitcast<f32>(nan_bits));
    }
    return table[pos * p.half + i];
}

// The work unit of invocation `id` of a 64-wide grid: (row = token * heads + head, unit in the
// row, position of the token); row == 0xffffffff past the last unit.
struct Unit {
    row: u32,
    u: u32,
    pos: u32,
}

fn unit_of(id: u32) -> Unit {
    if (id >= p.tokens * p.heads * p.units) {
        return Unit(0xffffffffu, 0u, 0u);
    }
    let row = id / p.units;
    let token = row / p.heads;
    var pos = p.pos_start + token;
    if (p.use_buf != 0u) {
        pos = positions[token];
    }
    return Unit(row, id - row * p.units, pos);
}
