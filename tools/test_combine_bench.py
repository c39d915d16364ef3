#!/usr/bin/env python3
"""Self-test of the llama.cpp column of tools/combine_bench.py (and of tools/llamacpp/parse_ops.py):
synthetic `test-backend-ops perf` lines -> parse_ops -> the matcher, against synthetic bench rows.
Plain python3, standard library only:

  python3 tools/test_combine_bench.py
"""
import argparse
import contextlib
import io
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "llamacpp")]
import combine_bench as cb  # noqa: E402
import parse_ops  # noqa: E402

# Console lines as test-backend-ops perf prints them (times made up so that every wrong pick differs).
MM = "MUL_MAT(type_a={t},type_b=f32,m={m},n={n},k={k},bs=[{b},1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0)"
FA = ("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv={kv},nb={nb},mask=1,sinks=0,max_bias=0.000000,"
      "logit_softcap=0.000000,prec=f32,type_K={t},type_V={t},permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,n_kv_max=0)")
CASES = [
    (MM.format(t="q4_K", m=4096, n=1, k=14336, b=1), 16.39),
    (MM.format(t="q4_K", m=4096, n=1, k=14336, b=8), 120.68),   # per matrix: 15.085
    (MM.format(t="q4_K", m=14336, n=1, k=4096, b=8), 147.35),   # the transposed shape: 18.42
    (MM.format(t="q8_0", m=4096, n=1, k=14336, b=8), 186.16),   # 23.27
    (MM.format(t="q8_0", m=4096, n=16, k=4096, b=1), 14.85),
    (MM.format(t="q4_K", m=4096, n=16, k=4096, b=1), 15.13),
    (MM.format(t="q4_K", m=4096, n=512, k=4096, b=1), 98.40),
    (MM.format(t="f16", m=4096, n=1, k=4096, b=1), 9.11),       # no 8/op case: the single one
    (FA.format(kv=4096, nb=1, t="f16"), 20.0),
    (FA.format(kv=4096, nb=1, t="q4_0"), 30.0),
    (FA.format(kv=4096, nb=1, t="q8_0"), 25.0),
    (FA.format(kv=512, nb=512, t="f16"), 40.0),
]


def console():
    lines = ["Backend 1/2: CUDA0", "  Device description: NVIDIA H100 80GB HBM3"]
    for case, us in CASES:
        lines.append(f"  {case}:  1000 runs -  {us:7.2f} us/run -  33.55 MFLOP/run - \x1b[1;34m  4.47 TFLOPS\x1b[0m")
    return "\n".join(lines) + "\n"


def ours(kernel, case, batched=10.0):
    return {"kernel": kernel, "case": case, "variant": "portable", "single_us": "12.0", "batched_us": str(batched),
            "gb_s": "100", "pct_copy": "3.3", "bytes": "1", "copies": "1", "batched_gb_s": "", "check_err": ""}


def check(ll, kernel, case, want):
    got = [(label, round(us, 2)) for label, us in cb.match_llamacpp(ours(kernel, case), ll)]
    assert got == want, f"{kernel} {case}: got {got}, want {want}"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        txt = os.path.join(tmp, "llamacpp_ops.txt")
        with open(txt, "w") as fh:
            fh.write(console())

        # parse_ops: one row per case; ggml m -> rows, k -> cols, n -> n; per matrix = us/run / bs[0].
        rows = list(parse_ops.rows_of(txt))
        assert len(rows) == len(CASES), rows
        r = rows[1]
        assert (r["type"], r["rows"], r["cols"], r["n"], r["matrices"], r["us_per_matrix"]) == ("q4_K", "4096", "14336", "1", 8, "15.09"), r
        fa = rows[8]
        assert (fa["type"], fa["rows"], fa["kv_heads"], fa["cols"], fa["kv_len"], fa["tokens"]) == ("f16", 32, "8", "128", "4096", "1"), fa

        # The CSV parse_ops writes and the console text read back the same.
        csv_path = os.path.join(tmp, "llamacpp_ops.csv")
        sys.argv = ["parse_ops.py", txt, "--csv", csv_path]
        parse_ops.main()
        from_csv, from_txt = cb.read_llamacpp([csv_path]), cb.read_llamacpp([txt])
        assert from_csv == from_txt, (from_csv[:2], from_txt[:2])
        ll = from_csv

        # GEMV: our n (output rows) = ggml m, our k = ggml k, ggml n = 1; the 8/op case wins, / 8.
        check(ll, "mm_gemv_q4_k", "n=4096 k=14336", [("(8/op)", 15.09)])
        check(ll, "mm_gemv_q4_k", "n=14336 k=4096", [("(8/op)", 18.42)])
        check(ll, "mm_gemv_q8_q4_k", "n=4096 k=14336", [("(8/op)", 15.09)])  # int8-activation twin
        check(ll, "q4k_gemv", "n=4096 k=14336", [("(8/op)", 15.09)])         # the older Q4_K kernel
        check(ll, "mm_gemv_q8_0", "n=4096 k=14336", [("(8/op)", 23.27)])     # q8_0 format, not "q8 of 0"
        check(ll, "mm_gemv_q8_q8_0", "n=4096 k=14336", [("(8/op)", 23.27)])
        check(ll, "mm_gemv_f16", "n=4096 k=4096", [("", 9.11)])              # only the 1-matrix case
        check(ll, "mm_gemv_q8_0", "n=14336 k=4096", [])                      # no such llama.cpp case
        # GEMM: our m (activation rows) = ggml n.
        check(ll, "mm_gemm_q4_k", "m=16 n=4096 k=4096", [("", 15.13)])
        check(ll, "mm_gemm_q4_k", "m=512 n=4096 k=4096", [("", 98.40)])
        check(ll, "mm_gemm_q8_0", "m=16 n=4096 k=4096", [("", 14.85)])
        check(ll, "mm_gemm_q8_q4_k", "m=16 n=4096 k=4096", [("", 15.13)])  # int8 GEMM of a few rows
        check(ll, "mm_gemm_q8_q8_0", "m=16 n=4096 k=4096", [("", 14.85)])
        check(ll, "mm_gemm_q4_k", "m=128 n=4096 k=4096", [])
        # Attention: f16 KV only; TurboQuant against q4_0 and q8_0 KV.
        check(ll, "attn_decode", "kv=4096 h=32/8 d=128 neox yarn f16 attend-only", [("", 20.0)])
        check(ll, "attn_decode", "kv=4096 h=32/8 d=128 neox yarn f16", [("", 20.0)])
        check(ll, "attn_decode", "kv=4096 h=32/8 d=128 neox yarn f32", [])
        check(ll, "attn_decode", "kv=4096 h=32/4 d=128 neox yarn f16", [])   # other KV heads
        check(ll, "attn_decode", "kv=16384 h=32/8 d=128 neox yarn f16", [])
        check(ll, "attn_prefill", "t=512 off=0 kv=512 h=32/8 d=128 neox yarn f16 flops=2.152e9", [("", 40.0)])
        check(ll, "attn_prefill", "t=512 off=0 kv=512 h=32/8 d=128 neox yarn f32 flops=2.152e9", [])
        check(ll, "tq_decode_attention", "h=32 kvh=8 d=128 cap=4096 Global len=4096", [("q4_0", 30.0), ("q8_0", 25.0)])
        check(ll, "int4_gemv", "n=4096 k=14336 g=32 signed", [])

        # Cells: the ratio is llama.cpp µs / our batch µs.
        assert cb.llamacpp_cells([("(8/op)", 15.085)], 27.56) == ("15.09 (8/op)", "0.55")
        assert cb.llamacpp_cells([("q4_0", 30.0), ("q8_0", 25.0)], 50.0) == ("q4_0 30.00 / q8_0 25.00", "0.60 / 0.50")
        assert cb.llamacpp_cells([], 10.0) == ("—", "—")

        # The whole table: two more columns with --llamacpp, none without.
        bench = os.path.join(tmp, "bench.csv")
        with open(bench, "w") as fh:
            fh.write("kernel,case,variant,bytes,copies,single_us,batched_us,gb_s,pct_copy,batched_gb_s,check_err\n"
                     "mm_gemv_q4_k,n=4096 k=14336,portable,1,1,35.84,27.56,900,30,1200,0\n"
                     "int4_gemv,n=4096 k=14336 g=32 signed,portable,1,1,32.4,27.2,1133,37.5,1300,0\n")
        for extra, cols in (([], 12), (["--llamacpp", csv_path], 14)):
            args = argparse.Namespace(ours=[bench], replace=[], peers=None, sdpa=None, llamacpp=extra[1:], bench_log=None,
                                      decode=[], device="test", driver="test", date="2026-01-01")
            with contextlib.redirect_stderr(io.StringIO()):
                table, n, _, ll_matched = cb.build(args)
            body = [line for line in table.splitlines() if line.startswith("| mm_gemv_q4_k") or line.startswith("| int4_gemv")]
            assert len(body) == 2 and all(line.count("|") == cols + 1 for line in body), body
            if extra:
                assert body[0].endswith("| 15.09 (8/op) | 0.55 |") and body[1].endswith("| — | — |"), body
                assert ll_matched == 1
    print("test_combine_bench: ok")


if __name__ == "__main__":
    main()
