#!/usr/bin/env python3
"""Tiny random-weight GGUF models made and evaluated by llama.cpp itself, for tests/model.rs and
tests/tokenizer.rs. CI does not run this: its outputs are committed under tests/data/models/.

What it makes (see tests/data/models/manifest.txt for the list it wrote):
  * llama-tiny: LlamaForCausalLM, hidden 256, intermediate 512, 2 layers, 4 heads / 2 KV heads
    (GQA), head_dim 64, llama3 rope scaling (so the converter writes `rope_freqs.weight`), untied
    output; a SentencePiece BPE tokenizer (byte fallback, digits split) trained on the repository's
    README.md and BENCHMARKS.md -> GGUF `tokenizer.ggml.model = llama`.
  * qwen2-tiny: Qwen2ForCausalLM, same dims, q/k/v biases, tied embeddings; a byte-level BPE
    (gpt2-style) tokenizer with Qwen2's pre-tokenizer regex trained on the same text ->
    `tokenizer.ggml.model = gpt2`, `tokenizer.ggml.pre = qwen2`.
  * bpe-llama3-vocab: vocabulary only (no weights), the byte-level BPE retrained with Llama 3's
    pre-tokenizer regex -> `tokenizer.ggml.pre = llama-bpe`; for the tokenizer tests only.
  Weights are converted with llama.cpp's own convert_hf_to_gguf.py (F16) and quantised with its
  own llama-quantize (Q8_0, Q4_K_M); the llama model is also kept in F16, qwen2 only quantised
  (keeps the committed fixtures near 10 MB). For each model file: llama.cpp's logits at every position of
  a fixed prompt (<name>.logits.npy, float32 [prompt tokens, vocab]) and a 32-token greedy
  continuation and the file's tensor types (<name>.ref.txt). For each vocabulary: llama.cpp's
  tokenisation of test texts in all four (add_special, parse_special) modes and every token's piece
  (<vocab>.tokens.txt). Text formats (`key values...` lines) so the Rust tests need no JSON crate.

The trained tokenizers have a custom vocabulary, so the converter's pre-tokenizer detection (a hash
of a known model's tokenisation) cannot name them: the converter is run with its
`get_vocab_base_pre` replaced by a function returning the pre-tokenizer the tokenizer was trained
with ("qwen2" or "llama-bpe"); everything else is the converter's own code.

Reproduce (CPU only; the llama.cpp build took 65 min wall, 9 min CPU, on a shared 2-core machine):
  mkdir -p /work/llama && cd /work/llama
  pip download llama-cpp-python==0.3.36 --no-deps --no-binary llama-cpp-python
  tar xzf llama_cpp_python-0.3.36.tar.gz
  pip install cmake ninja
  cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \\
        -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \\
        -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=ON
  nice cmake --build build -j2 --target llama-quantize llama-tokenize llama
  python3 -m venv venv
  venv/bin/pip install torch==2.11.0 numpy~=2.2.6 'sentencepiece>=0.1.98,<0.3.0' \\
        transformers==4.57.6 'protobuf>=4.21.0,<5.0.0' tokenizers safetensors
  cd <repo> && /work/llama/venv/bin/python tools/make_model_fixtures.py
Environment overrides: LLAMA_SRC (the vendored llama.cpp tree), LLAMA_BUILD (its cmake build dir),
FIXTURE_WORK (scratch dir, default /work/llama/fixtures-work).
This script compiles tools/llama_ref.cpp (logits / tokenisation / pieces through libllama) with g++.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "models"
LLAMA_SRC = Path(os.environ.get("LLAMA_SRC", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp"))
LLAMA_BUILD = Path(os.environ.get("LLAMA_BUILD", "/work/llama/build"))
WORK = Path(os.environ.get("FIXTURE_WORK", "/work/llama/fixtures-work"))
# Training text: fixed at this commit so a rerun trains the same vocabularies.
CORPUS_COMMIT = "558ac74"
CORPUS_FILES = ["README.md", "BENCHMARKS.md"]

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 512, 2, 4, 2, 64
VOCAB = 1000
SEED = 1234
N_GEN = 32
MODELS = [
    ("llama-tiny", lambda c: make_llama(c), None, ["F16", "Q8_0", "Q4_K_M"]),
    ("qwen2-tiny", lambda c: make_qwen2(c), "qwen2", ["Q8_0", "Q4_K_M"]),  # no F16: keeps the fixtures small
]
PROMPT = "The quick brown fox jumps over the lazy dog. Kernels run LLM inference on wgpu: 1234 tokens/s!"

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


def train_spm(corpus):
    import sentencepiece as spm
    prefix = WORK / "spm"
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(prefix), vocab_size=VOCAB, model_type="bpe",
        byte_fallback=True, character_coverage=0.9995, split_digits=True, add_dummy_prefix=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        max_sentence_length=1 << 16, num_threads=2, minloglevel=2)
    return Path(str(prefix) + ".model")


def train_bpe(corpus, pattern, vocab):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([str(corpus)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def randomise(model):
    """Weights with a spread that makes attention and logits non-trivial (std 0.1), norm weights
    around 1, biases non-zero: every tensor matters to the logits."""
    import torch
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


def make_llama(corpus):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = WORK / "llama-tiny-hf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    sp_model = train_spm(corpus)
    shutil.copy(sp_model, d / "tokenizer.model")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 256},
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, torch_dtype="float32")
    torch.manual_seed(SEED)
    model = randomise(LlamaForCausalLM(cfg))
    model.save_pretrained(d, safe_serialization=True)
    return d


def make_qwen2(corpus):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    d = WORK / "qwen2-tiny-hf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    tok = train_bpe(corpus, QWEN2_PAT, VOCAB)
    tok.save_pretrained(d)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=2048,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="float32")
    torch.manual_seed(SEED + 1)
    model = randomise(Qwen2ForCausalLM(cfg))
    model.save_pretrained(d, safe_serialization=True)
    return d


def make_llama3_vocab(corpus):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = WORK / "bpe-llama3-hf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    tok = train_bpe(corpus, LLAMA3_PAT, VOCAB)
    tok.save_pretrained(d)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
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


def tensor_types(path):
    sys.path.insert(0, str(LLAMA_SRC / "gguf-py"))
    import gguf
    r = gguf.GGUFReader(str(path))
    return {t.name: t.tensor_type.name for t in r.tensors}


def reference(exe, gguf_path, name):
    """llama.cpp's logits (.npy) and greedy continuation (<name>.ref.txt, `key values...` lines)."""
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
        f"file {gguf_path.name}",
        f"logits {name}.logits.npy",
        f"n_vocab {info['n_vocab']}",
        f"prompt_hex {PROMPT.encode('utf-8').hex()}",
        "prompt_tokens " + " ".join(map(str, info["prompt_tokens"])),
        "greedy_tokens " + " ".join(map(str, info["greedy_tokens"])),
        "greedy_top2 " + " ".join(f"{a!r} {b!r}" for a, b in info["greedy_top2"]),
    ]
    types = tensor_types(gguf_path)
    lines += [f"tensor {k} {v}" for k, v in types.items()]
    (OUT / f"{name}.ref.txt").write_text("\n".join(lines) + "\n")
    return types


def tokens_reference(exe, gguf_path, vocab_name):
    """llama.cpp's tokenisation of TEST_TEXTS and every token's piece, as <vocab>.tokens.txt."""
    texts_file = WORK / "texts.hex"
    texts_file.write_text("".join(t.encode("utf-8").hex() + "\n" for t in TEST_TEXTS))
    res = run([exe, "tokenize", gguf_path, texts_file], capture_output=True, text=True)
    rows = res.stdout.split("\n")
    lines = [
        "# llama.cpp's llama_tokenize of each `case` (hex UTF-8) in the four (add_special, parse_special) modes,",
        "# and every token's llama_token_to_piece: `piece id attr hex(special=true) hex(special=false)` (- = empty).",
        f"file {gguf_path.name}",
    ]
    modes = ["plain", "add_special", "parse_special", "add_and_parse_special"]
    for i, text in enumerate(TEST_TEXTS):
        lines.append(f"case {text.encode('utf-8').hex() or '-'}")
        for j, mode in enumerate(modes):
            lines.append(f"{mode} {rows[4 * i + j]}".rstrip())
    res = run([exe, "pieces", gguf_path], capture_output=True, text=True)
    lines += [f"piece {line}" for line in res.stdout.splitlines()]
    (OUT / f"{vocab_name}.tokens.txt").write_text("\n".join(lines) + "\n")


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    exe = build_llama_ref()
    corpus = corpus_file()
    # manifest.txt: `model NAME FILE ARCH FTYPE REF VOCAB` and `vocab NAME FILE TOKENS` lines.
    manifest = ["# fixtures made by tools/make_model_fixtures.py"]
    report = []

    for kind, maker, pre, quants in MODELS:
        hf = maker(corpus)
        f16 = WORK / f"{kind}-f16.gguf"
        convert(hf, f16, pre)
        for q in quants:
            name = f"{kind}-{q.lower()}"
            dst = OUT / f"{name}.gguf"
            if q == "F16":
                shutil.copy(f16, dst)
            else:
                quantize(exe, f16, dst, q)
            types = reference(exe, dst, name)
            manifest.append(f"model {name} {dst.name} {kind.split('-')[0]} {q} {name}.ref.txt {kind}.tokens.txt")
            counts = {}
            for t in types.values():
                counts[t] = counts.get(t, 0) + 1
            report.append(f"{dst.name}: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
        vocab_src = OUT / f"{kind}-{quants[0].lower()}.gguf"
        tokens_reference(exe, vocab_src, kind)
        manifest.append(f"vocab {kind} {vocab_src.name} {kind}.tokens.txt")

    hf = make_llama3_vocab(corpus)
    vocab_file = OUT / "bpe-llama3-vocab.gguf"
    convert(hf, vocab_file, "llama-bpe", vocab_only=True)
    tokens_reference(exe, vocab_file, "bpe-llama3")
    manifest.append(f"vocab bpe-llama3 {vocab_file.name} bpe-llama3.tokens.txt")

    (OUT / "manifest.txt").write_text("\n".join(manifest) + "\n")
    total = 0
    for f in sorted(OUT.iterdir()):
        total += f.stat().st_size
        print(f"{f.stat().st_size:>10}  {f.name}")
    print(f"{total:>10}  total")
    print("\n".join(report))


if __name__ == "__main__":
    main()
