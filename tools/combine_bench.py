#!/usr/bin/env python3
"""Merge our bench CSV (benches/kernels.rs) with the same-GPU peer results into one Markdown
table, and optionally rewrite the marked section of BENCHMARKS.md. Python 3 standard library only.

  python3 tools/combine_bench.py --ours bench.csv [more.csv ...] [--replace newer.csv ...] [--peers peers.csv] [--sdpa sdpa.csv|sdpa.txt]
      [--llamacpp llamacpp_ops.csv|llamacpp_ops.txt ...] [--bench-log bench.txt] [--decode decode_step.txt ...]
      [--device TEXT] [--driver TEXT] [--date YYYY-MM-DD] [--out combined.md] [--update BENCHMARKS.md]

Inputs:
  --ours       CSV of `cargo bench --bench kernels -- --csv`: kernel,case,variant,bytes,copies,
               single_us,batched_us,gb_s,pct_copy,batched_gb_s,check_err (+ a `copy` row).
  --replace    bench CSV(s) of a later run: each of their rows replaces the row of the same
               (kernel, case, variant) in place (or is appended), and is marked † in the table.
  --peers      CSV of benches/peers/peers.py --csv: peer,n,k,group,single_us,batched_us,gb_s
               (+ a `torch_copy` row in newer runs).
  --sdpa       CSV of tools/bench_torch_sdpa.py --csv (peer,op,dtype,tokens,kv_len,heads,kv_heads,
               head_dim,single_us,gb_s,tflops) or its text output (older runs).
  --llamacpp   tools/llamacpp/parse_ops.py CSV(s) of llama.cpp's `test-backend-ops perf` (CUDA), or the
               console output itself (parsed with parse_ops.py); several files are concatenated.
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

llama.cpp columns (--llamacpp): "llama.cpp µs" and "llama.cpp ÷ ours" = llama.cpp µs / our BATCH µs
(>= 1: ours is faster). test-backend-ops perf puts the op n times into one graph and divides the
graph's wall time by n: back-to-back ops, like our batch column, not a lone submit like our single one.
ggml MUL_MAT names its dims differently from our cases: ggml m = output rows (our n), ggml k = inner
dim (our k), ggml n = activation columns (our m; 1 for a GEMV). The ggml type is our format name up
to case (q4_k = q4_K, q8_0 = q8_0, bf16 = bf16, ...).
  mm_gemv_<fmt> n=N k=K, mm_gemv_q8_<fmt> n=N k=K  (mm_gemv_q8_0 is <fmt> = q8_0; mm_gemv_q8_q8_0 its q8 twin)
                  -> MUL_MAT type_a=<fmt> m=N k=K n=1 (the int8-activation GEMV too; for quantized
                     formats llama.cpp's CUDA mat-vec also quantizes x to 8 bits)
  q4k_gemv / q4k_gemv_q8 n=N k=K -> the same with type_a=q4_K
  mm_gemm_<fmt> m=M n=N k=K, mm_gemm_q8_<fmt> m=M n=N k=K (q4k_gemm: q4_K)
                  -> MUL_MAT type_a=<fmt> m=N k=K n=M (mm_gemm_q8_<fmt>: the int8-activation GEMM
                     of a few rows, its row timing quantisation + GEMM, as llama.cpp's small-n
                     MUL_MAT quantizes x too; mm_gemm_q8_0 is <fmt> = q8_0 as for the GEMVs)
  Of the cases with that type and shape, the one with the most matrices per op wins (bs=[8,1]: 8
  matrices, whose 8 weight copies do not fit in L2, as our rotated copies do not), and its time is
  per matrix: us/run / 8, shown as "(8/op)". Without one, the single-matrix case's us/run.
  attn_decode kv=L h=H/G d=D f16 [attend-only]
                  -> FLASH_ATTN_EXT type_K=f16, kv=L, nb=1, nh=G, nh*nr23[0]=H, hsk=D (its time covers
                     attention only; our rows without attend-only also rotate and append)
  attn_prefill t=T kv=L h=H/G d=D f16
                  -> FLASH_ATTN_EXT type_K=f16, kv=L, nb=T, nh=G, nh*nr23[0]=H, hsk=D. Its mask is
                     random (test-backend-ops fills it with noise and some -inf blocks), not causal,
                     so llama.cpp scores every key: about twice the work of our causal case.
  tq_decode_attention h=H kvh=G d=D len=L
                  -> FLASH_ATTN_EXT type_K=q4_0 and type_K=q8_0 (both shown, "q4_0 a / q8_0 b", with a
                     ratio each), kv=L, nb=1, nh=G, nh*nr23[0]=H, hsk=D
  f32 KV caches (attn_decode/attn_prefill ... f32) and our own formats (int4_*, int8_*) have no
  llama.cpp case: "—". The kv_heads check is skipped for CSVs written before parse_ops had that column.
Caveat: llama.cpp's op reruns on the same tensors, so inputs smaller than L2 (50 MB on an H100) can be
served from L2 there, while ours rotate copies: a 4096x4096 GEMM's weights in any format but f32, the
f16 K+V at kv 4096 (17 MB), the q4_0 K+V at every length (38 MB at 32768), the q8_0 K+V up to 16384.
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


def read_llamacpp(paths):
    """Rows of parse_ops.py CSVs, or of test-backend-ops console outputs (parsed here), concatenated."""
    rows = []
    for path in paths:
        with open(path, errors="replace") as fh:
            text = fh.read()
        if text.startswith("op,"):
            rows += list(csv.DictReader(text.splitlines()))
        else:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "llamacpp"))
            import parse_ops
            rows += [{k: str(v) for k, v in r.items()} for r in parse_ops.rows_of(path)]
    return rows


def match_llamacpp(r, ll):
    """[(label, llama.cpp µs)] for our row `r` (the rules in the module docstring), or []."""
    k, f = r["kernel"], fields(r["case"])

    def mul_mat(ggml_type, rows, cols, n):
        same = [x for x in ll if x["op"] == "MUL_MAT" and x["type"].lower() == ggml_type
                and num(x["rows"]) == rows and num(x["cols"]) == cols and num(x["n"]) == n]
        if not same:
            return []
        best = max(same, key=lambda x: num(x["matrices"]) or 1)  # most matrices per op; first on ties
        mats = int(num(best["matrices"]) or 1)
        us = num(best["us_per_run"]) / mats
        return [(f"({mats}/op)" if mats > 1 else "", us)]

    def flash(kv_type, tokens, kv_len, h, kvh, d, label=""):
        for x in ll:
            if x["op"] == "FLASH_ATTN_EXT" and x["type"].lower() == kv_type and num(x["tokens"]) == tokens \
                    and num(x["kv_len"]) == kv_len and num(x["rows"]) == h and num(x["cols"]) == d \
                    and (not x.get("kv_heads") or num(x["kv_heads"]) == kvh):
                return [(label, num(x["us_per_run"]))]
        return []

    # Format names are letters, digits and an optional _suffix (f16, bf16, q8_0, q4_k), so
    # mm_gemv_q8_0 is the f32-activation GEMV of q8_0 and mm_gemv_q8_q8_0 its int8-activation twin.
    gemv = re.fullmatch(r"mm_gemv_(?:q8_)?([a-z]+[0-9]+(?:_[0-9a-z])?)", k)
    gemm = re.fullmatch(r"mm_gemm_(?:q8_)?([a-z]+[0-9]+(?:_[0-9a-z])?)", k)
    n, kk = num(f.get("n")), num(f.get("k"))
    if gemv and n and kk:
        return mul_mat(gemv.group(1), n, kk, 1)
    if k in ("q4k_gemv", "q4k_gemv_q8") and n and kk:
        return mul_mat("q4_k", n, kk, 1)
    if (gemm or k == "q4k_gemm") and n and kk and "m" in f:
        return mul_mat(gemm.group(1) if gemm else "q4_k", n, kk, num(f["m"]))

    h, kvh = heads(f)
    d = num(f.get("d"))
    if k == "attn_decode" and "kv" in f and "f16" in f["_words"]:
        return flash("f16", 1, num(f["kv"]), h, kvh, d)
    if k == "attn_prefill" and "t" in f and "f16" in f["_words"]:
        return flash("f16", num(f["t"]), num(f.get("kv", f["t"])), h, kvh, d)
    if k == "tq_decode_attention" and "len" in f:
        return flash("q4_0", 1, num(f["len"]), h, kvh, d, "q4_0") + flash("q8_0", 1, num(f["len"]), h, kvh, d, "q8_0")
    return []


def llamacpp_cells(matches, ours_batch):
    """The two table cells ("llama.cpp µs", "llama.cpp ÷ ours") of a row's matches: one value, or
    one per match joined by " / " (TurboQuant: "q4_0 a / q8_0 b")."""
    if not matches:
        return "—", "—"
    if len(matches) == 1:
        label, us = matches[0]
        times = f"{us:.2f} {label}".strip()
    else:
        times = " / ".join(f"{label} {us:.2f}" for label, us in matches)
    ratios = " / ".join(f"{us / ours_batch:.2f}" if ours_batch else "—" for _, us in matches)
    return times, ratios


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
    ll = read_llamacpp(args.llamacpp)
    device, driver = device_info(args.bench_log)
    device = args.device or device or "unknown device"
    driver = args.driver or driver or "unknown driver"
    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    tc = peer_copy or sdpa_copy
    out = [
        f"Device: **{device}**, driver {driver}, {date}. Our copy kernel: "
        f"{fmt(copy, '.0f')} GB/s read+write; torch copy: {fmt(tc, '.0f')} GB/s. "
        "Generated by tools/combine_bench.py from "
        + ", ".join(os.path.basename(p) for p in [*args.ours, args.peers, args.sdpa, *args.llamacpp] if p) + "."
        + ("" if not args.replace else " Rows marked † are from " + ", ".join(os.path.basename(p) for p in args.replace) + " (a later run on the same kind of GPU), in place of the first run's.")
        + ("" if not args.llamacpp else " llama.cpp: CUDA backend, `test-backend-ops perf`, time per op of back-to-back ops"
           " (per matrix where an op holds several, \"(8/op)\"); \"llama.cpp ÷ ours\" is against our batch µs (≥ 1: ours is faster)."),
        "",
        "| kernel | shape | variant | ours single µs | batch µs | GB/s | % copy | read ceiling single / batch µs | % of ceiling | peer | peer single / batch µs | peer ÷ ours |"
        + (" llama.cpp µs | llama.cpp ÷ ours |" if args.llamacpp else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.llamacpp else ""),
    ]
    matched = ll_matched = 0
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
        line = (f"| {r['kernel']} | {r['case']} | {r['variant']}{mark} | {fmt(s)} | {fmt(b)} | {fmt(g, '.0f' if g and g >= 100 else '.1f')} | "
                f"{fmt(num(r['pct_copy']))}% | {ceiling} | {of_ceiling} | {name} | {peer} | {ratio} |")
        if args.llamacpp:
            lm = match_llamacpp(r, ll)
            ll_matched += bool(lm)
            line += " {} | {} |".format(*llamacpp_cells(lm, b))
        out.append(line)
    if args.decode:
        out += ["", "Decode step (examples/decode_step: every dispatch of the step in one submit):", "",
                "| model | dispatches | record µs/dispatch | with BindCache | GPU µs | tokens/s | weights GB/s | % copy | layer-0 check |",
                "|---|---|---|---|---|---|---|---|---|"]
        for path in args.decode:
            out.append("| " + " | ".join(decode_summary(path)) + " |")
    return "\n".join(out) + "\n", len(ours), matched, ll_matched


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
    ap.add_argument("--llamacpp", nargs="+", default=[], help="parse_ops.py CSV(s) or test-backend-ops perf output(s)")
    ap.add_argument("--bench-log")
    ap.add_argument("--decode", action="append", default=[])
    ap.add_argument("--device")
    ap.add_argument("--driver")
    ap.add_argument("--date")
    ap.add_argument("--out")
    ap.add_argument("--update", help="rewrite the section between the combined:begin/end markers of this file")
    args = ap.parse_args()
    table, n, matched, ll_matched = build(args)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(table)
    if args.update:
        update(args.update, table)
    if not args.out and not args.update:
        sys.stdout.write(table)
    print(f"combine_bench: {n} rows of ours, {matched} matched to a peer"
          + (f", {ll_matched} to llama.cpp" if args.llamacpp else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
