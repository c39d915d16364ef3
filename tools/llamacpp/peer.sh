#!/usr/bin/env bash
# llama.cpp's CUDA backend as a peer, on the GPU machine: builds test-backend-ops (with the
# wgkernels shape cases of peer_cases.patch) and llama-bench from llama.cpp sources, times the
# peer cases, writes a random-weight Llama-3-8B-shaped GGUF and runs llama-bench -p 512 -n 128 on it.
#
#   tools/llamacpp/peer.sh LLAMA_SRC OUTDIR
# LLAMA_SRC: the llama.cpp tree vendored in the llama-cpp-python 0.3.36 source tarball
#   (pip download llama-cpp-python==0.3.36 --no-deps --no-binary llama-cpp-python; vendor/llama.cpp;
#   models/ and docs/ are not needed). Needs nvcc, cmake, ninja, python3 with numpy.
# Knobs: SKIP_OPS=1, SKIP_BENCH=1, MODEL=path (default .peerbuild/llama3_8b_MIX.gguf, written while
# the build runs when absent), MIX=q4_k|q4_k_m, BUILD (default .peerbuild/cuda), JOBS (default nproc),
# OPS_ARGS (extra test-backend-ops arguments, e.g. "-o FLASH_ATTN_EXT" for the attention cases only).
# PHASE=build: patch, build and write the model, no GPU use (so it can run beside another bench);
# PHASE=run: only the GPU runs, with the binaries of an earlier build; default: both in turn.
set -u
SRC="$1"; OUTDIR="$2"
here="$(cd "$(dirname "$0")" && pwd)"
BUILD="${BUILD:-.peerbuild/cuda}"
MODEL="${MODEL:-.peerbuild/llama3_8b_${MIX:-q4_k}.gguf}"
PHASE="${PHASE:-all}"
mkdir -p "$OUTDIR"
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$OUTDIR/peer.log"; }
case "$PHASE" in build | run | all) ;; *) log "PHASE must be build, run or all (got $PHASE)"; exit 2 ;; esac
write_model() {
    mkdir -p "$(dirname "$MODEL")"
    PYTHONPATH="$SRC/gguf-py" python3 "$here/make_llama_gguf.py" "$MODEL.part" --mix "${MIX:-q4_k}" > "$OUTDIR/gguf.log" 2>&1 && mv "$MODEL.part" "$MODEL"
}

if [ "$PHASE" != run ]; then
    if ! patch -p1 -R --dry-run -s -d "$SRC" < "$here/peer_cases.patch" > /dev/null 2>&1; then
        patch -p1 -s -d "$SRC" < "$here/peer_cases.patch" || { log "patch failed"; exit 1; }
    fi
    if [ "${SKIP_BENCH:-0}" != 1 ] && [ ! -s "$MODEL" ]; then  # written while the build runs
        write_model &
        GGUF_PID=$!
    fi
    log "configure"
    cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=ON \
        > "$OUTDIR/cmake.log" 2>&1 || { log "cmake failed"; tail -30 "$OUTDIR/cmake.log"; exit 1; }
    log "build"
    ninja -C "$BUILD" -j "${JOBS:-$(nproc)}" test-backend-ops llama-bench > "$OUTDIR/build.log" 2>&1 || { log "build failed"; tail -30 "$OUTDIR/build.log"; exit 1; }
    log "built"
    if [ "$PHASE" = build ]; then
        if [ -n "${GGUF_PID:-}" ]; then
            wait "$GGUF_PID"
            log "model rc=$? ($MODEL)"
        fi
        exit 0
    fi
fi

[ -x "$BUILD/bin/test-backend-ops" ] || { log "no $BUILD/bin/test-backend-ops (build it first: PHASE=build)"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
if [ "${SKIP_OPS:-0}" != 1 ]; then
    log "test-backend-ops perf ${OPS_ARGS:-}"
    # shellcheck disable=SC2086
    WGKERNELS_PEER_CASES=1 "$BUILD/bin/test-backend-ops" perf -b CUDA0 ${OPS_ARGS:-} > "$OUTDIR/llamacpp_ops.txt" 2> "$OUTDIR/llamacpp_ops.err"
    log "ops rc=$? lines=$(grep -c 'us/run' "$OUTDIR/llamacpp_ops.txt")"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    if [ -n "${GGUF_PID:-}" ]; then
        wait "$GGUF_PID"
    elif [ ! -s "$MODEL" ]; then  # PHASE=run without a model from the build phase
        log "writing the model ($MODEL)"
        write_model
    fi
    [ -s "$MODEL" ] || { log "no model: see gguf.log"; cat "$OUTDIR/gguf.log"; exit 1; }
    log "llama-bench"
    "$BUILD/bin/llama-bench" -m "$MODEL" -p 512 -n 128 -ngl 99 -o csv > "$OUTDIR/llama_bench.csv" 2> "$OUTDIR/llama_bench.err"
    log "llama-bench rc=$?"
    cat "$OUTDIR/llama_bench.csv"
fi
