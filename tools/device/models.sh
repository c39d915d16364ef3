# Sourced by the device scripts.
# start_log OUTDIR: the card and driver into OUTDIR/gpu.txt; then `log TEXT` appends a timed line
# to OUTDIR/log.txt (and prints it).
# build_llama_bench OUTDIR: llama.cpp's llama-bench for CUDA (sm_90) in /tmp/peer/build/bin, from
# LLAMA_TAR (a llama.cpp source tarball whose top folder is llama.cpp; default
# .gpubin/llama.tar.xz), unless already built; log in OUTDIR/llama_build.txt.
# write_models: random-weight Q4_K_M-like GGUF files of published model shapes,
# written with gguf-py (tools/llamacpp/make_llama_gguf.py) into /tmp/<name>.gguf, in parallel.
#   write_models OUTDIR NAME...      (a file already there is kept)
# Names: l1b (Llama-3.2-1B), l8b (Llama-3-8B), q7b (Qwen2.5-7B), q8b (Qwen3-8B), g4b (Gemma-3-4B),
# g9b (Gemma-2-9B).
model_args() {
  case "$1" in
    l1b) echo "--layers 16 --dim 2048 --ffn 8192" ;;
    l8b) echo "" ;;
    q7b) echo "--arch qwen2 --layers 28 --dim 3584 --ffn 18944 --heads 28 --kv-heads 4 --vocab 152064" ;;
    q8b) echo "--arch qwen3 --layers 36 --dim 4096 --ffn 12288 --heads 32 --kv-heads 8 --head-dim 128 --vocab 151936" ;;
    g4b) echo "--arch gemma3 --layers 34 --dim 2560 --ffn 10240 --heads 8 --kv-heads 4 --head-dim 256 --vocab 262144 --window 1024 --tied" ;;
    g9b) echo "--arch gemma2 --layers 42 --dim 3584 --ffn 14336 --heads 16 --kv-heads 8 --head-dim 256 --vocab 256000 --window 4096 --tied" ;;
    *) echo "unknown model $1" >&2; return 1 ;;
  esac
}
write_models() {
  local out="$1"; shift
  local pids=""
  export PYTHONPATH="${GGUF_PY:-.gpubin/gguf-py}"
  for m in "$@"; do
    [ -s "/tmp/$m.gguf" ] && continue
    python3 tools/llamacpp/make_llama_gguf.py "/tmp/$m.gguf" $(model_args "$m") --mix q4_k_m > "$out/gguf_$m.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; done
}
build_llama_bench() {
  [ -x /tmp/peer/build/bin/llama-bench ] && return 0
  local root=$PWD
  ( mkdir -p /tmp/peer && cd /tmp/peer && tar xJf "$root/${LLAMA_TAR:-.gpubin/llama.tar.xz}" &&
    cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF &&
    cmake --build build -j "$(nproc)" --target llama-bench ) > "$1/llama_build.txt" 2>&1
}
start_log() {
  LOG_DIR="$1"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$LOG_DIR/gpu.txt"
}
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG_DIR/log.txt"; }
