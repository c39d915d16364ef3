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
# llama.cpp peer (optional; skipped unless LLAMA_SRC is set):
#   LLAMA_SRC    a llama.cpp source tree (see tools/llamacpp/peer.sh). Its CUDA build
#                (tools/llamacpp/peer.sh PHASE=build, under .peerbuild/) runs niced in the background
#                while our bench runs; after our last GPU step, PHASE=run times test-backend-ops perf
#                and llama-bench, so no llama.cpp GPU work overlaps our timings. The CPU load of the
#                build does reach them (results/2026-11-25-h100-llamacpp: decode_step's GPU time
#                9525 µs beside a build, 8155 µs idle); LLAMA_BUILD_FIRST=1 builds before our bench.
#                parse_ops.py writes llamacpp_ops.csv, and the combined table gets the columns
#                "llama.cpp µs" and "llama.cpp ÷ ours" (matching rules: tools/combine_bench.py).
#                Outputs of peer.sh (logs, llamacpp_ops.txt, llama_bench.csv) go to OUTDIR/llamacpp/.
#   LLAMA_OPS_ARGS    extra test-backend-ops arguments, e.g. "-o FLASH_ATTN_EXT" (attention only)
#   LLAMA_SKIP_OPS=1 LLAMA_SKIP_BENCH=1   skip test-backend-ops / llama-bench
#   A build in .peerbuild/ is reused by a later call on the same machine (only the run phase then
#   costs time), so e.g. SKIP_BENCH=1 SKIP_PEERS=1 SKIP_SDPA=1 SKIP_DECODE=1 LLAMA_SRC=... runs
#   llama.cpp alone.
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

# llama.cpp (optional): its build, which uses no GPU, in the background (or first); its GPU runs at
# the end. peer.sh reads SKIP_BENCH/SKIP_OPS for its own steps, so they are always passed explicitly.
LLAMA_DIR="$OUTDIR/llamacpp"
LLAMA_BUILD_PID=""
llama_peer() { # phase
    SKIP_BENCH="${LLAMA_SKIP_BENCH:-0}" SKIP_OPS="${LLAMA_SKIP_OPS:-0}" OPS_ARGS="${LLAMA_OPS_ARGS:-}" PHASE="$1" \
        tools/llamacpp/peer.sh "$LLAMA_SRC" "$LLAMA_DIR"
}
if [ -z "${LLAMA_SRC:-}" ]; then
    echo "== llamacpp: skipped (set LLAMA_SRC to a llama.cpp source tree to add llama.cpp's CUDA backend as a peer)" | tee -a "$LOG"
elif [ ! -d "$LLAMA_SRC" ]; then
    echo "== llamacpp: skipped, LLAMA_SRC=$LLAMA_SRC is not a directory" | tee -a "$LOG"
    LLAMA_SRC=""
elif [ "${LLAMA_BUILD_FIRST:-0}" = 1 ]; then
    step llamacpp_build llama_peer build > "$OUTDIR/llamacpp_build.txt" 2>&1
else
    echo "== llamacpp_build: started in the background (nice 19; output in llamacpp_build.txt)" | tee -a "$LOG"
    (renice -n 19 -p "$BASHPID" > /dev/null; step llamacpp_build llama_peer build) > "$OUTDIR/llamacpp_build.txt" 2>&1 &
    LLAMA_BUILD_PID=$!
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

# llama.cpp's GPU runs, after all of ours (and after its build).
if [ -n "${LLAMA_SRC:-}" ]; then
    if [ -n "$LLAMA_BUILD_PID" ]; then
        echo "== llamacpp_build: waiting for the background build" | tee -a "$LOG"
        wait "$LLAMA_BUILD_PID"
    fi
    tail -5 "$OUTDIR/llamacpp_build.txt"
    step llamacpp llama_peer run > "$OUTDIR/llamacpp.txt" 2>&1
    tail -5 "$OUTDIR/llamacpp.txt"
    if [ "${LLAMA_SKIP_OPS:-0}" = 1 ]; then
        echo "== llamacpp_parse: skipped (LLAMA_SKIP_OPS=1)" | tee -a "$LOG"
    elif [ -s "$LLAMA_DIR/llamacpp_ops.txt" ]; then
        step llamacpp_parse python3 tools/llamacpp/parse_ops.py "$LLAMA_DIR/llamacpp_ops.txt" --csv "$OUTDIR/llamacpp_ops.csv"
    else
        echo "== llamacpp: no llamacpp_ops.txt (see $LLAMA_DIR/peer.log)" | tee -a "$LOG"
    fi
fi

if [ -s "$OUTDIR/bench.csv" ]; then
    ARGS=(--ours "$OUTDIR/bench.csv" --bench-log "$OUTDIR/bench.txt" --out "$OUTDIR/combined.md")
    [ -s "$OUTDIR/peers.csv" ] && ARGS+=(--peers "$OUTDIR/peers.csv")
    [ -s "$OUTDIR/sdpa.csv" ] && ARGS+=(--sdpa "$OUTDIR/sdpa.csv")
    [ -n "${LLAMA_SRC:-}" ] && [ -s "$OUTDIR/llamacpp_ops.csv" ] && ARGS+=(--llamacpp "$OUTDIR/llamacpp_ops.csv")
    [ -n "${UPDATE_MD:-}" ] && ARGS+=(--update "$UPDATE_MD")
    step combine python3 tools/combine_bench.py "${ARGS[@]}" "${DECODES[@]}"
fi
echo "outputs in $OUTDIR:"; ls -la "$OUTDIR"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    tar czf "$OUT/device_bench.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")" && echo "packed into $OUT/device_bench.tgz"
fi
