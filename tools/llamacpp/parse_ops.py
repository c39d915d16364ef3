#!/usr/bin/env python3
"""Turn `test-backend-ops perf` console output (peer.sh's llamacpp_ops.txt) into a CSV with one row
per case: op,type,rows,cols,n,matrices,kv_len,tokens,us_per_run,us_per_matrix,kv_heads. Standard
library only.

  python3 parse_ops.py llamacpp_ops.txt [--csv out.csv]
MUL_MAT: type = type_a, rows = m (output rows), cols = k, n = activation columns, matrices = bs[0]*bs[1]
(eight matrices per op keep the weights out of L2; us_per_matrix = us_per_run / matrices).
FLASH_ATTN_EXT: type = type_K (type_KV in older llama.cpp), kv_len = kv, tokens = nb, rows = query heads
(nh * nr23[0]), kv_heads = nh, cols = hsk.
us_per_run is test-backend-ops' time per op: the op repeated many times in one graph, wall time / count.
"""
import argparse
import csv
import re
import sys

LINE = re.compile(r"^\s*(\w+)\((.*)\):\s+(\d+) runs -\s+([\d.]+) us/run")
FIELDS = ["op", "type", "rows", "cols", "n", "matrices", "kv_len", "tokens", "us_per_run", "us_per_matrix", "kv_heads"]


def params(text):
    """`a=1,bs=[8,1],b=x` -> {'a': '1', 'bs': [8, 1], 'b': 'x'}."""
    out = {}
    for key, val in re.findall(r"(\w+)=(\[[^\]]*\]|[^,]*)", text):
        out[key] = [int(v) for v in val[1:-1].split(",") if v] if val.startswith("[") else val
    return out


def rows_of(path):
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        op, p, us = m.group(1), params(m.group(2)), float(m.group(4))
        row = dict.fromkeys(FIELDS, "")
        row.update(op=op, us_per_run=f"{us:.2f}")
        if op == "MUL_MAT":
            bs = p.get("bs", [1, 1])
            mats = bs[0] * bs[1]
            row.update(type=p["type_a"], rows=p["m"], cols=p["k"], n=p["n"], matrices=mats, us_per_matrix=f"{us / mats:.2f}")
        elif op == "FLASH_ATTN_EXT":
            nr = p.get("nr23", [1, 1])
            row.update(type=p.get("type_K", p.get("type_KV", "")), rows=int(p["nh"]) * nr[0], kv_heads=p["nh"], cols=p["hsk"],
                       kv_len=p["kv"], tokens=p["nb"], matrices=1, us_per_matrix=f"{us:.2f}")
        else:
            continue
        yield row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("txt")
    ap.add_argument("--csv")
    a = ap.parse_args()
    out = open(a.csv, "w", newline="") if a.csv else sys.stdout
    w = csv.DictWriter(out, FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows_of(a.txt):
        w.writerow(r)


if __name__ == "__main__":
    main()
