#!/usr/bin/env bash
# One device run, one table: our bench, the torch peers, the decode-step example, then the
# combined Markdown table (tools/combine_bench.py). Run from the repository root on the GPU
# machine; every step runs even if an earlier one failed, and each step's exit status is logged.
#
#   tools/device_bench.sh [OUTDIR]          (default: ./device_bench_out)
# When the device tool's $OUT is set, everything is also packed into $OUT/device_bench.tgz (the
# tool brings back at most 8 files, and this writes more).
#
# Binaries (prebuilt release binaries, e.g. copied into .dev_<name>/; built with cargo if unset
# and cargo exists):
#   BENCH_BIN   the bench binary (target/release/deps/kernels-*; `cargo bench --no-run` builds it)
#   DECODE_BIN  examples/decode_step (target/release/examples/decode_step)
# The whole bench takes longer than one 10-minute device call (H100, 2026-11-25: it stopped in
# the decode rows after 600 s at --reps 30). Split it over calls with BENCH_ARGS="--filter A|B"
# and SKIP_* below; the bench rewrites its CSV after every case, so a call cut short keeps every
# row it measured (tools/combine_bench.py takes the concatenated rows of several CSVs).
# Knobs:
#   BENCH_ARGS   extra bench arguments (default: --reps 50)
#   DECODE_ARGS  extra decode_step arguments (default: --reps 20)
#   SKIP_BENCH=1 SKIP_PEERS=1 SKIP_SDPA=1 SKIP_DECODE=1   skip a step
#   PYTHON       python3 with torch for the peers (default python3)
#   UPDATE_MD    a Markdown file whose combined:begin/end section gets the table (e.g. BENCHMARKS.md)
set -u
OUTDIR="${1:-./device_bench_out}"
mkdir -p "$OUTDIR"
PY="${PYTHON:-python3}"
LOG="$OUTDIR/steps.log"
: > "$LOG"

step() { # name, command...
    local name="$1"; shift
    local t0=$(date +%s)
    echo "== $name: $*" | tee -a "$LOG"
    "$@"
    local rc=$?
    echo "== $name: rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
    return 0
}

{
    echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm)"
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUTDIR/meta.txt" 2>&1
cat "$OUTDIR/meta.txt"

find_bin() { # pattern: newest executable match
    ls -t $1 2>/dev/null | while read -r f; do [ -x "$f" ] && [ -f "$f" ] && { echo "$f"; break; }; done
}
BENCH_BIN="${BENCH_BIN:-$(find_bin 'target/release/deps/kernels-*')}"
DECODE_BIN="${DECODE_BIN:-$(find_bin target/release/examples/decode_step)}"
if command -v cargo > /dev/null; then
    [ -z "$BENCH_BIN" ] && step build_bench cargo bench --bench kernels --no-run && BENCH_BIN="$(find_bin 'target/release/deps/kernels-*')"
    [ -z "$DECODE_BIN" ] && step build_decode cargo build --release --example decode_step && DECODE_BIN="$(find_bin target/release/examples/decode_step)"
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
    if [ -n "$BENCH_BIN" ]; then
        # shellcheck disable=SC2086
        step bench "$BENCH_BIN" --bench --csv "$OUTDIR/bench.csv" --svg "$OUTDIR/bench.svg" ${BENCH_ARGS:---reps 50} > "$OUTDIR/bench.txt" 2>&1
        tail -3 "$OUTDIR/bench.txt"
    else
        echo "== bench: no BENCH_BIN found" | tee -a "$LOG"
    fi
fi
if [ "${SKIP_PEERS:-0}" != 1 ]; then
    step peers "$PY" benches/peers/peers.py --csv "$OUTDIR/peers.csv" > "$OUTDIR/peers.txt" 2>&1
fi
if [ "${SKIP_SDPA:-0}" != 1 ]; then
    step sdpa "$PY" tools/bench_torch_sdpa.py --csv "$OUTDIR/sdpa.csv" > "$OUTDIR/sdpa.txt" 2>&1
fi
DECODES=()
if [ "${SKIP_DECODE:-0}" != 1 ]; then
    if [ -n "$DECODE_BIN" ]; then
        # The layer-0 CPU check at a small shape first, then the full-size steps.
        step decode_small "$DECODE_BIN" --small --layers 32 ${DECODE_ARGS:---reps 20} > "$OUTDIR/decode_small.txt" 2>&1
        step decode_llama2 "$DECODE_BIN" ${DECODE_ARGS:---reps 20} > "$OUTDIR/decode_llama2_7b.txt" 2>&1
        step decode_llama3 "$DECODE_BIN" --llama3 --lm-head ${DECODE_ARGS:---reps 20} > "$OUTDIR/decode_llama3_8b.txt" 2>&1
        # The opt-in int8-activation GEMVs (kernels::q8): checked at the small shape, then timed.
        step decode_small_q8 "$DECODE_BIN" --small --layers 32 --q8 ${DECODE_ARGS:---reps 20} > "$OUTDIR/decode_small_q8.txt" 2>&1
        step decode_llama3_q8 "$DECODE_BIN" --llama3 --lm-head --q8 ${DECODE_ARGS:---reps 20} > "$OUTDIR/decode_llama3_8b_q8.txt" 2>&1
        for f in decode_small decode_llama2_7b decode_llama3_8b decode_small_q8 decode_llama3_8b_q8; do
            [ -s "$OUTDIR/$f.txt" ] && DECODES+=(--decode "$OUTDIR/$f.txt") && tail -12 "$OUTDIR/$f.txt"
        done
    else
        echo "== decode: no DECODE_BIN found" | tee -a "$LOG"
    fi
fi

if [ -s "$OUTDIR/bench.csv" ]; then
    ARGS=(--ours "$OUTDIR/bench.csv" --bench-log "$OUTDIR/bench.txt" --out "$OUTDIR/combined.md")
    [ -s "$OUTDIR/peers.csv" ] && ARGS+=(--peers "$OUTDIR/peers.csv")
    [ -s "$OUTDIR/sdpa.csv" ] && ARGS+=(--sdpa "$OUTDIR/sdpa.csv")
    [ -n "${UPDATE_MD:-}" ] && ARGS+=(--update "$UPDATE_MD")
    step combine python3 tools/combine_bench.py "${ARGS[@]}" "${DECODES[@]}"
fi
echo "outputs in $OUTDIR:"; ls -la "$OUTDIR"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    tar czf "$OUT/device_bench.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")" && echo "packed into $OUT/device_bench.tgz"
fi
