//! RoPE frequency configuration, computed on the host in f64 (d/2 numbers per table; the GPU
//! builds the positions x pairs table from them, see [`super::build_table`]).
//!
//! Definitions, with the parameter names Hugging Face transformers uses in `rope_parameters`
//! (`modeling_rope_utils.py`, `ROPE_INIT_FUNCTIONS`); `d` = head_dim, `i` = pair index `0..d/2`:
//!
//! * **default**: `inv_freq_i = rope_theta^(-2i/d)`, attention_factor 1.
//! * **linear** (`factor`): `inv_freq_i = rope_theta^(-2i/d) / factor` (same as dividing the
//!   position by `factor`).
//! * **dynamic** (HF `dynamic`, NTK-aware, evaluated at a sequence length `seq_len`):
//!   `s = max(seq_len, max_position_embeddings)`,
//!   `base = rope_theta * (factor * s / max_position_embeddings - (factor - 1))^(d / (d - 2))`,
//!   `inv_freq_i = base^(-2i/d)`. At `seq_len <= max_position_embeddings` this is the default.
//! * **ntk** (static NTK-aware, `alpha`): `base = rope_theta * alpha^(d / (d - 2))`.
//! * **llama3** (`factor`, `low_freq_factor`, `high_freq_factor`, `original_max_position_embeddings`):
//!   with `f = rope_theta^(-2i/d)`, `wavelen = 2 pi / f`, `lo = original / low_freq_factor`,
//!   `hi = original / high_freq_factor`: `wavelen > lo` -> `f / factor`; `wavelen < hi` -> `f`;
//!   otherwise `smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)`,
//!   `(1 - smooth) * f / factor + smooth * f`. attention_factor 1.
//! * **yarn** (`factor`, `original_max_position_embeddings`, `beta_fast` = 32, `beta_slow` = 1,
//!   `attention_factor`, `mscale`, `mscale_all_dim`, `truncate` = true):
//!   `corr(r) = d * ln(original / (2 pi r)) / (2 ln rope_theta)`; `low = corr(beta_fast)`,
//!   `high = corr(beta_slow)` (floor / ceil when `truncate`), clamped to `[0, d - 1]`;
//!   `ramp_i = clamp((i - low) / (high - low), 0, 1)` (`high += 0.001` when equal);
//!   `extra_i = 1 - ramp_i`; `inv_freq_i = f / factor * (1 - extra_i) + f * extra_i`.
//!   `attention_factor`, when not given: `m(s, k) = 0.1 * k * ln(s) + 1` (1 when `s <= 1`);
//!   `m(factor, mscale) / m(factor, mscale_all_dim)` when both are given and non-zero, else `m(factor, 1)`.
//!   cos and sin are multiplied by `attention_factor` (the only mode that scales magnitude).
//!   Note: HF overrides `factor` with `max_position_embeddings / original_max_position_embeddings`
//!   when the config has both; pass that ratio as `factor` to reproduce such a config.
//! * **longrope** (Phi-3 style: `short_factor`, `long_factor` (d/2 numbers each), `factor`,
//!   `original_max_position_embeddings`, `attention_factor`; evaluated at a sequence length
//!   `seq_len`): `ext = long_factor` when `seq_len > original_max_position_embeddings`, else
//!   `short_factor`; `inv_freq_i = 1 / (ext_i * rope_theta^(2i/d))`. `attention_factor`, when not
//!   given: 1 if `factor <= 1`, else `sqrt(1 + ln(factor) / ln(original_max_position_embeddings))`;
//!   cos and sin are multiplied by it. As for yarn, HF takes `factor` as
//!   `max_position_embeddings / original_max_position_embeddings` when the config has both.
//!
//! Angles are `position * inv_freq_i`; see [`super`] for the pair layouts.

use crate::error::{ensure, Error, Result};
use std::f64::consts::PI;
use std::sync::Arc;

/// How the base frequencies are scaled.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE.
    Default,
    /// HF `linear`.
    Linear { factor: f64 },
    /// HF `dynamic` evaluated at `seq_len`.
    Dynamic { factor: f64, max_position_embeddings: usize, seq_len: usize },
    /// Static NTK-aware base change by `alpha`.
    Ntk { alpha: f64 },
    /// HF `llama3`.
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position_embeddings: usize },
    /// HF `yarn`.
    Yarn {
        factor: f64,
        original_max_position_embeddings: usize,
        beta_fast: f64,
        beta_slow: f64,
        attention_factor: Option<f64>,
        mscale: Option<f64>,
        mscale_all_dim: Option<f64>,
        truncate: bool,
    },
    /// HF `longrope` (Phi-3) evaluated at `seq_len`: per-pair rescale factors, `head_dim / 2` each.
    LongRope { short_factor: Arc<[f64]>, long_factor: Arc<[f64]>, factor: f64, original_max_position_embeddings: usize, attention_factor: Option<f64>, seq_len: usize },
}

impl RopeScaling {
    /// YaRN with HF's defaults (beta_fast 32, beta_slow 1, derived attention factor, truncation).
    pub fn yarn(factor: f64, original_max_position_embeddings: usize) -> RopeScaling {
        RopeScaling::Yarn { factor, original_max_position_embeddings, beta_fast: 32.0, beta_slow: 1.0, attention_factor: None, mscale: None, mscale_all_dim: None, truncate: true }
    }

    pub fn name(&self) -> &'static str {
        match self {
            RopeScaling::Default => "default",
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::Dynamic { .. } => "dynamic",
            RopeScaling::Ntk { .. } => "ntk",
            RopeScaling::Llama3 { .. } => "llama3",
            RopeScaling::Yarn { .. } => "yarn",
            RopeScaling::LongRope { .. } => "longrope",
        }
    }
}

/// RoPE frequencies of one head dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    pub head_dim: usize,
    pub rope_theta: f64,
    pub scaling: RopeScaling,
}

fn yarn_mscale(scale: f64, k: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * k * scale.ln() + 1.0
    }
}

impl RopeConfig {
    pub fn new(head_dim: usize, rope_theta: f64, scaling: RopeScaling) -> RopeConfig {
        RopeConfig { head_dim, rope_theta, scaling }
    }

    /// Pairs per head (`head_dim / 2`).
    pub fn half(&self) -> usize {
        self.head_dim / 2
    }

    /// Check the parameters (even head_dim, positive base and factors, ...).
    pub fn validate(&self) -> Result<()> {
        let d = self.head_dim;
        ensure(d >= 2 && d % 2 == 0, || Error::Shape(format!("head_dim = {d}: RoPE needs an even head_dim >= 2")))?;
        ensure(self.rope_theta.is_finite() && self.rope_theta > 1.0, || Error::Argument(format!("rope_theta = {} must be > 1", self.rope_theta)))?;
        let pos = |name: &str, v: f64| ensure(v.is_finite() && v > 0.0, || Error::Argument(format!("{name} = {v} must be finite and > 0")));
        match &self.scaling {
            RopeScaling::Default => Ok(()),
            RopeScaling::Linear { factor } => pos("factor", *factor),
            RopeScaling::Dynamic { factor, max_position_embeddings, .. } => {
                pos("factor", *factor)?;
                ensure(d > 2, || Error::Shape("dynamic NTK needs head_dim > 2".into()))?;
                ensure(*max_position_embeddings > 0, || Error::Argument("max_position_embeddings = 0".into()))
            }
            RopeScaling::Ntk { alpha } => {
                pos("alpha", *alpha)?;
                ensure(d > 2, || Error::Shape("NTK needs head_dim > 2".into()))
            }
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                pos("factor", *factor)?;
                pos("low_freq_factor", *low_freq_factor)?;
                pos("high_freq_factor", *high_freq_factor)?;
                ensure(high_freq_factor != low_freq_factor, || Error::Argument("llama3: high_freq_factor == low_freq_factor".into()))?;
                ensure(*original_max_position_embeddings > 0, || Error::Argument("original_max_position_embeddings = 0".into()))
            }
            RopeScaling::Yarn { factor, original_max_position_embeddings, beta_fast, beta_slow, attention_factor, .. } => {
                pos("factor", *factor)?;
                pos("beta_fast", *beta_fast)?;
                pos("beta_slow", *beta_slow)?;
                if let Some(a) = attention_factor {
                    pos("attention_factor", *a)?;
                }
                ensure(*original_max_position_embeddings > 0, || Error::Argument("original_max_position_embeddings = 0".into()))
            }
            RopeScaling::LongRope { short_factor, long_factor, factor, original_max_position_embeddings, attention_factor, .. } => {
                pos("factor", *factor)?;
                if let Some(a) = attention_factor {
                    pos("attention_factor", *a)?;
                }
                ensure(*original_max_position_embeddings > 0, || Error::Argument("original_max_position_embeddings = 0".into()))?;
                for (name, list) in [("short_factor", short_factor), ("long_factor", long_factor)] {
                    ensure(list.len() == self.half(), || Error::Argument(format!("longrope: {name} has {} entries, head_dim / 2 = {}", list.len(), self.half())))?;
                    for &v in list.iter() {
                        pos(name, v)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// `theta^(-2i/d)` for a base `theta`.
    fn plain(&self, theta: f64) -> Vec<f64> {
        let d = self.head_dim as f64;
        (0..self.half()).map(|i| theta.powf(-2.0 * i as f64 / d)).collect()
    }

    /// The frequencies `inv_freq_i`, `i < head_dim / 2`, in f64.
    pub fn inv_freq(&self) -> Vec<f64> {
        let d = self.head_dim as f64;
        let theta = self.rope_theta;
        match self.scaling.clone() {
            RopeScaling::Default => self.plain(theta),
            RopeScaling::Linear { factor } => self.plain(theta).into_iter().map(|f| f / factor).collect(),
            RopeScaling::Dynamic { factor, max_position_embeddings, seq_len } => {
                let mp = max_position_embeddings as f64;
                let s = (seq_len as f64).max(mp);
                self.plain(theta * (factor * s / mp - (factor - 1.0)).powf(d / (d - 2.0)))
            }
            RopeScaling::Ntk { alpha } => self.plain(theta * alpha.powf(d / (d - 2.0))),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                let orig = original_max_position_embeddings as f64;
                let (lo_wl, hi_wl) = (orig / low_freq_factor, orig / high_freq_factor);
                self.plain(theta)
                    .into_iter()
                    .map(|f| {
                        let wl = 2.0 * PI / f;
                        if wl > lo_wl {
                            f / factor
                        } else if wl < hi_wl {
                            f
                        } else {
                            let smooth = (orig / wl - low_freq_factor) / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
            RopeScaling::Yarn { factor, original_max_position_embeddings, beta_fast, beta_slow, truncate, .. } => {
                let orig = original_max_position_embeddings as f64;
                let corr = |rot: f64| d * (orig / (rot * 2.0 * PI)).ln() / (2.0 * theta.ln());
                let (mut low, mut high) = (corr(beta_fast), corr(beta_slow));
                if truncate {
                    low = low.floor();
                    high = high.ceil();
                }
                let low = low.max(0.0);
                let mut high = high.min(d - 1.0);
                if low == high {
                    high += 0.001;
                }
                self.plain(theta)
                    .into_iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                        let extra = 1.0 - ramp;
                        f / factor * (1.0 - extra) + f * extra
                    })
                    .collect()
            }
            RopeScaling::LongRope { short_factor, long_factor, original_max_position_embeddings, seq_len, .. } => {
                let ext = if seq_len > original_max_position_embeddings { long_factor } else { short_factor };
                self.plain(theta).into_iter().zip(ext.iter()).map(|(f, e)| f / e).collect()
            }
        }
    }

    /// The factor cos and sin are multiplied by (1 except for YaRN and LongRoPE).
    pub fn attention_factor(&self) -> f64 {
        match self.scaling {
            RopeScaling::LongRope { factor, original_max_position_embeddings, attention_factor, .. } => match attention_factor {
                Some(a) => a,
                None if factor <= 1.0 => 1.0,
                None => (1.0 + factor.ln() / (original_max_position_embeddings as f64).ln()).sqrt(),
            },
            RopeScaling::Yarn { factor, attention_factor, mscale, mscale_all_dim, .. } => match (attention_factor, mscale, mscale_all_dim) {
                (Some(a), _, _) => a,
                (None, Some(m), Some(ma)) if m != 0.0 && ma != 0.0 => yarn_mscale(factor, m) / yarn_mscale(factor, ma),
                _ => yarn_mscale(factor, 1.0),
            },
            _ => 1.0,
        }
    }
}
