//! The merge loop shared by both vocabularies: start from one symbol per character, repeatedly
//! merge the adjacent pair of highest priority (ties: the leftmost pair), until no adjacent pair
//! has a priority. SentencePiece ranks a pair by the score of the token it forms, byte-level BPE by
//! the rank of the merge rule; both are expressed as a caller-given priority.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// One symbol: a byte range of the word, linked to its neighbours.
#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct Candidate<P> {
    priority: P,
    left: usize,
    right: usize,
    /// Byte length of the pair when it was queued; a later merge of either side changes it.
    len: usize,
}

impl<P: Ord> PartialEq for Candidate<P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<P: Ord> Eq for Candidate<P> {}
impl<P: Ord> PartialOrd for Candidate<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P: Ord> Ord for Candidate<P> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: higher priority first, then the smaller left index.
        self.priority.cmp(&other.priority).then_with(|| Reverse(self.left).cmp(&Reverse(other.left)))
    }
}

/// Splits `word` into characters and merges them; `priority(left, right)` is `None` for a pair
/// that must not merge. Returns the byte ranges `(start, len)` of the final symbols, in order.
pub(super) fn merge<P: Ord>(word: &str, mut priority: impl FnMut(&str, &str) -> Option<P>) -> Vec<(usize, usize)> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
    for (start, c) in word.char_indices() {
        let i = symbols.len();
        symbols.push(Symbol { start, len: c.len_utf8(), prev: i.checked_sub(1), next: None });
        if let Some(p) = i.checked_sub(1) {
            symbols[p].next = Some(i);
        }
    }
    let text = |s: &Symbol| &word[s.start..s.start + s.len];
    let mut heap = BinaryHeap::new();
    let mut push = |heap: &mut BinaryHeap<Candidate<P>>, symbols: &[Symbol], left: Option<usize>, right: Option<usize>| {
        if let (Some(l), Some(r)) = (left, right) {
            if let Some(p) = priority(text(&symbols[l]), text(&symbols[r])) {
                heap.push(Candidate { priority: p, left: l, right: r, len: symbols[l].len + symbols[r].len });
            }
        }
    };
    for i in 1..symbols.len() {
        push(&mut heap, &symbols, Some(i - 1), Some(i));
    }
    while let Some(c) = heap.pop() {
        let (l, r) = (symbols[c.left], symbols[c.right]);
        if l.len == 0 || r.len == 0 || l.next != Some(c.right) || l.len + r.len != c.len {
            continue; // stale: one side merged since this pair was queued
        }
        symbols[c.left].len += r.len;
        symbols[c.left].next = r.next;
        symbols[c.right].len = 0;
        if let Some(n) = r.next {
            symbols[n].prev = Some(c.left);
        }
        push(&mut heap, &symbols, l.prev, Some(c.left));
        push(&mut heap, &symbols, Some(c.left), r.next);
    }
    symbols.iter().filter(|s| s.len > 0).map(|s| (s.start, s.len)).collect()
}

#[cfg(test)]
mod tests {
    use super::merge;

    fn pieces<'a>(word: &'a str, ranges: &[(usize, usize)]) -> Vec<&'a str> {
        ranges.iter().map(|&(s, l)| &word[s..s + l]).collect()
    }

    #[test]
    fn highest_priority_first_then_leftmost() {
        // "ab" outranks "bc"; among equal "aa" pairs the leftmost merges first.
        let prio = |a: &str, b: &str| match (a, b) {
            ("a", "b") => Some(3),
            ("b", "c") => Some(2),
            ("a", "a") => Some(1),
            _ => None,
        };
        let w = "abc";
        assert_eq!(pieces(w, &merge(w, prio)), ["ab", "c"]);
        let w = "aaa";
        assert_eq!(pieces(w, &merge(w, prio)), ["aa", "a"]);
        let w = "xé😀";
        assert_eq!(pieces(w, &merge(w, prio)), ["x", "é", "😀"]);
        assert!(merge("", prio).is_empty());
    }
}
