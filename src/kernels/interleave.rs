//! Interleaved row layout of the INT4/INT8 weight codes (WGSL twin: wgsl/interleave.wgsl).
//!
//! A row of `W` u32 words (`W` a multiple of 4) is cut into blocks of 128 words; in a block of
//! `S = min(32, remaining vec4s)` vec4s, vec4 `i` holds natural words `i, i+S, i+2S, i+3S`. A
//! subgroup loading consecutive vec4s of codes (16-byte loads) then reads consecutive x values
//! for each component, so the activation loads are coalesced as well.

pub(crate) const WGSL: &str = include_str!("../../wgsl/interleave.wgsl");

/// Physical index of natural word `w` in a row of `vec4s` vec4s (`w` itself when it lies outside
/// the row, `w >= 4 * vec4s`).
pub fn phys(w: usize, vec4s: usize) -> usize {
    if w / 4 >= vec4s {
        return w;
    }
    let b = w >> 7;
    let s = 32.min(vec4s - (b << 5));
    let t = w & 127;
    (b << 7) + 4 * (t % s) + t / s
}

/// Rearrange rows of natural words (`row_words` per row, a multiple of 4) into the layout. With
/// any other `row_words`, or for a trailing partial row, the words are returned unchanged.
pub fn interleave(words: &[u32], row_words: usize) -> Vec<u32> {
    if row_words == 0 || row_words % 4 != 0 {
        return words.to_vec();
    }
    let mut out = words.to_vec();
    for (r, row) in words.chunks_exact(row_words).enumerate() {
        for (w, &v) in row.iter().enumerate() {
            out[r * row_words + phys(w, row_words / 4)] = v;
        }
    }
    out
}

/// Inverse of [`interleave`].
pub fn deinterleave(words: &[u32], row_words: usize) -> Vec<u32> {
    if row_words == 0 || row_words % 4 != 0 {
        return words.to_vec();
    }
    let mut out = words.to_vec();
    for (r, row) in out.chunks_exact_mut(row_words).enumerate() {
        for (w, v) in row.iter_mut().enumerate() {
            *v = words[r * row_words + phys(w, row_words / 4)];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn phys_is_a_permutation_per_row() {
        for vec4s in [1usize, 2, 7, 31, 32, 33, 64, 100, 448] {
            let mut seen = vec![false; vec4s * 4];
            for w in 0..vec4s * 4 {
                let p = super::phys(w, vec4s);
                assert!(!seen[p], "vec4s {vec4s}: {w} collides");
                seen[p] = true;
            }
        }
        let words: Vec<u32> = (0..7 * 36).collect();
        assert_eq!(super::deinterleave(&super::interleave(&words, 36), 36), words);
        // Degenerate inputs: no panic, words unchanged where there is no whole row.
        assert_eq!(super::interleave(&words, 0), words);
        assert_eq!(super::interleave(&words, 6), words);
        assert_eq!(super::deinterleave(&words[..5], 36), &words[..5]);
        assert_eq!(super::phys(9, 2), 9);
    }
}
