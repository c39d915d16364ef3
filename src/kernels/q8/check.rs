//! Checks of Q8 activations written on the GPU against the CPU quantiser (spec:
//! [`crate::reference::q8`]), bit for bit, in poisoned and guarded buffers: for this family's
//! cases and for the kernels of other families that quantise their own output (the decode
//! attention's fused merge), so built in every build, as those cases are.

use super::*;
use crate::reference::q8 as r8;
use crate::suite::{guard_damage, guarded_u32, POISON_U32};

/// `got` against `expect` word for word (`what` names the order): a note on the words that
/// differ, and the guard words past `expect` overwritten.
pub(crate) fn word_diff(got: &[u32], expect: &[u32], what: &str) -> (String, usize) {
    let n = expect.len();
    let differ = got.iter().zip(expect).filter(|(a, b)| a != b).count();
    let note = match got.iter().zip(expect).position(|(a, b)| a != b) {
        Some(i) => format!("{what}: {differ} words differ from the CPU quantiser, first at {i}: {:#010x} vs {:#010x}", got[i], expect[i]),
        None => String::new(),
    };
    (note, guard_damage(got, n, POISON_U32))
}

/// Both int8 layouts of `out` against the CPU quantiser's of `xn[..k]`, bit for bit: the notes
/// of the words that differ and the guard words overwritten.
pub(crate) fn q8_diff(ctx: &Context, xn: &[f32], out: &Q8Activations) -> Result<(String, usize)> {
    let expect = r8::quantize(&xn[..out.k]);
    let (mut note, mut guard) = word_diff(&ctx.read(&out.x4)?, &r8::pack_int4(&expect), "int4 order");
    if let Some(xk) = &out.xk {
        let (n2, g2) = word_diff(&ctx.read(xk)?, &r8::pack_q4k(&expect), "q4k order");
        guard += g2;
        if !n2.is_empty() {
            note = if note.is_empty() { n2 } else { format!("{note}; {n2}") };
        }
    }
    Ok((note, guard))
}

/// One row of int8 activations of `k` in poisoned, guarded buffers.
pub(crate) fn guarded_q8(ctx: &Context, k: usize) -> Result<Q8Activations> {
    Ok(Q8Activations { k, rows: 1, x4: guarded_u32(ctx, k / 2)?, xk: (k % QK_K == 0).then(|| guarded_u32(ctx, k / 64 * XK_WORDS_PER_QUAD)).transpose()? })
}
