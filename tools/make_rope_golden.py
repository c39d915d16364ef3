#!/usr/bin/env python3
"""Golden RoPE values from Hugging Face transformers' own rope-initialisation functions.

Usage:  python3 tools/make_rope_golden.py tests/data/rope_golden.json

Needs `torch` and `transformers` (written against transformers 5.x, where ROPE_INIT_FUNCTIONS has
linear, dynamic, yarn, longrope, llama3 and configs carry `rope_parameters`; falls back to the 4.x
`rope_scaling` + `rope_theta` form). For every case the JSON records:
  - the RoPE parameters exactly as HF saw them (config.rope_parameters after HF standardised them),
    head_dim, max_position_embeddings and, for `dynamic`, the seq_len passed,
  - HF's inv_freq (float32, as HF computes it) and attention_factor,
  - cos/sin at a few positions, computed like HF's rotary embedding does (float32:
    freqs = position * inv_freq, cos = cos(freqs) * attention_factor),
  - for a few cases a random q vector and HF's `apply_rotary_pos_emb` result (half-split / NeoX layout).
tests/attention.rs (`hf_golden_rope`) loads the file and compares the library's host frequencies
and GPU tables with it, within float32 rounding.
"""
import inspect
import json
import math
import sys

import torch
import transformers
from transformers import LlamaConfig

try:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
except ImportError:  # pragma: no cover
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: F401 (re-raise clearly)

POSITIONS = [0, 1, 37, 4095, 30000]
HF_VERSION = transformers.__version__


def make_config(head_dim, max_pos, params):
    """A LlamaConfig whose rope parameters are `params` (rope_type, rope_theta, factor, ...)."""
    common = dict(hidden_size=head_dim * 4, num_attention_heads=4, num_key_value_heads=4,
                  head_dim=head_dim, max_position_embeddings=max_pos, intermediate_size=64,
                  num_hidden_layers=1, vocab_size=32)
    try:
        cfg = LlamaConfig(rope_parameters=dict(params), **common)
        rp = getattr(cfg, "rope_parameters", None)
        if isinstance(rp, dict) and rp.get("rope_type") == params["rope_type"]:
            return cfg
    except TypeError:
        pass
    # transformers 4.x: rope_theta at top level, the rest in rope_scaling.
    scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    scaling = None if params["rope_type"] == "default" else scaling
    return LlamaConfig(rope_theta=params["rope_theta"], rope_scaling=scaling, **common)


def rope_params_seen(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if not isinstance(rp, dict):
        rp = dict(getattr(cfg, "rope_scaling", None) or {"rope_type": "default"})
        rp["rope_theta"] = cfg.rope_theta
    out = {}
    for k, v in rp.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(e, (int, float)) for e in v):
            out[k] = [float(e) for e in v]  # longrope's short_factor / long_factor
    return out


def default_inv_freq(cfg, head_dim):
    """The unscaled frequencies by HF's own code where it has one, else its formula in float32."""
    fn = ROPE_INIT_FUNCTIONS.get("default")
    if fn is not None:
        return fn(cfg, "cpu"), "ROPE_INIT_FUNCTIONS['default']"
    try:
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        f = getattr(LlamaRotaryEmbedding, "compute_default_rope_parameters", None)
        if f is not None:
            return f(cfg, "cpu"), "LlamaRotaryEmbedding.compute_default_rope_parameters"
    except ImportError:
        pass
    base = rope_params_seen(cfg)["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim))
    return (inv, 1.0), "formula (no HF default function found)"


def hf_apply(q, cos, sin):
    """HF's apply_rotary_pos_emb on one [1, 1, 1, d] q (half-split layout)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    emb_cos = torch.cat([cos, cos], dim=-1)[None, None, :]  # [batch, seq, d]
    emb_sin = torch.cat([sin, sin], dim=-1)[None, None, :]
    qr, _ = apply_rotary_pos_emb(q[None, None, None, :], q[None, None, None, :], emb_cos, emb_sin)  # q: [batch, heads, seq, d]
    return qr.reshape(-1)


def case(name, head_dim, max_pos, params, seq_len=None, with_apply=False):
    cfg = make_config(head_dim, max_pos, params)
    rope_type = params["rope_type"]
    if rope_type == "default":
        (inv_freq, attention_factor), source = default_inv_freq(cfg, head_dim)
    else:
        fn = ROPE_INIT_FUNCTIONS[rope_type]
        kwargs = {} if seq_len is None else {"seq_len": seq_len}
        inv_freq, attention_factor = fn(cfg, "cpu", **kwargs)
        source = f"ROPE_INIT_FUNCTIONS['{rope_type}']"
    inv_freq = inv_freq.to(torch.float32)
    attention_factor = float(attention_factor)
    pos = torch.tensor(POSITIONS, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :]  # float32, as in HF's rotary embedding
    cos = (freqs.cos() * attention_factor).to(torch.float32)
    sin = (freqs.sin() * attention_factor).to(torch.float32)
    out = {
        "name": name,
        "rope_type": rope_type,
        "source": source,
        "head_dim": head_dim,
        "max_position_embeddings": max_pos,
        "seq_len": seq_len,
        "params_given": params,
        "params_seen": rope_params_seen(cfg),
        "inv_freq": inv_freq.tolist(),
        "attention_factor": attention_factor,
        "positions": POSITIONS,
        "cos": cos.tolist(),
        "sin": sin.tolist(),
    }
    if with_apply:
        g = torch.Generator().manual_seed(1234)
        q = torch.randn(head_dim, generator=g, dtype=torch.float32)
        out["apply_q"] = q.tolist()
        out["apply_rotated"] = [hf_apply(q, cos[i], sin[i]).tolist() for i in range(len(POSITIONS))]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_rope_golden.py OUT.json")
    yarn_src = inspect.getsource(ROPE_INIT_FUNCTIONS["yarn"])
    cases = [
        case("default_d128", 128, 4096, {"rope_type": "default", "rope_theta": 10000.0}, with_apply=True),
        case("default_d80", 80, 4096, {"rope_type": "default", "rope_theta": 1000000.0}),
        case("linear_f4", 128, 16384, {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}, with_apply=True),
        case("dynamic_f2_seq10000", 128, 4096, {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, seq_len=10000),
        case("dynamic_f2_seq2048", 128, 4096, {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, seq_len=2048),
        case("dynamic_f8_seq40000_d64", 64, 2048, {"rope_type": "dynamic", "rope_theta": 500000.0, "factor": 8.0}, seq_len=40000),
        case("llama3_f8", 128, 131072, {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, with_apply=True),
        case("llama3_f32_d64", 64, 131072, {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
        # max_position_embeddings = factor * original so that HF versions which derive the factor
        # from the ratio and those which take `factor` agree.
        case("yarn_f4", 128, 16384, {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 4096}, with_apply=True),
        case("yarn_f8_d80_af", 80, 16384, {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 8.0, "attention_factor": 0.9,
                                           "beta_fast": 16.0, "beta_slow": 2.0, "original_max_position_embeddings": 2048}),
        case("yarn_f40_mscale", 64, 163840, {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "mscale": 0.707,
                                             "mscale_all_dim": 1.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                             "original_max_position_embeddings": 4096}),
    ]
    # LongRoPE (Phi-3 style): factor lists of head_dim / 2 entries; max_position_embeddings =
    # 32 x original, so HF's factor (the ratio) is 32; seq_len past and within the original window.
    for d, seq in ((96, 8192), (96, 2048), (64, 5000)):
        half = d // 2
        short = [1.0 + 0.8 * i / half for i in range(half)]
        long = [1.5 + 58.5 * (i / half) ** 2 for i in range(half)]
        cases.append(case(f"longrope_d{d}_seq{seq}", d, 131072, {"rope_type": "longrope", "rope_theta": 10000.0,
                                                                   "short_factor": short, "long_factor": long,
                                                                   "original_max_position_embeddings": 4096},
                          seq_len=seq, with_apply=(seq == 8192)))
    if "truncate" in yarn_src:
        cases.append(case("yarn_f4_notruncate", 128, 16384, {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                             "original_max_position_embeddings": 4096, "truncate": False}))
    doc = {
        "generator": "tools/make_rope_golden.py",
        "transformers": HF_VERSION,
        "torch": torch.__version__,
        "cases": cases,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {sys.argv[1]} (transformers {HF_VERSION}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
