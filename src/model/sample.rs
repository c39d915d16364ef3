//! Sampling the next token from logits, on the CPU.
//!
//! The logits are read back (one `vocab`-long f32 row per step: 128 KB for a 32k vocabulary,
//! 0.5 MB for Llama 3's 128k, small next to the weights a decode step reads) and sampled here:
//! simpler than a GPU sampler, exact (no approximate top-k/top-p), reproducible from a seed on any
//! adapter, and the application sees the logits (for logit bias, grammars, ...).
//!
//! With a top-k, the GPU can choose the candidates instead ([`crate::model::ops::top_k`], the
//! same exact set) so that only `k` `(logit, id)` pairs are read back
//! ([`Sampler::sample_top_k`], [`crate::model::Session::decode_stream_top_k`]); the draw from
//! them is this module's, so both paths give the same tokens for a seed.
//!
//! Order, as in common samplers: top-k (0 = off), then temperature softmax, then top-p (nucleus,
//! 1 = off) over the sorted probabilities, then a draw from the renormalised rest with a seeded RNG.
//! Temperature 0 is greedy: the highest logit, the lowest token id among equal ones.

use super::error::{ModelError, Result};

/// Sampling parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 = greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p (1 = all).
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig { temperature: 0.0, top_k: 40, top_p: 0.95, seed: 0 }
    }
}

/// A seeded sampler.
pub struct Sampler {
    cfg: SamplerConfig,
    rng: fastrand::Rng,
    order: Vec<(f32, u32)>,
}

/// The index of the largest value (the first among equal ones), NaN ignored.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in logits.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// The `k` largest `(logit, id)` of `items` (ids increasing), the lowest id first among equal
/// logits, in no particular order: one pass that keeps `k` candidates and replaces the worst
/// when a larger logit comes (a later id never wins a tie), so a vocabulary costs one comparison
/// per token instead of a selection over all of them.
fn top_k_into(items: impl Iterator<Item = (f32, u32)>, k: usize, out: &mut Vec<(f32, u32)>) {
    let mut worst = 0;
    for item in items {
        if out.len() < k {
            out.push(item);
            if out.len() == k {
                worst = worst_of(out);
            }
        } else if item.0 > out[worst].0 {
            out[worst] = item;
            worst = worst_of(out);
        }
    }
}

/// The index of the entry that ranks last: the smallest logit, the highest id among equal ones.
fn worst_of(c: &[(f32, u32)]) -> usize {
    let mut w = 0;
    for (i, e) in c.iter().enumerate().skip(1) {
        if e.0 < c[w].0 || (e.0 == c[w].0 && e.1 > c[w].1) {
            w = i;
        }
    }
    w
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Result<Sampler> {
        if !(cfg.temperature.is_finite() && cfg.temperature >= 0.0) {
            return Err(ModelError::Argument(format!("temperature {} must be finite and >= 0", cfg.temperature)));
        }
        if !(cfg.top_p > 0.0 && cfg.top_p <= 1.0) {
            return Err(ModelError::Argument(format!("top_p {} must be in (0, 1]", cfg.top_p)));
        }
        Ok(Sampler { cfg, rng: fastrand::Rng::with_seed(cfg.seed), order: Vec::new() })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// The next token from `logits`.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        if self.cfg.temperature == 0.0 {
            return argmax(logits).ok_or_else(no_logits);
        }
        self.order.clear();
        let finite = logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32));
        if self.cfg.top_k == 0 || self.cfg.top_k >= logits.len() {
            self.order.extend(finite);
        } else {
            top_k_into(finite, self.cfg.top_k, &mut self.order);
        }
        self.draw()
    }

    /// The next token from `candidates`, the exact top-k of a logits row for k = `top_k` of the
    /// config (the `k` largest finite logits as `(logit, id)`, the lowest id first among equal
    /// ones; fewer where the row has fewer finite logits), in any order, e.g. from
    /// [`crate::model::ops::top_k`]: the token [`Sampler::sample`] gives for that row, with the
    /// same draws of the seeded generator. At temperature 0 the best candidate (the token of
    /// [`argmax`] where the row has no infinities). A `top_k` of 0, more candidates than
    /// `top_k` or a non-finite candidate is an error.
    pub fn sample_top_k(&mut self, candidates: &[(f32, u32)]) -> Result<u32> {
        let k = self.cfg.top_k;
        if k == 0 || candidates.len() > k {
            return Err(ModelError::Argument(format!("{} candidates for top_k = {k} (1 or more, at most top_k)", candidates.len())));
        }
        if let Some(c) = candidates.iter().find(|c| !c.0.is_finite()) {
            return Err(ModelError::Argument(format!("candidate {} has a non-finite logit {}", c.1, c.0)));
        }
        if self.cfg.temperature == 0.0 {
            let best = candidates.iter().copied().reduce(|b, c| if c.0 > b.0 || (c.0 == b.0 && c.1 < b.1) { c } else { b });
            return best.map(|c| c.1).ok_or_else(no_logits);
        }
        self.order.clear();
        self.order.extend_from_slice(candidates);
        self.draw()
    }

    /// The draw shared by [`Sampler::sample`] and [`Sampler::sample_top_k`] from the candidates
    /// in `order` (finite, after top-k): sort them, then [`pick`] with the next uniform.
    fn draw(&mut self) -> Result<u32> {
        if self.order.is_empty() {
            return Err(no_logits());
        }
        let by_logit = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        self.order.sort_unstable_by(by_logit);
        let r = self.rng.f64();
        Ok(self.order[pick(&self.order, self.cfg.temperature, self.cfg.top_p, r)].1)
    }

    /// The next uniform in `[0, 1)` of the seeded generator, as f32 (one per draw, the one
    /// [`Sampler::sample`] would take): for a draw on the GPU ([`crate::model::ops::draw`]).
    pub(crate) fn next_uniform(&mut self) -> f32 {
        // The largest f32 below 1 where the f64 rounds up to 1.
        (self.rng.f64() as f32).min(1.0 - f32::EPSILON / 2.0)
    }
}

/// The index of the drawn candidate in `sorted` (finite logits, the largest first, at least
/// one), for a uniform `r` in `[0, 1)`: temperature softmax (`temperature` > 0), top-p (the
/// fewest leading candidates whose probability reaches `top_p`; all where `top_p` is 1), then the
/// first candidate whose running probability among the kept exceeds `r`. In f64.
pub(crate) fn pick(sorted: &[(f32, u32)], temperature: f32, top_p: f32, r: f64) -> usize {
    let t = temperature as f64;
    let max = sorted[0].0 as f64;
    let probs: Vec<f64> = sorted.iter().map(|&(v, _)| ((v as f64 - max) / t).exp()).collect();
    let total: f64 = probs.iter().sum();
    let mut keep = probs.len();
    if top_p < 1.0 {
        let mut acc = 0.0;
        for (i, p) in probs.iter().enumerate() {
            acc += p / total;
            if acc >= top_p as f64 {
                keep = i + 1;
                break;
            }
        }
    }
    let kept: f64 = probs[..keep].iter().sum();
    let mut r = r * kept;
    for (i, p) in probs[..keep].iter().enumerate() {
        r -= p;
        if r < 0.0 {
            return i;
        }
    }
    keep - 1
}

fn no_logits() -> ModelError {
    ModelError::Argument("no finite logits to sample from".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_first_max() {
        let mut s = Sampler::new(SamplerConfig { temperature: 0.0, ..Default::default() }).unwrap();
        assert_eq!(s.sample(&[0.5, 2.0, f32::NAN, 2.0, -1.0]).unwrap(), 1);
        assert!(s.sample(&[f32::NAN]).is_err());
    }

    /// Frequencies match the softmax at temperature 1 within sampling noise; top-k 1 is greedy;
    /// top-p keeps only the head of the distribution; one seed reproduces the same draws.
    #[test]
    fn distribution_topk_topp_seed() {
        let logits = [0.0f32, (2.0f32).ln(), (3.0f32).ln(), f32::NEG_INFINITY];
        let mut s = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 0, top_p: 1.0, seed: 7 }).unwrap();
        let n = 60_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.sample(&logits).unwrap() as usize] += 1;
        }
        for (i, want) in [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0, 0.0].iter().enumerate() {
            let got = counts[i] as f64 / n as f64;
            assert!((got - want).abs() < 0.01, "token {i}: {got} vs {want}");
        }
        let mut k1 = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 1, top_p: 1.0, seed: 1 }).unwrap();
        assert!((0..100).all(|_| k1.sample(&logits).unwrap() == 2));
        // p(2) = 0.5 reaches top_p 0.5 alone; 0.6 needs tokens 2 and 1.
        let mut p5 = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 0, top_p: 0.5, seed: 2 }).unwrap();
        assert!((0..100).all(|_| p5.sample(&logits).unwrap() == 2));
        let mut p6 = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 0, top_p: 0.6, seed: 3 }).unwrap();
        let seen: std::collections::HashSet<u32> = (0..500).map(|_| p6.sample(&logits).unwrap()).collect();
        assert_eq!(seen, [1, 2].into_iter().collect());
        let draw = |seed| {
            let mut s = Sampler::new(SamplerConfig { temperature: 0.8, top_k: 3, top_p: 0.9, seed }).unwrap();
            (0..50).map(|_| s.sample(&logits).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(11), draw(11));
        assert_ne!(draw(11), draw(12));
        assert!(Sampler::new(SamplerConfig { temperature: -1.0, ..Default::default() }).is_err());
        assert!(Sampler::new(SamplerConfig { top_p: 0.0, ..Default::default() }).is_err());
    }

    /// Sampling from the exact top-k candidates (in any order) gives the tokens of sampling the
    /// whole row, draw for draw, for the same seed; misuse is an error.
    #[test]
    fn candidates_sample_as_the_row() {
        let mut rng = fastrand::Rng::with_seed(9);
        for round in 0..100 {
            let n = rng.usize(1..300);
            let logits: Vec<f32> = (0..n)
                .map(|_| match rng.u32(0..15) {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 => -0.0,
                    _ => rng.i32(-8..8) as f32 * 0.25,
                })
                .collect();
            let k = rng.usize(1..n + 3);
            let temperature = if round % 10 == 0 { 0.0 } else { 0.5 + rng.f32() };
            let cfg = SamplerConfig { temperature, top_k: k, top_p: [1.0, 0.9, 0.5][round % 3], seed: round as u64 };
            let mut cands = Vec::new();
            top_k_into(logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)), k, &mut cands);
            rng.shuffle(&mut cands);
            let (mut a, mut b) = (Sampler::new(cfg).unwrap(), Sampler::new(cfg).unwrap());
            if cands.is_empty() {
                // (Greedy sampling of the row may still pick a -inf.)
                assert!(b.sample_top_k(&cands).is_err());
                continue;
            }
            for _ in 0..20 {
                let want = a.sample(&logits);
                let got = b.sample_top_k(&cands);
                assert_eq!(got.ok(), want.ok(), "n {n} k {k} cfg {cfg:?}");
            }
        }
        let mut s = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 2, top_p: 1.0, seed: 0 }).unwrap();
        assert!(s.sample_top_k(&[(1.0, 0), (2.0, 1), (0.0, 2)]).is_err(), "more candidates than top_k");
        assert!(s.sample_top_k(&[(f32::INFINITY, 0)]).is_err(), "non-finite candidate");
        assert!(s.sample_top_k(&[]).is_err(), "no candidates");
        let mut off = Sampler::new(SamplerConfig { temperature: 1.0, top_k: 0, top_p: 1.0, seed: 0 }).unwrap();
        assert!(off.sample_top_k(&[(1.0, 0)]).is_err(), "top_k 0");
    }

    /// The one-pass top-k keeps exactly the set a full sort keeps (ties to the lowest id,
    /// non-finite logits never), on random logits with many ties.
    #[test]
    fn top_k_matches_a_full_sort() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..200 {
            let n = rng.usize(1..400);
            let logits: Vec<f32> = (0..n)
                .map(|_| match rng.u32(0..20) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    _ => rng.i32(-6..6) as f32 * 0.5,
                })
                .collect();
            let k = rng.usize(1..n + 2);
            let mut all: Vec<(f32, u32)> = logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.truncate(k);
            let mut got = Vec::new();
            top_k_into(logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)), k, &mut got);
            got.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            assert_eq!(got, all, "n {n} k {k}");
        }
    }
}
