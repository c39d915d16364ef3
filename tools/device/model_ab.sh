#!/usr/bin/env bash
# Before/after model throughput in one device call: writes random-weight Llama-shaped Q4_K_M-like
# GGUF files with gguf-py (tools/llamacpp/make_llama_gguf.py), then runs two builds' model_bench
# on each file, alternating A B B A, then optional release test binaries.
#   tools/device/model_ab.sh BIN_DIR_A BIN_DIR_B OUTDIR
# BIN_DIR_*: folders holding a release `model_bench` (and `generate`) binary. MODELS: the shapes
# (tools/device/models.sh; default "l1b l8b"); MB_ARGS: model_bench's test arguments (default
# "-p 512 -n 128 -r 3").
# GGUF_PY: gguf-py folder (default .gpubin/gguf-py). TESTS: test binaries to run after the benches
# (paths), each run with --test-threads 1 and logged to OUTDIR/test_<name>.txt.
set -u
A="$1"; B="$2"; OUT="$3"; mkdir -p "$OUT"
. tools/device/models.sh
start_log "$OUT"
MODELS="${MODELS:-l1b l8b}"
write_models "$OUT" $MODELS; log "models written"
for m in $MODELS; do
  for side in A B B A; do
    bin=$A; [ $side = B ] && bin=$B
    "$bin/model_bench" /tmp/$m.gguf ${MB_ARGS:--p 512 -n 128 -r 3} --gpu-time > "$OUT/mb_${m}_${side}.txt" 2>&1
    log "$m $side rc=$? $(grep -E '^\| (pp|tg)' "$OUT/mb_${m}_${side}.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
for t in ${TESTS:-}; do
  n=$(basename "$t" | sed 's/-[0-9a-f]*$//')
  timeout 240 "$t" --test-threads 1 > "$OUT/test_$n.txt" 2>&1
  log "test $n rc=$? $(grep -E '^test result' "$OUT/test_$n.txt" | tr '\n' ' ')"
done
log end
