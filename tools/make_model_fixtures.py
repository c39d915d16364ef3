#!/usr/bin/env python3
"""Tiny random-weight GGUF models made and evaluated by llama.cpp itself, for tests/model.rs and
tests/tokenizer.rs. CI does not run this: its outputs are committed under tests/data/models/.

What it makes (the MODELS list below; tests/data/models/manifest.txt lists what it wrote):
  * llama-tiny: LlamaForCausalLM, hidden 256, intermediate 512, 2 layers, 4 heads / 2 KV heads
    (GQA), head_dim 64, llama3 rope scaling (so the converter writes `rope_freqs.weight`), untied
    output; a SentencePiece BPE tokenizer (byte fallback, digits split) trained on the repository's
    README.md and BENCHMARKS.md -> GGUF `tokenizer.ggml.model = llama`. F16, Q8_0, Q4_K_M.
  * llama-q5k: the same configuration without RoPE scaling, another seed, Q5_K_M.
  * qwen2-tiny: Qwen2ForCausalLM, same dims, q/k/v biases, tied embeddings; a byte-level BPE
    (gpt2-style) tokenizer with Qwen2's pre-tokenizer regex trained on the same text ->
    `tokenizer.ggml.model = gpt2`, `tokenizer.ggml.pre = qwen2`. Q8_0, Q4_K_M.
  * bpe-llama3-vocab: vocabulary only (no weights), the byte-level BPE retrained with Llama 3's
    pre-tokenizer regex -> `tokenizer.ggml.pre = llama-bpe`; for the tokenizer tests only.
  The newer architectures, intermediate 256 (keeps the files small; Q4_K needs rows of 256), in
  Q8_0 and Q4_K_M (gemma3 and mistral in Q4_K_M only: the whole set stays near 21 MB), each vocabulary with a real instruct model's chat template (from llama.cpp's
  models/templates/) in tokenizer_config.json, so the file carries `tokenizer.chat_template`:
  * qwen3-tiny: Qwen3ForCausalLM, 4 heads / 2 KV heads of head_dim 128 (q twice the hidden size),
    per-head q/k RMSNorm, tied embeddings; the Qwen2-style BPE with <|im_end|> as eos and <think>,
    </think>, <tool_call>, </tool_call> as plain added tokens; Qwen3-0.6B's template.
  * gemma2-tiny: Gemma2ForCausalLM, 2 layers (layer 0 windowed, layer 1 global: llama.cpp's
    period-2 pattern), sliding window 8 (shorter than the prompt), attention and final logit
    soft-caps 5.0 (small enough to bend the logits), GELU-tanh, tied embeddings; a SentencePiece BPE
    with Gemma's ids (<pad> 0, <eos> 1, <bos> 2, <unk> 3, <start_of_turn>/<end_of_turn> control
    pieces), no dummy prefix; gemma-2-2b-it's template. Both gemmas: token embeddings of std 0.02 and
    norm weights around 2 (see GEMMA_INIT).
  * gemma2-nano: gemma2-tiny's configuration at hidden 128 (two heads of 64, one KV head, FFN 128),
    F16 only (about 0.7 MB): the Gemma features at the F16 tolerance.
  * gemma3-tiny: Gemma3ForCausalLM (text), 6 layers: llama.cpp applies its default period-6
    pattern (the converter writes no pattern key), so layers 0-4 are windowed (window 8, local
    RoPE base 10000) and layer 5 global (RoPE base 1e6); q/k norms; the Gemma vocabulary.
  * phi3-tiny: Phi3ForCausalLM as Phi-3.5-mini is configured: fused qkv_proj and gate_up_proj,
    longrope scaling (short/long factors, original context 4096 of 131072), sliding_window 262144
    (which llama.cpp ignores for phi3), untied output; the Llama-2-style SentencePiece with Phi's
    chat markers as special added tokens and 5 padding ids; Phi-3.5-mini-instruct's template.
  * mistral-tiny: MistralForCausalLM with sliding_window 8; the converter makes it a `llama` file
    and writes no window (llama.cpp attends over the whole context); a SentencePiece with Mistral
    v0.3's control tokens [INST] ... at ids 3-9; Mistral-Nemo-Instruct's template.
  Weights are converted with llama.cpp's own convert_hf_to_gguf.py (F16) and quantised with its
  own quantiser (the llama-quantize tool if built, else the same llama_model_quantize call through
  llama_ref). For each model file: llama.cpp's logits at every position of a fixed prompt
  (<name>.logits.npy, float32 [prompt tokens, vocab]), a 32-token greedy continuation and the file's
  tensor types (<name>.ref.txt); for the newer architectures the ref file also holds the file's
  metadata keys, llama.cpp's n_swa and (gemma) windowed layers, its special and end-of-generation
  tokens, and the chat template's rendering of a fixed conversation by transformers' Jinja renderer
  and by libllama's built-in template matcher. For each vocabulary: llama.cpp's tokenisation of
  test texts (plus the vocabulary's chat markers) in all four (add_special, parse_special) modes and
  every token's piece (<vocab>.tokens.txt). Text formats (`key values...` lines) so the Rust tests
  need no JSON crate. Model files of architectures the runner does not implement are listed as
  `pending model` lines in the manifest (see RUNNER_ARCHS), which the tests skip; so are the
  models and vocabularies named in PENDING_MODELS / PENDING_VOCABS (none at present).

The trained tokenizers have a custom vocabulary, so the converter's pre-tokenizer detection (a hash
of a known model's tokenisation) cannot name them: the converter is run with its
`get_vocab_base_pre` replaced by a function returning the pre-tokenizer the tokenizer was trained
with ("qwen2" or "llama-bpe"); everything else is the converter's own code.

With FIXTURE_CHECK=1 it also prints, per model, llama.cpp's F16 logits against transformers' f32
forward pass (eager attention) and how far each feature moves transformers' logits (a variant
config without it). Measured (fraction of each row's logit spread, worst prompt position):
  qwen3 1.4e-3; gemma2 3.4e-3 (without the window 0.82, the attention soft-cap 0.79, the final
  soft-cap 0.28); gemma3 7.1e-3 (without the window 1.12, with the global RoPE base on local
  layers 0.85); phi3 2.9e-3 (without longrope 0.79); mistral 0.92 against transformers' window
  of 8, which llama.cpp does not apply (see MISTRAL_NOTE).

Reproduce (CPU only). Measured on a shared 2-core machine (load average 8-9 from other work): the
llama.cpp build (library only, the quantiser reached through llama_ref) 21 min wall; the venv about
3 min (PyPI's torch, the CPU wheel index being unreachable); the script about 50 s per model (the
five newer ones with FIXTURE_CHECK=1: 4 min 13 s; llama-tiny, qwen2-tiny and bpe-llama3: 1 min 45 s,
byte-identical to the committed files):
  mkdir -p /work/llama && cd /work/llama
  pip download llama-cpp-python==0.3.36 --no-deps --no-binary llama-cpp-python
  tar xzf llama_cpp_python-0.3.36.tar.gz
  python3 -m venv venv && venv/bin/pip install cmake ninja
  PATH=$PWD/venv/bin:$PATH cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B build -G Ninja \\
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \\
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=ON
  PATH=$PWD/venv/bin:$PATH nice cmake --build build -j2 --target llama
  venv/bin/pip install torch numpy~=2.2.6 'sentencepiece>=0.1.98,<0.3.0' transformers==4.57.6 \\
        'protobuf>=4.21.0,<5.0.0' tokenizers safetensors jinja2
        (used: torch 2.15.0, tokenizers 0.22.2, sentencepiece 0.2.3; the CPU wheel index
        https://download.pytorch.org/whl/cpu gives a smaller torch where reachable)
  cd <repo> && /work/llama/venv/bin/python tools/make_model_fixtures.py [KIND...]
Arguments: the model kinds to (re)make (e.g. qwen3-tiny), default all; `manifest` only rewrites
manifest.txt from the files present. Environment overrides: LLAMA_SRC (the vendored llama.cpp tree),
LLAMA_BUILD (its cmake build dir), FIXTURE_WORK (scratch dir, default /work/llama/fixtures-work),
FIXTURE_OUT (output dir, default tests/data/models), FIXTURE_CHECK (the transformers cross-check).
This script compiles tools/llama_ref.cpp (logits / tokenisation / pieces / special tokens and chat
rendering through libllama) with g++.
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("FIXTURE_OUT", REPO / "tests" / "data" / "models"))
LLAMA_SRC = Path(os.environ.get("LLAMA_SRC", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp"))
LLAMA_BUILD = Path(os.environ.get("LLAMA_BUILD", "/work/llama/build"))
WORK = Path(os.environ.get("FIXTURE_WORK", "/work/llama/fixtures-work"))
TEMPLATES = LLAMA_SRC / "models" / "templates"
# Training text: fixed at this commit so a rerun trains the same vocabularies.
CORPUS_COMMIT = "558ac74"
CORPUS_FILES = ["README.md", "BENCHMARKS.md"]

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 512, 2, 4, 2, 64
VOCAB = 1000
SEED = 1234
N_GEN = 32
# Architectures (GGUF `general.architecture`) the runner implements: tests/model.rs reads the
# `model` lines of manifest.txt, tests/tokenizer.rs the `vocab` lines. The model files of any other
# architecture are written as `pending model ...` lines, which the tests skip until the runner
# implements the architecture and the word `pending` is dropped (here, so that a rerun keeps it so).
# A vocabulary's line needs only the tokenizer, so it is `pending` only when named in PENDING_VOCABS.
RUNNER_ARCHS = {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}
PROMPT = "The quick brown fox jumps over the lazy dog. Kernels run LLM inference on wgpu: 1234 tokens/s!"
# The conversation each file's chat template renders (add_generation_prompt = true).
CHAT = [("user", "Hello! Who are you?"), ("assistant", "I am a tiny model."), ("user", "What is 2+2?")]

QWEN2_PAT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3_PAT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

TEST_TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello  world,   three spaces   ",
    "   leading spaces and trailing tabs\t\t",
    "numbers 1234567 3.14159 -42 0x1F 1,000,000",
    "Unicode: héllo wörld ñandú Ελληνικά русский 日本語 中文 한국어",
    "emoji 🦙🚀 😶\u200d🌫️ ✅ family 👨\u200d👩\u200d👧",
    "newlines\n\nand\ttabs\r\nwindows\rcr\n",
    "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "<s> literal </s> markers <unk> and <|endoftext|> <|im_start|>user<|im_end|>",
    "GEMV on Q4_K_M weights: `cargo run --release --example generate -- model.gguf -p \"hi\"`",
    "\u00a0non-breaking\u2009thin\u3000ideographic space",
    "combining: e\u0301 a\u0308 \u0915\u093f\u0928\u094d\u0926\u0940",
    "x" * 40 + " " + "ab" * 20,
]
# Texts with the chat vocabularies' own markers, tokenised only for the vocabularies that have them.
CHAT_TEXTS = [
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n <bos><eos><pad>",
    "<|user|>\nHi<|end|>\n<|assistant|>\n<|endoftext|><|placeholder1|>",
    "[INST]Hi[/INST] ok</s>[AVAILABLE_TOOLS][/AVAILABLE_TOOLS]",
    "<think>\nhmm\n</think>\n\n<tool_call>{}</tool_call>",
]


@dataclass(frozen=True)
class SpmVocab:
    """A SentencePiece BPE trained on the corpus (byte fallback, digits split), GGUF
    `tokenizer.ggml.model = llama`. `meta`: (unk, bos, eos, pad) ids and pieces for the trainer (-1 =
    none); `control`: control pieces right after them; `added`: tokens appended after the
    SentencePiece vocabulary (added_tokens.json, special), as Phi-3 has them; `padding`: ids past
    those (the model's vocabulary is VOCAB wide, the converter names them [PAD<id>])."""
    name: str
    config: dict
    meta: tuple = ((0, "<unk>"), (1, "<s>"), (2, "</s>"), (-1, "<pad>"))
    control: tuple = ()
    added: tuple = ()
    dummy_prefix: bool = True
    template: str | None = None
    chat_texts: tuple = ()
    padding: int = 0
    pre: str | None = None


@dataclass(frozen=True)
class BpeVocab:
    """A byte-level BPE (gpt2-style) trained on the corpus with the `pattern` pre-tokenizer regex,
    GGUF `tokenizer.ggml.model = gpt2`, `tokenizer.ggml.pre = pre`; `specials` are special added
    tokens (ids 0..), `extra` non-special added tokens (after the trained vocabulary)."""
    name: str
    pattern: str
    pre: str
    config: dict
    specials: tuple = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
    extra: tuple = ()
    template: str | None = None
    chat_texts: tuple = ()


LLAMA_VOCAB = SpmVocab("llama-tiny", {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
                                      "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
QWEN2_VOCAB = BpeVocab("qwen2-tiny", QWEN2_PAT, "qwen2", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
LLAMA3_VOCAB = BpeVocab("bpe-llama3", LLAMA3_PAT, "llama-bpe", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
# Qwen3: Qwen2's pre-tokenizer, <|im_end|> the end of a turn and the eos, <think> & co. plain added tokens.
QWEN3_VOCAB = BpeVocab("qwen3-tiny", QWEN2_PAT, "qwen2", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                       extra=("<think>", "</think>", "<tool_call>", "</tool_call>"),
                       template="Qwen-Qwen3-0.6B.jinja", chat_texts=(3,))
# Gemma: <pad> 0, <eos> 1, <bos> 2, <unk> 3, the turn markers control pieces, no dummy prefix.
GEMMA_VOCAB = SpmVocab("gemma-tiny", {"tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False,
                                      "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
                       meta=((3, "<unk>"), (2, "<bos>"), (1, "<eos>"), (0, "<pad>")),
                       control=("<start_of_turn>", "<end_of_turn>"), dummy_prefix=False,
                       template="google-gemma-2-2b-it.jinja", chat_texts=(0,))
# Phi-3.5: the Llama 2 tokenizer, its chat markers appended as special added tokens, the model's
# vocabulary padded past them.
PHI3_VOCAB = SpmVocab("phi3-tiny", {"tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "add_eos_token": False,
                                    "bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
                      added=("<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
                             "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"),
                      padding=5, template="microsoft-Phi-3.5-mini-instruct.jinja", chat_texts=(1,))
# Mistral 7B v0.3: the control tokens [INST] ... at ids 3-9.
MISTRAL_VOCAB = SpmVocab("mistral-tiny", {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
                                          "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
                         control=("[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                                  "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
                         template="mistralai-Mistral-Nemo-Instruct-2407.jinja", chat_texts=(2,))


@dataclass(frozen=True)
class ModelSpec:
    """One tiny model: its transformers class and config (`tokens` maps config fields to the token
    whose id they take), vocabulary, seed, and the file types kept (the first also carries the
    vocabulary's tokenizer reference). `norm_center`, `embed_std`: see randomise."""
    kind: str
    hf_class: str
    config_class: str
    config: dict
    vocab: SpmVocab | BpeVocab
    quants: tuple
    seed: int
    tokens: dict = field(default_factory=dict)
    norm_center: float = 1.0
    embed_std: float = 0.1
    notes: tuple = ()


def dims(inter=INTER, layers=LAYERS, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, hidden=HIDDEN):
    return dict(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=kv_heads, head_dim=head_dim, torch_dtype="float32")


# The newer architectures use a 256-wide FFN (Q4_K needs rows of 256) to keep the fixtures small; gemma3
# (six layers) and mistral (the llama architecture, whose Q8_0 llama-tiny has) are kept in Q4_K_M only.
SMALL_FFN = 256
# Phi-3.5's longrope: factors per rotary pair (head_dim / 2 of them), short ones used while the context
# is at most original_max_position_embeddings.
LONGROPE = {"type": "longrope", "short_factor": [round(1.0 + 2.0 * i / 31, 4) for i in range(32)],
            "long_factor": [round(1.0 * 50.0 ** (i / 31), 4) for i in range(32)]}
GEMMA_NOTE = ("gemma: the converter stores every *norm.weight as 1 + w (the checkpoint's w); llama.cpp scales the "
              "token embeddings by sqrt(embedding_length) and the queries by 1/sqrt(key_length) "
              "(query_pre_attn_scalar is not in the file; llama.cpp uses another scale only for the 27B layer counts)")
# Gemma's tied embeddings enter scaled by sqrt(hidden) = 16: at std 0.1 they outweigh the layers and every
# position predicts its own token (greedy decoding repeats the prompt's last token). Smaller embeddings and
# norm weights around 2 (the checkpoint's (1 + w) norms with w around 1) let the layers decide.
GEMMA_INIT = dict(norm_center=1.0, embed_std=0.02)
PHI3_NOTE = ("phi3: q/k/v fused in blk.N.attn_qkv (rows q, then k, then v) and gate/up in blk.N.ffn_up (rows gate, "
             "then up; the gate half goes through SiLU); llama.cpp takes rope_factors_short while its context (n_ctx) is at "
             "most rope.scaling.original_context_length, else rope_factors_long (src/llama-model.cpp get_rope_factors), "
             "divides each pair's frequency by its factor and multiplies the rotated q and k by rope.scaling.attn_factor; "
             "it ignores phi3.attention.sliding_window (src/models/phi3.cpp)")
MISTRAL_NOTE = ("mistral: the checkpoint's sliding_window (8) is not in the file (the converter writes no window for llama "
                "files), so llama.cpp attends over the whole context here; transformers with the window differs from these "
                "logits by 0.9 of the spread")
SWA_NOTE = ("sliding window (llama.cpp's is_masked_swa, standard type): on a windowed layer the query at position p "
            "sees the keys at positions p - n_swa < k <= p")

MODELS = [
    ModelSpec("llama-tiny", "LlamaForCausalLM", "LlamaConfig",
              dict(dims(), max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 256}, tie_word_embeddings=False),
              LLAMA_VOCAB, ("F16", "Q8_0", "Q4_K_M"), SEED, tokens={"bos_token_id": "<s>", "eos_token_id": "</s>"}),
    # llama-q5k: llama-tiny's configuration, another seed, in Q5_K_M only (Q5_K with Q6_K where
    # llama.cpp's mix puts it): the K-quant most downloads use after Q4_K_M.
    ModelSpec("llama-q5k", "LlamaForCausalLM", "LlamaConfig",
              dict(dims(), max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False),
              LLAMA_VOCAB, ("Q5_K_M",), SEED + 9, tokens={"bos_token_id": "<s>", "eos_token_id": "</s>"}),
    # qwen2: no F16 (keeps the fixtures small)
    ModelSpec("qwen2-tiny", "Qwen2ForCausalLM", "Qwen2Config",
              dict(dims(head_dim=None), max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   tie_word_embeddings=True, use_sliding_window=False),
              QWEN2_VOCAB, ("Q8_0", "Q4_K_M"), SEED + 1, tokens={"bos_token_id": "<|endoftext|>", "eos_token_id": "<|endoftext|>"}),
    # Qwen3 as the small real ones: head_dim 128 (q is 512 wide, twice the hidden size), per-head
    # q/k RMSNorm, tied embeddings.
    ModelSpec("qwen3-tiny", "Qwen3ForCausalLM", "Qwen3Config",
              dict(dims(inter=SMALL_FFN, head_dim=128), max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   tie_word_embeddings=True, attention_bias=False),
              QWEN3_VOCAB, ("Q8_0", "Q4_K_M"), SEED + 3, tokens={"bos_token_id": "<|endoftext|>", "eos_token_id": "<|im_end|>"}),
    # Gemma 2: layer 0 windowed (window 8 < the prompt), layer 1 global, both soft-caps small enough to bend the
    # logits (the real ones: 50 and 30).
    ModelSpec("gemma2-tiny", "Gemma2ForCausalLM", "Gemma2Config",
              dict(dims(inter=SMALL_FFN), max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HEAD_DIM, sliding_window=8,
                   attn_logit_softcapping=5.0, final_logit_softcapping=2.0, tie_word_embeddings=True),
              GEMMA_VOCAB, ("Q8_0", "Q4_K_M"), SEED + 4, notes=(GEMMA_NOTE, SWA_NOTE), **GEMMA_INIT,
              tokens={"bos_token_id": "<bos>", "eos_token_id": "<eos>", "pad_token_id": "<pad>"}),
    # Gemma 3 (text): six layers, as llama.cpp's default pattern (the converter writes none) makes every
    # sixth layer global: layers 0-4 windowed with the local RoPE base, layer 5 global.
    ModelSpec("gemma3-tiny", "Gemma3ForCausalLM", "Gemma3TextConfig",
              dict(dims(inter=SMALL_FFN, layers=6), max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HEAD_DIM,
                   sliding_window=8, final_logit_softcapping=None, attn_logit_softcapping=None, tie_word_embeddings=True),
              GEMMA_VOCAB, ("Q4_K_M",), SEED + 5, notes=(GEMMA_NOTE, SWA_NOTE), **GEMMA_INIT,
              tokens={"bos_token_id": "<bos>", "eos_token_id": "<eos>", "pad_token_id": "<pad>"}),
    # Gemma 2 in F16, small enough to commit (hidden 128, two heads of 64 over one KV head, FFN 128): checks the
    # Gemma features (window on layer 0, both soft-caps, post-norms, GELU-tanh, embedding scale) at the F16
    # tolerance, where the quantised files' activation rounding hides errors under several percent.
    ModelSpec("gemma2-nano", "Gemma2ForCausalLM", "Gemma2Config",
              dict(dims(inter=128, heads=2, kv_heads=1, hidden=128), max_position_embeddings=8192, rms_norm_eps=1e-6,
                   rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HEAD_DIM, sliding_window=8,
                   attn_logit_softcapping=5.0, final_logit_softcapping=2.0, tie_word_embeddings=True),
              GEMMA_VOCAB, ("F16",), SEED + 8, notes=(GEMMA_NOTE, SWA_NOTE), **GEMMA_INIT,
              tokens={"bos_token_id": "<bos>", "eos_token_id": "<eos>", "pad_token_id": "<pad>"}),
    # Phi-3.5-mini's shape of config: fused qkv_proj and gate_up_proj, longrope, the sliding window
    # llama.cpp ignores for phi3, untied output.
    ModelSpec("phi3-tiny", "Phi3ForCausalLM", "Phi3Config",
              dict(dims(inter=SMALL_FFN, head_dim=None), max_position_embeddings=131072, original_max_position_embeddings=4096,
                   rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=LONGROPE, sliding_window=262144,
                   tie_word_embeddings=False),
              PHI3_VOCAB, ("Q8_0", "Q4_K_M"), SEED + 6, notes=(PHI3_NOTE,),
              tokens={"bos_token_id": "<s>", "eos_token_id": "<|endoftext|>", "pad_token_id": "<|endoftext|>"}),
    # Mistral: converted to the llama architecture; its sliding window is set here (8, less than the prompt).
    ModelSpec("mistral-tiny", "MistralForCausalLM", "MistralConfig",
              dict(dims(inter=SMALL_FFN), max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1000000.0,
                   sliding_window=8, tie_word_embeddings=False),
              MISTRAL_VOCAB, ("Q4_K_M",), SEED + 7, notes=(MISTRAL_NOTE,), tokens={"bos_token_id": "<s>", "eos_token_id": "</s>"}),
]
# Vocabulary-only files (no weights) for the tokenizer tests.
VOCAB_ONLY = [LLAMA3_VOCAB]
# Vocabularies written `pending` (none: the tokenizer matches llama.cpp on every one, phi3's
# rstrip attribute included).
PENDING_VOCABS: set = set()
# Models (kinds) written `pending` though their architecture is in RUNNER_ARCHS.
PENDING_MODELS: set = set()


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def corpus_file():
    path = WORK / "corpus.txt"
    text = ""
    for f in CORPUS_FILES:
        text += subprocess.run(["git", "-C", str(REPO), "show", f"{CORPUS_COMMIT}:{f}"], check=True, capture_output=True, text=True).stdout + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def build_llama_ref():
    exe = WORK / "llama_ref"
    run(["g++", "-O2", "-std=c++17", "-I", LLAMA_SRC / "include", "-I", LLAMA_SRC / "ggml" / "include",
         REPO / "tools" / "llama_ref.cpp", "-L", LLAMA_BUILD / "bin", "-lllama", "-lggml", "-lggml-base",
         f"-Wl,-rpath,{LLAMA_BUILD / 'bin'}", "-o", exe])
    return exe


def template_text(v):
    return (TEMPLATES / v.template).read_text(encoding="utf-8") if v.template else None


def write_tokenizer_config(d, v, extra=None):
    """tokenizer_config.json: the vocabulary's settings, its chat template (which the converter
    copies into `tokenizer.chat_template`) and any added-token table."""
    path = d / "tokenizer_config.json"
    cfg = json.loads(path.read_text()) if path.exists() else {}
    cfg.update(v.config)
    cfg.update(extra or {})
    if v.template:
        cfg["chat_template"] = template_text(v)
    path.write_text(json.dumps(cfg, indent=1, ensure_ascii=False))


def make_spm(corpus, v, d):
    """Trains the SentencePiece model into d; returns {token: id}."""
    import sentencepiece as spm
    prefix = WORK / f"spm-{v.name}"
    (unk, unk_p), (bos, bos_p), (eos, eos_p), (pad, pad_p) = v.meta
    extra = {"control_symbols": list(v.control)} if v.control else {}
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(prefix), vocab_size=VOCAB - len(v.added) - v.padding, model_type="bpe",
        byte_fallback=True, character_coverage=0.9995, split_digits=True, add_dummy_prefix=v.dummy_prefix,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, unk_id=unk, bos_id=bos, eos_id=eos, pad_id=pad,
        unk_piece=unk_p, bos_piece=bos_p, eos_piece=eos_p, pad_piece=pad_p,
        max_sentence_length=1 << 16, num_threads=2, minloglevel=2, **extra)
    shutil.copy(str(prefix) + ".model", d / "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
    ids = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    table = {}
    if v.added:
        base = sp.get_piece_size()
        added = {t: base + i for i, t in enumerate(v.added)}
        (d / "added_tokens.json").write_text(json.dumps(added, indent=1))
        table["added_tokens_decoder"] = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                                  "single_word": False, "special": True} for t, i in added.items()}
        ids.update(added)
    write_tokenizer_config(d, v, table)
    return ids, VOCAB


def make_bpe(corpus, v, d):
    """Trains the byte-level BPE into d; returns {token: id}."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(v.pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(v.extra), special_tokens=list(v.specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([str(corpus)], trainer)
    if v.extra:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in v.extra])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **v.config)
    fast.save_pretrained(d)
    write_tokenizer_config(d, v)
    return fast.get_vocab(), len(fast)


def make_vocab(corpus, v, d):
    return (make_spm if isinstance(v, SpmVocab) else make_bpe)(corpus, v, d)


def randomise(model, norm_center=1.0, embed_std=0.1):
    """Weights with a spread that makes attention and logits non-trivial (std 0.1; the token
    embeddings `embed_std`), norm weights around `norm_center` (+- 0.2), biases non-zero: every
    tensor matters to the logits."""
    import torch
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(norm_center + 0.2 * torch.randn(p.shape, generator=g))
            else:
                std = embed_std if name.endswith("embed_tokens.weight") else 0.1
                p.copy_(std * torch.randn(p.shape, generator=g))
    return model


def make_hf(corpus, m):
    """The transformers checkpoint of a model spec (random weights) with its tokenizer, in WORK."""
    import torch
    import transformers
    d = WORK / f"{m.kind}-hf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    ids, n_vocab = make_vocab(corpus, m.vocab, d)
    # head_dim None: the config class derives it (Qwen2 and Phi3 take no head_dim argument).
    cfg = {k: v for k, v in m.config.items() if not (k == "head_dim" and v is None)}
    cfg.update({k: ids[t] for k, t in m.tokens.items()})
    config = getattr(transformers, m.config_class)(vocab_size=n_vocab, **cfg)
    torch.manual_seed(m.seed)
    model = randomise(getattr(transformers, m.hf_class)(config), m.norm_center, m.embed_std)
    model.save_pretrained(d, safe_serialization=True)
    return d


def make_vocab_only(corpus, v):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = WORK / f"{v.name}-hf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    _, n_vocab = make_vocab(corpus, v, d)
    cfg = LlamaConfig(vocab_size=n_vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=1, num_key_value_heads=1, torch_dtype="float32")
    torch.manual_seed(SEED + 2)
    LlamaForCausalLM(cfg).save_pretrained(d, safe_serialization=True)
    return d


def convert(hf_dir, out, pre=None, vocab_only=False):
    """llama.cpp's converter; `pre` names the pre-tokenizer of a custom-trained byte-level BPE."""
    args = [str(hf_dir), "--outfile", str(out), "--outtype", "f16"] + (["--vocab-only"] if vocab_only else [])
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); pre = sys.argv[2]\n"
        "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[3:]\n"
        "import convert_hf_to_gguf as c\n"
        "from conversion.base import TextModel\n"
        "if pre != '-': TextModel.get_vocab_base_pre = lambda self, tokenizer: pre\n"
        "c.main()\n")
    run([sys.executable, "-c", code, LLAMA_SRC, pre or "-"] + args)


def quantize(exe, src, dst, qtype):
    """llama.cpp's quantiser: the llama-quantize tool when built, else the same library call
    (llama_model_quantize, default parameters) through llama_ref."""
    tool = LLAMA_BUILD / "bin" / "llama-quantize"
    if tool.exists():
        run([tool, src, dst, qtype], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        run([exe, "quantize", src, dst, qtype.lower()])


def gguf_reader(path):
    sys.path.insert(0, str(LLAMA_SRC / "gguf-py"))
    import gguf
    return gguf.GGUFReader(str(path))


def tensor_types(path):
    return {t.name: t.tensor_type.name for t in gguf_reader(path).tensors}


def metadata(path):
    """The file's metadata as `key values...` lines: every key but the vocabulary arrays, the chat
    template (its rendering is recorded instead) and the general.* keys other than the architecture,
    the file type and the name (llama.cpp gives phi3 vocabularies their special tokens' rstrip
    attribute when the name contains "phi3" or "phi-3": src/llama-vocab.cpp)."""
    lines = []
    for k, f in gguf_reader(path).fields.items():
        if k.startswith("GGUF.") or k in ("tokenizer.chat_template", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                          "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
            continue
        if k.startswith("general.") and k not in ("general.architecture", "general.name", "general.file_type"):
            continue
        v = f.contents()
        vals = v if isinstance(v, list) else [v]
        lines.append(f"{k} " + " ".join(repr(x) if isinstance(x, float) else str(x) for x in vals))
    return lines


def swa_layers(meta, arch):
    """llama.cpp's windowed layers for the gemma architectures (src/models/gemma2.cpp, gemma3.cpp:
    load_swa_pattern with the default period 2 resp. 6 where the file has no
    `<arch>.attention.sliding_window_pattern`; layer il is windowed iff il % period < period - 1)."""
    period = {"gemma2": 2, "gemma3": 6}.get(arch)
    key = f"{arch}.attention.sliding_window"
    if period is None or key not in meta or any(k.startswith(f"{arch}.attention.sliding_window_pattern") for k in meta):
        return None
    n = int(meta[f"{arch}.block_count"][0])
    return [int(il % period < period - 1) for il in range(n)]


def chat_reference(exe, gguf_path, v):
    """llama.cpp's special tokens and end-of-generation set, and the file's chat template rendered
    by transformers' Jinja renderer and by libllama's built-in template detection."""
    chat_file = WORK / "chat.txt"
    chat_file.write_text("".join(f"{r} {c.encode('utf-8').hex()}\n" for r, c in CHAT))
    info = json.loads(run([exe, "vocab", gguf_path, chat_file], capture_output=True, text=True).stdout)
    lines = [
        f"bos {info['bos']}", f"eos {info['eos']}", f"eot {info['eot']}", f"pad {info['pad']}",
        f"add_bos {info['add_bos']}", f"add_eos {info['add_eos']}",
        "eog_tokens " + " ".join(map(str, info["eog"])),
        "chat_messages " + " ".join(f"{r} {c.encode('utf-8').hex()}" for r, c in CHAT),
    ]
    tmpl = template_text(v)
    if tmpl and info["has_template"]:
        from transformers.utils.chat_template_utils import render_jinja_template
        specials = {k: v.config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token") if k in v.config}
        rendered, _ = render_jinja_template(conversations=[[{"role": r, "content": c} for r, c in CHAT]],
                                            chat_template=tmpl, add_generation_prompt=True, **specials)
        lines.append("chat_specials " + " ".join(f"{k} {s.encode('utf-8').hex()}" for k, s in specials.items()))
        lines.append(f"chat_jinja_hex {rendered[0].encode('utf-8').hex()}")
        lines.append(f"chat_builtin_rc {info['chat_rc']}")
        lines.append(f"chat_builtin_hex {info['chat_hex']}")
    return lines


def reference(exe, gguf_path, name, m):
    """llama.cpp's logits (.npy) and greedy continuation, the file's metadata and tensor types, its
    special tokens and chat rendering (<name>.ref.txt, `key values...` lines)."""
    prompt_file = WORK / "prompt.txt"
    prompt_file.write_bytes(PROMPT.encode("utf-8"))
    raw = WORK / f"{name}.logits.f32"
    res = run([exe, "logits", gguf_path, prompt_file, raw, N_GEN], capture_output=True, text=True)
    info = json.loads(res.stdout)
    logits = np.fromfile(raw, dtype="<f4").reshape(len(info["prompt_tokens"]), info["n_vocab"])
    np.save(OUT / f"{name}.logits.npy", logits)
    lines = [
        "# llama.cpp (llama-cpp-python 0.3.36's vendored tree) on the CPU: f16 KV cache, the prompt in one batch,",
        "# logits of every prompt position in `logits` (float32 [prompt tokens, n_vocab]), then greedy decoding",
        "# one token at a time (argmax, lowest id on ties); greedy_top2: the two largest logits at each step.",
    ]
    if m is not None:
        lines += [f"# {n}" for n in m.notes]
        lines += [
            "# Then: the file's metadata keys (the vocabulary arrays and the chat template left out); llama.cpp's n_swa",
            "# (0: no windowed layers); llama.cpp's special tokens, add_bos/add_eos and end-of-generation tokens; the",
            "# chat_messages (role hex(content) pairs) rendered with the file's template, add_generation_prompt = true,",
            "# by transformers' Jinja renderer (trim_blocks, lstrip_blocks; chat_specials passed in) and by libllama's",
            "# llama_chat_apply_template (built-in templates only; rc -1 = not recognised).",
        ]
    lines += [
        f"file {gguf_path.name}",
        f"logits {name}.logits.npy",
        f"n_vocab {info['n_vocab']}",
        f"prompt_hex {PROMPT.encode('utf-8').hex()}",
        "prompt_tokens " + " ".join(map(str, info["prompt_tokens"])),
        "greedy_tokens " + " ".join(map(str, info["greedy_tokens"])),
        "greedy_top2 " + " ".join(f"{a!r} {b!r}" for a, b in info["greedy_top2"]),
    ]
    if m is not None:
        meta_lines = metadata(gguf_path)
        lines += meta_lines
        meta = {l.split(" ", 1)[0]: l.split(" ")[1:] for l in meta_lines}
        arch = meta["general.architecture"][0]
        lines.append(f"n_swa {info['n_swa']}")
        if (layers := swa_layers(meta, arch)) is not None:
            lines.append("swa_layers " + " ".join(map(str, layers)))
        lines += chat_reference(exe, gguf_path, m.vocab)
    types = tensor_types(gguf_path)
    lines += [f"tensor {k} {v}" for k, v in types.items()]
    (OUT / f"{name}.ref.txt").write_text("\n".join(lines) + "\n")
    return types


def tokens_reference(exe, gguf_path, v):
    """llama.cpp's tokenisation of TEST_TEXTS (and the vocabulary's chat texts) and every token's
    piece, as <vocab>.tokens.txt."""
    texts = TEST_TEXTS + [CHAT_TEXTS[i] for i in v.chat_texts]
    texts_file = WORK / "texts.hex"
    texts_file.write_text("".join(t.encode("utf-8").hex() + "\n" for t in texts))
    res = run([exe, "tokenize", gguf_path, texts_file], capture_output=True, text=True)
    rows = res.stdout.split("\n")
    lines = [
        "# llama.cpp's llama_tokenize of each `case` (hex UTF-8) in the four (add_special, parse_special) modes,",
        "# and every token's llama_token_to_piece: `piece id attr hex(special=true) hex(special=false)` (- = empty).",
        f"file {gguf_path.name}",
    ]
    modes = ["plain", "add_special", "parse_special", "add_and_parse_special"]
    for i, text in enumerate(texts):
        lines.append(f"case {text.encode('utf-8').hex() or '-'}")
        for j, mode in enumerate(modes):
            lines.append(f"{mode} {rows[4 * i + j]}".rstrip())
    res = run([exe, "pieces", gguf_path], capture_output=True, text=True)
    lines += [f"piece {line}" for line in res.stdout.splitlines()]
    (OUT / f"{v.name}.tokens.txt").write_text("\n".join(lines) + "\n")


def model_files(m):
    return [(f"{m.kind}-{q.lower()}", q) for q in m.quants]


def row_error(a, b):
    """The largest |a - b| of each row over that row's spread (max - min of b), worst row."""
    return float(np.max(np.abs(a - b).max(axis=1) / (b.max(axis=1) - b.min(axis=1))))


def transformers_check(exe, hf, f16, m):
    """Cross-check (printed, not a fixture): llama.cpp's F16 logits against transformers' f32 forward
    pass of the checkpoint, and how far the features the file must carry move transformers' logits
    (a config variant with a window past the prompt, without the soft-caps / RoPE scaling)."""
    import torch
    import transformers
    prompt_file = WORK / "prompt.txt"
    prompt_file.write_bytes(PROMPT.encode("utf-8"))
    raw = WORK / f"{m.kind}-f16.logits.f32"
    info = json.loads(run([exe, "logits", f16, prompt_file, raw, 1], capture_output=True, text=True).stdout)
    ours = np.fromfile(raw, dtype="<f4").reshape(len(info["prompt_tokens"]), info["n_vocab"])
    ids = torch.tensor([info["prompt_tokens"]])

    def hf_logits(**override):
        cfg = transformers.AutoConfig.from_pretrained(hf, **override)
        model = getattr(transformers, m.hf_class).from_pretrained(hf, config=cfg, attn_implementation="eager")
        with torch.no_grad():
            return model(ids).logits[0].float().numpy()[:, :ours.shape[1]]

    ref = hf_logits()
    print(f"CHECK {m.kind}: llama.cpp F16 vs transformers f32: {row_error(ours, ref):.2e} of the spread", flush=True)
    variants = {"sliding_window": {"sliding_window": 4096},
                "attn_logit_softcapping": {"attn_logit_softcapping": None},
                "final_logit_softcapping": {"final_logit_softcapping": None},
                "rope_scaling": {"rope_scaling": None},
                "rope_local_base_freq": {"rope_local_base_freq": m.config.get("rope_theta")}}
    for key, override in variants.items():
        if m.config.get(key) is not None:
            try:
                alt = hf_logits(**override)
                print(f"CHECK {m.kind}: transformers with {override}: {row_error(alt, ref):.2e} of the spread from transformers, "
                      f"{row_error(ours, alt):.2e} from llama.cpp", flush=True)
            except Exception as e:  # a variant the config class refuses is only not shown
                print(f"CHECK {m.kind}: with {override}: not run ({e})", flush=True)


def make_model(exe, corpus, m):
    hf = make_hf(corpus, m)
    f16 = WORK / f"{m.kind}-f16.gguf"
    convert(hf, f16, m.vocab.pre)
    if os.environ.get("FIXTURE_CHECK"):
        transformers_check(exe, hf, f16, m)
    for name, q in model_files(m):
        dst = OUT / f"{name}.gguf"
        if q == "F16":
            shutil.copy(f16, dst)
        else:
            quantize(exe, f16, dst, q)
        # The ref files of llama-tiny and qwen2-tiny keep their original form (no metadata section).
        reference(exe, dst, name, None if m.kind in ("llama-tiny", "qwen2-tiny") else m)
    if vocab_owner(m.vocab) is m:
        tokens_reference(exe, OUT / f"{model_files(m)[0][0]}.gguf", m.vocab)


def vocab_owner(v):
    """The model whose first file carries a vocabulary's tokenizer reference."""
    return next(m for m in MODELS if m.vocab is v)


def manifest():
    """manifest.txt from the specs and the files present: `model NAME FILE ARCH FTYPE REF VOCAB`
    and `vocab NAME FILE TOKENS` lines, prefixed `pending ` where the runner does not take them yet."""
    lines = ["# fixtures made by tools/make_model_fixtures.py",
             "# `pending model` / `pending vocab` lines: fixtures the runner does not take yet (an architecture it",
             "# does not implement, a vocabulary its tokenizer does not match), which the tests skip. The script",
             "# writes them so for architectures outside its RUNNER_ARCHS and names in its PENDING_*: edit those",
             "# there and rerun it, or drop the word `pending` here to match."]
    for m in MODELS:
        marks = []
        for name, q in model_files(m):
            f = OUT / f"{name}.gguf"
            if not f.exists():
                continue
            arch = gguf_reader(f).fields["general.architecture"].contents()
            marks.append("pending " if arch not in RUNNER_ARCHS or m.kind in PENDING_MODELS else "")
            lines.append(f"{marks[-1]}model {name} {f.name} {arch} {q} {name}.ref.txt {m.vocab.name}.tokens.txt")
        v = m.vocab
        if marks and vocab_owner(v) is m and (OUT / f"{v.name}.tokens.txt").exists():
            mark = "pending " if v.name in PENDING_VOCABS else ""
            lines.append(f"{mark}vocab {v.name} {model_files(m)[0][0]}.gguf {v.name}.tokens.txt")
    for v in VOCAB_ONLY:
        lines.append(f"vocab {v.name} {v.name}-vocab.gguf {v.name}.tokens.txt")
    (OUT / "manifest.txt").write_text("\n".join(lines) + "\n")


def main():
    """Arguments: the model kinds (and vocab-only names) to make; none: all of them; `manifest`:
    only rewrite manifest.txt from the files present."""
    wanted = set(sys.argv[1:])
    if wanted == {"manifest"}:
        return manifest()
    known = {m.kind for m in MODELS} | {v.name for v in VOCAB_ONLY}
    if wanted - known:
        sys.exit(f"unknown: {sorted(wanted - known)}; known: {sorted(known)}")
    WORK.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    exe = build_llama_ref()
    corpus = corpus_file()
    for m in MODELS:
        if not wanted or m.kind in wanted:
            make_model(exe, corpus, m)
    for v in VOCAB_ONLY:
        if not wanted or v.name in wanted:
            hf = make_vocab_only(corpus, v)
            vocab_file = OUT / f"{v.name}-vocab.gguf"
            convert(hf, vocab_file, v.pre, vocab_only=True)
            tokens_reference(exe, vocab_file, v)
    manifest()
    total = 0
    for f in sorted(OUT.iterdir()):
        total += f.stat().st_size
        print(f"{f.stat().st_size:>10}  {f.name}")
    print(f"{total:>10}  total")
    for m in MODELS:
        for name, _ in model_files(m):
            f = OUT / f"{name}.gguf"
            if f.exists():
                counts = {}
                for t in tensor_types(f).values():
                    counts[t] = counts.get(t, 0) + 1
                print(f"{f.name}: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
