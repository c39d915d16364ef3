//! Sample RoPE configurations, one of every scaling mode: the test grids of the RoPE and
//! attention families run over them, and so does the attention decode's Native self-check
//! (built in every build).

use super::{RopeConfig, RopeScaling};

/// One configuration of every scaling mode for head dimension `d` (used by the tests).
pub fn sample_configs(d: usize) -> Vec<RopeConfig> {
    vec![
        RopeConfig::new(d, 10000.0, RopeScaling::Default),
        RopeConfig::new(d, 10000.0, RopeScaling::Linear { factor: 4.0 }),
        RopeConfig::new(d, 10000.0, RopeScaling::Dynamic { factor: 2.0, max_position_embeddings: 4096, seq_len: 10000 }),
        RopeConfig::new(d, 10000.0, RopeScaling::Ntk { alpha: 3.0 }),
        RopeConfig::new(d, 500000.0, RopeScaling::Llama3 { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 }),
        RopeConfig::new(d, 10000.0, RopeScaling::yarn(4.0, 4096)),
        RopeConfig::new(
            d,
            1000000.0,
            RopeScaling::Yarn {
                factor: 40.0,
                original_max_position_embeddings: 4096,
                beta_fast: 32.0,
                beta_slow: 1.0,
                attention_factor: None,
                mscale: Some(0.707),
                mscale_all_dim: Some(1.0),
                truncate: false,
            },
        ),
        // LongRoPE at a length past the original window (long factors) and within it (short).
        RopeConfig::new(d, 10000.0, longrope_sample(d, 8192)),
        RopeConfig::new(d, 10000.0, longrope_sample(d, 1000)),
    ]
}

/// A LongRoPE scaling with factors rising from 1 (short) / 1.5 (long) across the pairs, Phi-3
/// style (original window 4096, 32x extension), evaluated at `seq_len`.
pub fn longrope_sample(d: usize, seq_len: usize) -> RopeScaling {
    let half = d / 2;
    let ramp = |lo: f64, hi: f64| (0..half).map(|i| lo + (hi - lo) * i as f64 / half.max(2) as f64).collect::<Vec<_>>().into();
    RopeScaling::LongRope { short_factor: ramp(1.0, 1.8), long_factor: ramp(1.5, 60.0), factor: 32.0, original_max_position_embeddings: 4096, attention_factor: None, seq_len }
}
