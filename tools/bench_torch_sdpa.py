#!/usr/bin/env python3
"""torch scaled_dot_product_attention on the attention bench shapes, for BENCHMARKS.md next to
`cargo run --release --example attention -- sweep`.

Usage:  python3 tools/bench_torch_sdpa.py [--csv out.csv]     (needs torch with CUDA)

Prefill: 1 sequence, heads 32, kv_heads 8 (GQA), head_dim 128, causal, tokens 512 / 2048;
TFLOP/s counts the causal half: 4 * sum_t (t + 1) * heads * head_dim.
Decode: one query token over kv 4096 / 16384 / 32768 cached keys; GB/s counts K and V read once.
RoPE is not included (torch has none built in); our prefill fuses it.
With --csv, also writes one row per measurement with explicit fields (read by
tools/combine_bench.py): peer,op,dtype,tokens,kv_len,heads,kv_heads,head_dim,single_us,gb_s,tflops.
"""
import sys

import os

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benches", "peers"))
import gpu_busy  # noqa: E402

H, KVH, D = 32, 8, 128
dev = "cuda"


def timed(fn, reps=50):
    """(median single-call µs, per-call µs of `reps` back-to-back calls). Each timed call or batch
    is queued behind ~1 ms of busy work (benches/peers/gpu_busy.py) so clocks are working clocks."""
    busy = gpu_busy.shared()
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        busy.run()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)  # us
    times.sort()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    busy.run()
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return times[len(times) // 2], a.elapsed_time(b) * 1e3 / reps


def sdpa(q, k, v, causal):
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    except TypeError:  # older torch: expand the KV heads
        g = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=causal)


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    n = 1 << 28
    src = torch.empty(n, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    t, tb = timed(lambda: dst.copy_(src), 20)
    print(f"copy: {2 * 4 * n / (t * 1e3):.1f} GB/s (read + write)")
    rows = [("torch_copy", "copy", "float32", "", "", "", "", "", t, 2 * 4 * n / (t * 1e3), "", tb)]
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for kv in (4096, 16384, 32768):
            # caches rotated over >= 256 MB so the timed one is not served from L2 (60 MB)
            gb = 2 * kv * KVH * D * torch.finfo(dtype).bits / 8
            sets = [(torch.randn(1, H, 1, D, dtype=dtype, device=dev),
                     torch.randn(1, KVH, kv, D, dtype=dtype, device=dev),
                     torch.randn(1, KVH, kv, D, dtype=dtype, device=dev)) for _ in range(max(4, -(-(256 << 20) // int(gb))))]
            i = [0]

            def step():
                q, k, v = sets[i[0] % len(sets)]
                i[0] += 1
                sdpa(q, k, v, False)
            t, tb = timed(step)
            print(f"decode  {str(dtype):15} kv={kv:6}  {t:9.1f} us  {gb / (t * 1e3):8.1f} GB/s  (batch {tb:.1f} us)")
            rows.append(("torch_sdpa", "decode", str(dtype).replace("torch.", ""), 1, kv, H, KVH, D, t, gb / (t * 1e3), "", tb))
            if dtype == torch.float32:
                continue
            # The same decode over a token-major cache [kv, KVH, D] (wgkernels' and llama.cpp's
            # layout): K/V passed as strided views, so each head's rows are 256 B apart by KVH * D.
            sets = [(q, k.transpose(1, 2).contiguous().transpose(1, 2), v.transpose(1, 2).contiguous().transpose(1, 2)) for q, k, v in sets]
            i[0] = 0
            t, tb = timed(step)
            print(f"decode  {str(dtype):15} kv={kv:6}  {t:9.1f} us  {gb / (t * 1e3):8.1f} GB/s  (batch {tb:.1f} us)  token-major cache")
            rows.append(("torch_sdpa", "decode_token_major", str(dtype).replace("torch.", ""), 1, kv, H, KVH, D, t, gb / (t * 1e3), "", tb))
        for tokens in (512, 2048):
            q = torch.randn(1, H, tokens, D, dtype=dtype, device=dev)
            k = torch.randn(1, KVH, tokens, D, dtype=dtype, device=dev)
            v = torch.randn(1, KVH, tokens, D, dtype=dtype, device=dev)
            t, tb = timed(lambda: sdpa(q, k, v, True), 20)
            flops = 4 * (tokens * (tokens + 1) / 2) * H * D
            print(f"prefill {str(dtype):15} t={tokens:5}  {t:9.1f} us  {flops / (t * 1e6):8.2f} TFLOP/s  (batch {tb:.1f} us)")
            rows.append(("torch_sdpa", "prefill", str(dtype).replace("torch.", ""), tokens, tokens, H, KVH, D, t, "", flops / (t * 1e6), tb))
    if "--csv" in sys.argv:
        with open(sys.argv[sys.argv.index("--csv") + 1], "w") as f:
            f.write("peer,op,dtype,tokens,kv_len,heads,kv_heads,head_dim,single_us,gb_s,tflops,batched_us\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")


if __name__ == "__main__":
    main()
