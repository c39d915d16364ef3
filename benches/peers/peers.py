#!/usr/bin/env python3
"""Same-GPU peers for the GEMV benchmarks: torch fp16 GEMV (cuBLAS) and torch's int4
group-quantised mat-vec (`torch._weight_int4pack_mm`, its own packing), at the bench's shapes.

CUDA events, warm-up, weights rotated over > 512 MB so L2 cannot serve them; reports the median
of single calls and the per-call time of a back-to-back batch, plus a copy reference measured the
same way.   python3 benches/peers/peers.py [--csv out.csv]
The CSV has explicit n, k, group fields per peer row (group "-" when not grouped) and a last
`torch_copy` row with the copy bandwidth; tools/combine_bench.py matches rows on (n, k, group).
"""
import statistics
import sys

import torch

import gpu_busy

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]  # (n, k)
ROTATE_BYTES = 512 << 20


def time_calls(fns, reps=50):
    """Median single-call µs and batched per-call µs over `fns` (rotated). Every timed call or
    batch is queued behind ~1 ms of busy work (gpu_busy.py) so the clocks are working clocks."""
    busy = gpu_busy.shared()
    for i in range(3 * len(fns)):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    singles = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        busy.run()
        a.record()
        fns[i % len(fns)]()
        b.record()
        torch.cuda.synchronize()
        singles.append(a.elapsed_time(b) * 1e3)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    busy.run()
    a.record()
    for i in range(reps):
        fns[i % len(fns)]()
    b.record()
    torch.cuda.synchronize()
    return statistics.median(singles), a.elapsed_time(b) * 1e3 / reps


def main():
    dev = torch.device("cuda")
    rows = []
    src = torch.empty(1 << 28, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    s_copy, _ = time_calls([lambda: dst.copy_(src)], reps=20)
    copy_gbs = 2 * src.numel() * 4 / (s_copy * 1e3)
    print(f"torch copy: {copy_gbs:.0f} GB/s (1 GiB, read+write)")
    for n, k in SHAPES:
        wbytes = n * k * 2
        copies = max(1, -(-ROTATE_BYTES // wbytes))
        ws = [torch.randn(n, k, dtype=torch.float16, device=dev) for _ in range(copies)]
        x = torch.randn(k, 1, dtype=torch.float16, device=dev)
        fns = [lambda w=w: torch.mm(w, x) for w in ws]
        s, b = time_calls(fns)
        rows.append(("fp16_gemv_cublas", n, k, "-", s, b, (wbytes + 2 * (n + k)) / (s * 1e3)))
        del ws
        for g in (32, 128):
            qbytes = n * k // 2 + n * (k // g) * 4  # int4 codes + bf16 scale and zero per group
            copies = max(1, -(-ROTATE_BYTES // qbytes))
            packed, sz = [], []
            for _ in range(copies):
                w = torch.randint(0, 16, (n, k // 2), dtype=torch.uint8, device=dev)
                w = (w << 4 | torch.randint(0, 16, (n, k // 2), dtype=torch.uint8, device=dev))
                packed.append(torch.ops.aten._convert_weight_to_int4pack(w.to(torch.uint8), 8))
                sz.append(torch.rand(k // g, n, 2, dtype=torch.bfloat16, device=dev))
            xb = torch.randn(1, k, dtype=torch.bfloat16, device=dev)
            fns = [lambda p=p, z=z: torch.ops.aten._weight_int4pack_mm(xb, p, g, z) for p, z in zip(packed, sz)]
            s, b = time_calls(fns)
            rows.append((f"int4pack_mm_g{g}", n, k, g, s, b, qbytes / (s * 1e3)))
            del packed, sz
    print(f"{'peer':<20} {'n':>6} {'k':>6} {'single µs':>10} {'batch µs':>9} {'GB/s':>7} {'% copy':>7}")
    for name, n, k, g, s, b, gbs in rows:
        print(f"{name:<20} {n:>6} {k:>6} {s:>10.1f} {b:>9.1f} {gbs:>7.0f} {100 * gbs / copy_gbs:>6.1f}%")
    if "--csv" in sys.argv:
        with open(sys.argv[sys.argv.index("--csv") + 1], "w") as f:
            f.write("peer,n,k,group,single_us,batched_us,gb_s\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")
            f.write(f"torch_copy,-,-,-,{s_copy},,{copy_gbs}\n")


if __name__ == "__main__":
    main()
