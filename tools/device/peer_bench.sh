#!/usr/bin/env bash
# model_bench beside llama.cpp's llama-bench (CUDA) on the same random-weight GGUF files, in one
# device call, optionally after a before/after decode profile of two of our builds.
#   tools/device/peer_bench.sh OURS_DIR OUTDIR [BASE_DIR]
# OURS_DIR / BASE_DIR: folders holding a release `model_bench`. LLAMA_TAR: a llama.cpp source
# tarball whose top folder is llama.cpp (default .gpubin/llama.tar.xz; examples, tests, docs and
# the other backends may be left out). GGUF_PY: gguf-py folder (default .gpubin/gguf-py).
# MODELS: the shapes (names in tools/device/models.sh; default "l1b l8b"); DEPTH: the shapes also
# measured at a depth of 4096 tokens (default "l8b"). llama.cpp is built for CUDA in the background
# while the GGUF files are written and, with BASE_DIR, both builds profile a decode step on the 8B
# shape (order base ours ours base); then llama-bench and model_bench run back to back on each
# file: pp512 / tg128 from an empty cache, and both again at -d 4096 on the DEPTH shapes.
# PROFILE_ARGS: model_bench's tests for the profiles (default "-p 0 -n 128 -r 3").
# LONG: the shapes also measured decoding after 32768 tokens (default none): tg64 with an f16
# cache (llama.cpp with flash attention) and with TurboQuant against llama.cpp's q4_0 K/V.
# GEN: the shapes also run through `generate --gpu-time` (a ~600-token prompt, 128 tokens; greedy,
# top-k 40 sampling on the GPU, the same sampling on the CPU) for its CPU time not hidden
# (default none).
# Before the first measurement our build runs once untimed on the first shape: the first process
# of a call has run at a third of the GPU's speed (clocks).
set -u
OURS="$1"; OUT="$2"; BASE="${3:-}"; mkdir -p "$OUT"
. tools/device/models.sh
start_log "$OUT"
build_llama_bench "$OUT" &
build=$!
MODELS="${MODELS:-l1b l8b}"
write_models "$OUT" ${BASE:+l8b} $MODELS; log "models written"
k=0
if [ -n "$BASE" ]; then
  for side in base ours ours base; do
    bin=$OURS; [ $side = base ] && bin=$BASE
    k=$((k + 1)); f="$OUT/prof_${side}_$k.txt"
    "$bin/model_bench" /tmp/l8b.gguf ${PROFILE_ARGS:--p 0 -n 128 -r 3} --gpu-time --profile > "$f" 2>&1
    log "profile $side rc=$? $(grep -E '^\| tg' "$f" | tr -s ' ')"
  done
fi
wait $build; log "llama-bench built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
first=${MODELS%% *}
"$OURS/model_bench" /tmp/$first.gguf -p 512 -n 128 -r 5 > "$OUT/warm_up.txt" 2>&1
log "warm-up (ours, $first) rc=$? $(grep -E '^\| (pp|tg)' "$OUT/warm_up.txt" | tr -s ' ' | tr '\n' ' ')"
for m in $MODELS; do
  $lb -m /tmp/$m.gguf -p 512 -n 128 -r 3 -o md > "$OUT/llama_${m}.txt" 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' "$OUT/llama_${m}.txt" | tr -s ' ' | tr '\n' ' ')"
  "$OURS/model_bench" /tmp/$m.gguf -p 512 -n 128 -r 3 --gpu-time > "$OUT/ours_${m}.txt" 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' "$OUT/ours_${m}.txt" | tr -s ' ' | tr '\n' ' ')"
done
for m in ${DEPTH-l8b}; do
  [ -s /tmp/$m.gguf ] || write_models "$OUT" $m
  $lb -m /tmp/$m.gguf -p 512 -n 128 -d 4096 -r 2 -o md > "$OUT/llama_${m}_d4096.txt" 2>&1
  log "llama $m d4096 rc=$? $(grep -E 'pp512|tg128' "$OUT/llama_${m}_d4096.txt" | tr -s ' ' | tr '\n' ' ')"
  "$OURS/model_bench" /tmp/$m.gguf -p 512 -n 128 -d 4096 -r 2 --gpu-time > "$OUT/ours_${m}_d4096.txt" 2>&1
  log "ours $m d4096 rc=$? $(grep -E '^\| (pp|tg)' "$OUT/ours_${m}_d4096.txt" | tr -s ' ' | tr '\n' ' ')"
done
for m in ${LONG-}; do
  [ -s /tmp/$m.gguf ] || write_models "$OUT" $m
  for kv in f16 q4; do
    la="-fa 1"; oa=""
    [ $kv = q4 ] && la="-fa 1 -ctk q4_0 -ctv q4_0" && oa="--kv turboquant"
    $lb -m /tmp/$m.gguf -p 0 -n 64 -d 32768 -r 2 $la -o md > "$OUT/llama_${m}_d32k_$kv.txt" 2>&1
    log "llama $m d32768 $kv rc=$? $(grep -E 'tg64' "$OUT/llama_${m}_d32k_$kv.txt" | tr -s ' ' | tr '\n' ' ')"
    "$OURS/model_bench" /tmp/$m.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time $oa > "$OUT/ours_${m}_d32k_$kv.txt" 2>&1
    log "ours $m d32768 $kv rc=$? $(grep -E '^\| tg' "$OUT/ours_${m}_d32k_$kv.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for m in ${GEN-}; do
  [ -s /tmp/$m.gguf ] || write_models "$OUT" $m
  for mode in greedy topk topk_cpu; do
    sa=""; [ $mode != greedy ] && sa="--temp 0.8 --top-k 40 --seed 1"
    [ $mode = topk_cpu ] && sa="$sa --cpu-sample"
    "$OURS/generate" /tmp/$m.gguf -p "$prompt" -n 128 --gpu-time $sa > "$OUT/gen_${m}_$mode.txt" 2>&1
    log "generate $m $mode rc=$? $(grep -iE 'not hidden|tok/s' "$OUT/gen_${m}_$mode.txt" | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
  done
done
log end
