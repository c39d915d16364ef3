#!/usr/bin/env bash
# model_bench beside llama.cpp's llama-bench (CUDA) on the same random-weight GGUF files, in one
# device call, optionally after a before/after decode profile of two of our builds.
#   tools/device/peer_bench.sh OURS_DIR OUTDIR [BASE_DIR]
# OURS_DIR / BASE_DIR: folders holding a release `model_bench`. LLAMA_TAR: a llama.cpp source
# tarball whose top folder is llama.cpp (default .gpubin/llama.tar.xz; examples, tests, docs and
# the other backends may be left out). GGUF_PY: gguf-py folder (default .gpubin/gguf-py).
# llama.cpp is built for CUDA in the background while the GGUF files are written and, with
# BASE_DIR, both builds profile a decode step on the 8B shape (order base ours ours base); then
# llama-bench and model_bench run back to back on each file: pp512 / tg128 from an empty cache,
# and both again at a depth of 4096 tokens (-d 4096) on the 8B shape.
set -u
OURS="$1"; OUT="$2"; BASE="${3:-}"; mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$OUT/log.txt"; }
export PYTHONPATH="${GGUF_PY:-.gpubin/gguf-py}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
root=$PWD
( mkdir -p /tmp/peer && cd /tmp/peer && tar xJf "$root/${LLAMA_TAR:-.gpubin/llama.tar.xz}" &&
  cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF &&
  cmake --build build -j "$(nproc)" --target llama-bench ) > "$OUT/llama_build.txt" 2>&1 &
build=$!
python3 tools/llamacpp/make_llama_gguf.py /tmp/l1b.gguf --layers 16 --dim 2048 --ffn 8192 --mix q4_k_m > "$OUT/gguf_1b.log" 2>&1 &
g1=$!
python3 tools/llamacpp/make_llama_gguf.py /tmp/l8b.gguf --mix q4_k_m > "$OUT/gguf_8b.log" 2>&1
wait $g1; log "models written"
k=0
if [ -n "$BASE" ]; then
  for side in base ours ours base; do
    bin=$OURS; [ $side = base ] && bin=$BASE
    k=$((k + 1)); f="$OUT/prof_${side}_$k.txt"
    "$bin/model_bench" /tmp/l8b.gguf -p 0 -n 128 -r 3 --gpu-time --profile > "$f" 2>&1
    log "profile $side rc=$? $(grep -E '^\| tg' "$f" | tr -s ' ')"
  done
fi
wait $build; log "llama-bench built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in l1b l8b; do
  $lb -m /tmp/$m.gguf -p 512 -n 128 -r 3 -o md > "$OUT/llama_${m}.txt" 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' "$OUT/llama_${m}.txt" | tr -s ' ' | tr '\n' ' ')"
  "$OURS/model_bench" /tmp/$m.gguf -p 512 -n 128 -r 3 --gpu-time > "$OUT/ours_${m}.txt" 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' "$OUT/ours_${m}.txt" | tr -s ' ' | tr '\n' ' ')"
done
$lb -m /tmp/l8b.gguf -p 512 -n 128 -d 4096 -r 2 -o md > "$OUT/llama_l8b_d4096.txt" 2>&1
log "llama l8b d4096 rc=$? $(grep -E 'pp512|tg128' "$OUT/llama_l8b_d4096.txt" | tr -s ' ' | tr '\n' ' ')"
"$OURS/model_bench" /tmp/l8b.gguf -p 512 -n 128 -d 4096 -r 2 --gpu-time > "$OUT/ours_l8b_d4096.txt" 2>&1
log "ours l8b d4096 rc=$? $(grep -E '^\| (pp|tg)' "$OUT/ours_l8b_d4096.txt" | tr -s ' ' | tr '\n' ' ')"
log end
