#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/h.tar.xz -C .gpubin; tar xJf .gpubin/e.tar.xz -C .gpubin
R=/tmp/res/check; mkdir -p $R; cp .gpubin/call_h.sh $R/call.sh
snap() { tar czf $OUT/check.tgz -C /tmp/res check; }
. tools/device/models.sh
start_log $R
write_models $R l1b q7b l8b > /dev/null 2>&1; log "models written"
H=.gpubin/h/model_bench
r() { local name=$1; shift; env "$@" timeout 60 $BIN /tmp/$M.gguf $ARGS --gpu-time > $R/${M}_$name.txt 2>&1; log "$M $name rc=$? $(grep -E '^\| (pp|tg)' $R/${M}_$name.txt | tr -s ' ' | tr '\n' ' ')"; }
BIN=$H
M=l1b ARGS="-p 0 -n 128 -d 4096 -r 2"; r d4k X=1
M=q7b ARGS="-p 0 -n 128 -d 4096 -r 2"; r d4k X=1
snap
M=l8b ARGS="-p 0 -n 64 -d 32768 -r 2 --kv turboquant"
BIN=$H r tq_sel X=1
BIN=.gpubin/e/model_bench r tq_e3 WGKERNELS_TQ_SRC=$PWD/exp/e3.wgsl
log end; snap
