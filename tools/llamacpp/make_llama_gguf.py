#!/usr/bin/env python3
"""Write a random-weight GGUF of a given shape with gguf-py, for timing (llama.cpp's llama-bench
and our model_bench read the same file).

  python3 make_llama_gguf.py OUT.gguf [--arch llama|qwen2|qwen3|gemma2|gemma3 --layers 32 --dim 4096
      --ffn 14336 --heads 32 --kv-heads 8 --head-dim D --vocab 128256 --window W --tied
      --mix q4_k|q4_k_m]

--arch: the block's tensors and keys: qwen2 adds q/k/v biases, qwen3 per-head q/k norms, gemma2
post-attention/post-FFN norms, soft-caps (50 / 30) and a sliding window (--window, default 4096),
gemma3 gemma2's block with q/k norms, no soft-caps and a window of 1024 by default.

--mix q4_k: every matrix Q4_K (token_embd and output too), norms F32.
--mix q4_k_m: as llama.cpp's Q4_K_M recipe lays types out: output.weight and the attn_v / ffn_down of
every other layer Q6_K, the rest Q4_K.
Blocks are random bytes with their f16 scale fields set to small finite values, so every weight is
finite. The vocabulary is a SentencePiece-style list (<unk>, <s>, </s>, the 256 byte tokens, then
filler pieces) so that llama.cpp's tokenizer loads. Needs numpy and gguf-py (PYTHONPATH=.../gguf-py).
"""
import argparse

import numpy as np
import gguf

Q4K, Q6K = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K


def random_blocks(rng, rows, cols, qtype):
    """Random valid blocks for a [rows, cols] matrix, as a uint8 array [rows, bytes per row]."""
    block_weights, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    assert cols % block_weights == 0
    nb = cols // block_weights
    blocks = rng.integers(0, 256, size=(rows, nb, block_bytes), dtype=np.uint8)
    small = np.frombuffer(np.float16(2.0 ** -12).tobytes(), dtype=np.uint8)
    if qtype == Q4K:  # d and dmin first
        blocks[:, :, 0:2] = small
        blocks[:, :, 2:4] = small
    else:  # Q6_K: d last
        blocks[:, :, block_bytes - 2:] = small
    return blocks.reshape(rows, nb * block_bytes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--mix", choices=["q4_k", "q4_k_m"], default="q4_k")
    ap.add_argument("--arch", choices=["llama", "qwen2", "qwen3", "gemma2", "gemma3"], default="llama")
    ap.add_argument("--head-dim", type=int, default=0)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--tied", action="store_true", help="no output.weight (logits from token_embd)")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    hd = a.head_dim or a.dim // a.heads
    gemma = a.arch.startswith("gemma")
    w = gguf.GGUFWriter(a.out, a.arch)
    w.add_name(f"random {a.arch}")
    w.add_block_count(a.layers)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.dim)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(10000.0 if a.arch == "gemma2" else 1000000.0 if a.arch != "llama" else 500000.0)
    w.add_layer_norm_rms_eps(1e-6 if a.arch != "llama" else 1e-5)
    if gemma:
        w.add_sliding_window(a.window or (4096 if a.arch == "gemma2" else 1024))
    if a.arch == "gemma2":
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
    w.add_file_type(15 if a.mix == "q4_k_m" else 14)  # MOSTLY_Q4_K_M / MOSTLY_Q4_K_S
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    pieces += [f"\u2581t{i}" for i in range(a.vocab - len(pieces))]
    types += [1] * (a.vocab - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores([-float(i) for i in range(a.vocab)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def mat(name, rows, cols, qtype=Q4K):
        w.add_tensor(name, random_blocks(rng, rows, cols, qtype), raw_dtype=qtype)

    def norm(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", a.vocab, a.dim)
    q, kv = a.heads * hd, a.kv_heads * hd
    for i in range(a.layers):
        hi = Q6K if (a.mix == "q4_k_m" and i % 2 == 0) else Q4K
        norm(f"blk.{i}.attn_norm.weight", a.dim)
        mat(f"blk.{i}.attn_q.weight", q, a.dim)
        mat(f"blk.{i}.attn_k.weight", kv, a.dim)
        mat(f"blk.{i}.attn_v.weight", kv, a.dim, hi)
        if a.arch == "qwen2":
            for t, n in (("q", q), ("k", kv), ("v", kv)):
                w.add_tensor(f"blk.{i}.attn_{t}.bias", np.zeros(n, dtype=np.float32))
        if a.arch in ("qwen3", "gemma3"):
            norm(f"blk.{i}.attn_q_norm.weight", hd)
            norm(f"blk.{i}.attn_k_norm.weight", hd)
        mat(f"blk.{i}.attn_output.weight", a.dim, q)
        if gemma:
            norm(f"blk.{i}.post_attention_norm.weight", a.dim)
            norm(f"blk.{i}.post_ffw_norm.weight", a.dim)
        norm(f"blk.{i}.ffn_norm.weight", a.dim)
        mat(f"blk.{i}.ffn_gate.weight", a.ffn, a.dim)
        mat(f"blk.{i}.ffn_up.weight", a.ffn, a.dim)
        mat(f"blk.{i}.ffn_down.weight", a.dim, a.ffn, hi)
    norm("output_norm.weight", a.dim)
    if not a.tied:
        mat("output.weight", a.vocab, a.dim, Q6K if a.mix == "q4_k_m" else Q4K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
