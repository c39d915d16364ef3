#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/f.tar.xz -C .gpubin; tar xJf .gpubin/e.tar.xz -C .gpubin
R=/tmp/res/final; mkdir -p $R; cp .gpubin/call_f.sh $R/call.sh
snap() { tar czf $OUT/final.tgz -C /tmp/res final; }
. tools/device/models.sh
start_log $R
write_models $R l1b l8b > /dev/null 2>&1; log "models written"
F=.gpubin/f/model_bench
r() { local name=$1; shift; env "$@" timeout 60 $BIN /tmp/$M.gguf $ARGS --gpu-time > $R/${M}_$name.txt 2>&1; log "$M $name rc=$? $(grep -E '^\| (pp|tg)' $R/${M}_$name.txt | tr -s ' ' | tr '\n' ' ')"; }
BIN=$F M=l1b
ARGS="-p 0 -n 128 -r 3"; r d0_base X=1; r d0_gb2 WGKERNELS_DECODE_GB=2
ARGS="-p 0 -n 128 -d 4096 -r 2"; r d4k_base X=1; r d4k_gb2 WGKERNELS_DECODE_GB=2; r d4k_gb2mc256 WGKERNELS_DECODE_GB=2 WGKERNELS_DECODE_MINCHUNK=256; r d4k_gb2wg64 WGKERNELS_DECODE_GB=2 WGKERNELS_DECODE_WG=64; r d4k_base2 X=1; r d4k_gb2b WGKERNELS_DECODE_GB=2
ARGS="-p 0 -n 64 -d 32768 -r 2"; r d32k_base X=1; r d32k_gb2 WGKERNELS_DECODE_GB=2
snap
M=l8b ARGS="-p 0 -n 64 -d 32768 -r 2 --kv turboquant"
BIN=$F r tq_fix X=1
BIN=.gpubin/e/model_bench r tq_e3 WGKERNELS_TQ_SRC=$PWD/exp/e3.wgsl
BIN=$F r tq_fix2 X=1
log end; snap
