#!/usr/bin/env python3
"""Merge our bench CSV (benches/kernels.rs) with the same-GPU peer results into one Markdown
table, and optionally rewrite the marked section of BENCHMARKS.md. Python 3 standard library only.

  python3 tools/combine_bench.py --ours bench.csv [more.csv ...] [--replace newer.csv ...] [--peers peers.csv] [--sdpa sdpa.csv|sdpa.txt]
      [--bench-log bench.txt] [--decode decode_step.txt ...] [--device TEXT] [--driver TEXT]
      [--date YYYY-MM-DD] [--out combined.md] [--update BENCHMARKS.md]

Inputs:
  --ours       CSV of `cargo bench --bench kernels -- --csv`: kernel,case,variant,bytes,copies,
               single_us,batched_us,gb_s,pct_copy,batched_gb_s,check_err (+ a `copy` row).
  --replace    bench CSV(s) of a later run: each of their rows replaces the row of the same
               (kernel, case, variant) in place (or is appended), and is marked † in the table.
  --peers      CSV of benches/peers/peers.py --csv: peer,n,k,group,single_us,batched_us,gb_s
               (+ a `torch_copy` row in newer runs).
  --sdpa       CSV of tools/bench_torch_sdpa.py --csv (peer,op,dtype,tokens,kv_len,heads,kv_heads,
               head_dim,single_us,gb_s,tflops) or its text output (older runs).
  --bench-log  stdout of the bench: the `adapter` and `driver` lines of the probe report give the
               device and driver of the header (--device / --driver override them).
  --decode     stdout of examples/decode_step (any number): one summary row each.

Matching (our case -> peer), on the shape fields parsed from the case name:
  int4_gemv n k g           -> int4pack_mm_g{g} (n, k)     torch int4 mat-vec, same group size
  int8_gemv n k             -> fp16_gemv_cublas (n, k)      cuBLAS fp16 GEMV (no int8 peer)
  q4k_gemv n k              -> int4pack_mm_g32 (n, k)       closest 4-bit peer (~4.5-5 bits/weight)
  attn_decode kv h d f16|f32 -> torch_sdpa decode float16|float32 (kv_len, heads, kv_heads, d)
  attn_prefill t h d f16|f32 -> torch_sdpa prefill float16|float32 (tokens, heads, kv_heads, d)
  tq_decode_attention len   -> torch_sdpa decode float16 (kv_len = len, heads, kv_heads, d)
  (float16 falls back to torch's bfloat16 row when the peer run has no float16 one)
Ratio = peer single µs / our single µs (> 1: ours is faster).
"""
import argparse
import csv
import datetime
import os
import re
import sys

BEGIN, END = "<!-- combined:begin -->", "<!-- combined:end -->"


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def fields(case):
    """`n=4096 k=4096 g=32 signed` -> {'n': '4096', 'k': '4096', 'g': '32'} plus bare words."""
    f = dict(re.findall(r"([A-Za-z_]+)=([^\s]+)", case))
    f["_words"] = set(w for w in case.split() if "=" not in w)
    return f


def heads(f):
    """`h=32/8` or `h=32 kvh=8` -> (32, 8)."""
    h = f.get("h", "")
    if "/" in h:
        a, b = h.split("/", 1)
        return int(a), int(b)
    if h and "kvh" in f:
        return int(h), int(f["kvh"])
    return None, None


def split_copy(records, field, name):
    """CSV records -> (records without the copy row, that row's gb_s): the copy row is the one
    whose `field` is `name`."""
    rows, copy = [], None
    for r in records:
        if r.get(field) == name:
            copy = num(r.get("gb_s"))
        else:
            rows.append(r)
    return rows, copy


def read_ours(paths):
    """Rows of one or more bench CSVs (a bench split over several runs); a case measured twice
    keeps its first row. The copy rate is the first CSV's that has one."""
    rows, copy, seen = [], None, set()
    for path in paths:
        with open(path, newline="") as fh:
            part, c = split_copy(csv.DictReader(fh), "kernel", "copy")
        copy = copy if copy is not None else c
        for r in part:
            key = (r.get("kernel"), r.get("case"), r.get("variant"))
            if key not in seen:
                seen.add(key)
                rows.append(r)
    return rows, copy


def replace_rows(rows, paths):
    """`rows` with each row of the CSVs at `paths` put in place of the row of the same case
    (appended when new), marked with `replaced`."""
    index = {(r.get("kernel"), r.get("case"), r.get("variant")): i for i, r in enumerate(rows)}
    for path in paths:
        with open(path, newline="") as fh:
            part, _ = split_copy(csv.DictReader(fh), "kernel", "copy")
        for r in part:
            r = dict(r, replaced="1")
            key = (r.get("kernel"), r.get("case"), r.get("variant"))
            if key in index:
                rows[index[key]] = r
            else:
                index[key] = len(rows)
                rows.append(r)
    return rows


def read_peers(path):
    if not path:
        return [], None
    with open(path, newline="") as fh:
        return split_copy(csv.DictReader(fh), "peer", "torch_copy")


def read_sdpa(path):
    """Rows as dicts with op, dtype, tokens, kv_len, heads, kv_heads, head_dim, single_us."""
    rows, copy = [], None
    if not path:
        return rows, copy
    with open(path) as fh:
        text = fh.read()
    if text.startswith("peer,"):
        return split_copy(csv.DictReader(text.splitlines()), "peer", "torch_copy")
    # Text output (older runs): the script's constants are heads 32, kv_heads 8, head_dim 128.
    pat = re.compile(r"^(decode|prefill)\s+torch\.(\w+)\s+(kv|t)=\s*(\d+)\s+([\d.]+) us")
    for line in text.splitlines():
        m = pat.match(line.strip())
        if m and "token-major" not in line:  # the strided-cache rows are not the matched peer
            op, dtype, _, n, t = m.groups()
            rows.append({"peer": "torch_sdpa", "op": op, "dtype": dtype, "tokens": "1" if op == "decode" else n,
                         "kv_len": n, "heads": "32", "kv_heads": "8", "head_dim": "128", "single_us": t})
        m = re.match(r"^copy:\s+([\d.]+) GB/s", line.strip())
        if m:
            copy = float(m.group(1))
    return rows, copy


def match(r, peers, sdpa):
    """(peer name, single µs, batched µs or None) for our row `r`, or None."""
    k, f = r["kernel"], fields(r["case"])

    def gemv_peer(name):
        for p in peers:
            if p["peer"] == name and p["n"] == f.get("n") and p["k"] == f.get("k"):
                return (name, num(p["single_us"]), num(p.get("batched_us")))
        return None

    if k in ("int4_gemv", "int4_gemv_q8") and "g" in f:
        return gemv_peer(f"int4pack_mm_g{f['g']}")
    if k == "int8_gemv":
        return gemv_peer("fp16_gemv_cublas")
    if k in ("q4k_gemv", "q4k_gemv_q8"):
        return gemv_peer("int4pack_mm_g32")

    def sdpa_peer(op, dtype, tokens, kv_len, h, kvh, d):
        # A 16-bit cache falls back to torch's bfloat16 row when a run has no float16 one.
        for dt in [dtype] + (["bfloat16"] if dtype == "float16" else []):
            for p in sdpa:
                if (p["op"], p["dtype"]) == (op, dt) and num(p["kv_len"]) == kv_len and num(p["tokens"]) == tokens \
                        and num(p["heads"]) == h and num(p["kv_heads"]) == kvh and num(p["head_dim"]) == d:
                    return (f"torch SDPA {dt}", num(p["single_us"]), num(p.get("batched_us")))
        return None

    h, kvh = heads(f)
    d = num(f.get("d"))
    dtype = "float16" if "f16" in f["_words"] else "float32"
    if k == "attn_decode" and "kv" in f:
        return sdpa_peer("decode", dtype, 1, num(f["kv"]), h, kvh, d)
    if k == "attn_prefill" and "t" in f:
        return sdpa_peer("prefill", dtype, num(f["t"]), num(f.get("kv", f["t"])), h, kvh, d)
    if k == "tq_decode_attention" and "len" in f:
        return sdpa_peer("decode", "float16", 1, num(f["len"]), h, kvh, d)
    return None


def device_info(log_path):
    device = driver = None
    if log_path and os.path.exists(log_path):
        with open(log_path, errors="replace") as fh:
            for line in fh:
                if line.startswith("adapter ") and device is None:
                    device = line.split(None, 1)[1].strip()
                elif line.startswith("driver ") and driver is None:
                    driver = line.split(None, 1)[1].strip()
    return device, driver


def decode_summary(path):
    """One row from an examples/decode_step stdout."""
    text = open(path, errors="replace").read()

    def grab(pat, default="—"):
        m = re.search(pat, text)
        return m.group(1) if m else default
    model = grab(r"model ([^:]+):")
    layers = grab(r"FFN \d+, (\d+) layers")
    lm = ", LM head" if re.search(r"Q4_K weights, LM head", text) else ""
    lm += ", int8 activations" if "activations: int8" in text else ""
    return [
        f"{model} ({layers} layers{lm})",
        grab(r"dispatches\s+(\d+)"),
        grab(r"([\d.]+) µs per dispatch \(new bind groups\)"),
        grab(r"([\d.]+) µs per dispatch \(BindCache"),
        grab(r"GPU time\s+(\d+) µs"),
        grab(r"tokens/s\s+([\d.]+) \(GPU"),
        grab(r"Q4_K -> ([\d.]+) GB/s"),
        grab(r"Q4_K -> [\d.]+ GB/s \(([\d.]+)% of copy\)"),
        "WRONG" if "WRONG" in text else ("ok" if re.search(r"check: layer 0 .*tol", text) else "not checked"),
    ]


def fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def build(args):
    ours, copy = read_ours(args.ours)
    ours = replace_rows(ours, args.replace)
    peers, peer_copy = read_peers(args.peers)
    sdpa, sdpa_copy = read_sdpa(args.sdpa)
    device, driver = device_info(args.bench_log)
    device = args.device or device or "unknown device"
    driver = args.driver or driver or "unknown driver"
    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    tc = peer_copy or sdpa_copy
    out = [
        f"Device: **{device}**, driver {driver}, {date}. Our copy kernel: "
        f"{fmt(copy, '.0f')} GB/s read+write; torch copy: {fmt(tc, '.0f')} GB/s. "
        "Generated by tools/combine_bench.py from "
        + ", ".join(os.path.basename(p) for p in [*args.ours, args.peers, args.sdpa] if p) + "."
        + ("" if not args.replace else " Rows marked † are from " + ", ".join(os.path.basename(p) for p in args.replace) + " (a later run on the same kind of GPU), in place of the first run's."),
        "",
        "| kernel | shape | variant | ours single µs | batch µs | GB/s | % copy | read ceiling single / batch µs | % of ceiling | peer | peer single / batch µs | peer ÷ ours |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    matched = 0
    for r in ours:
        s, b = num(r["single_us"]), num(r["batched_us"])
        p = match(r, peers, sdpa)
        if p:
            matched += 1
            name, ps, pb = p
            peer = f"{fmt(ps)} / {fmt(pb)}"
            ratio = f"{ps / s:.2f}" if ps and s else "—"
        else:
            name, peer, ratio = "—", "—", "—"
        g = num(r["gb_s"])
        # Read ceiling (bench CSVs with the read_* columns): a read-only kernel over the same bytes.
        rs, rb = num(r.get("read_single_us")), num(r.get("read_batched_us"))
        ceiling = f"{fmt(rs)} / {fmt(rb)}" if rs else "—"
        of_ceiling = f"{100 * rs / s:.0f}% / {100 * rb / b:.0f}%" if rs and rb and s and b else "—"
        mark = " †" if r.get("replaced") else ""
        out.append(f"| {r['kernel']} | {r['case']} | {r['variant']}{mark} | {fmt(s)} | {fmt(b)} | {fmt(g, '.0f' if g and g >= 100 else '.1f')} | "
                   f"{fmt(num(r['pct_copy']))}% | {ceiling} | {of_ceiling} | {name} | {peer} | {ratio} |")
    if args.decode:
        out += ["", "Decode step (examples/decode_step: every dispatch of the step in one submit):", "",
                "| model | dispatches | record µs/dispatch | with BindCache | GPU µs | tokens/s | weights GB/s | % copy | layer-0 check |",
                "|---|---|---|---|---|---|---|---|---|"]
        for path in args.decode:
            out.append("| " + " | ".join(decode_summary(path)) + " |")
    return "\n".join(out) + "\n", len(ours), matched


def update(path, table):
    text = open(path).read() if os.path.exists(path) else ""
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text and END in text:
        a, b = text.index(BEGIN), text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n## Combined table (ours and peers, one device run)\n\n" + block + "\n"
    with open(path, "w") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", required=True, nargs="+", help="bench CSV(s); several when the bench was split over runs")
    ap.add_argument("--replace", nargs="+", default=[], help="bench CSV(s) of a later run whose rows replace the same cases")
    ap.add_argument("--peers")
    ap.add_argument("--sdpa")
    ap.add_argument("--bench-log")
    ap.add_argument("--decode", action="append", default=[])
    ap.add_argument("--device")
    ap.add_argument("--driver")
    ap.add_argument("--date")
    ap.add_argument("--out")
    ap.add_argument("--update", help="rewrite the section between the combined:begin/end markers of this file")
    args = ap.parse_args()
    table, n, matched = build(args)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(table)
    if args.update:
        update(args.update, table)
    if not args.out and not args.update:
        sys.stdout.write(table)
    print(f"combine_bench: {n} rows of ours, {matched} matched to a peer", file=sys.stderr)


if __name__ == "__main__":
    main()
