#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/g2.tar.xz -C .gpubin; tar xJf .gpubin/e.tar.xz -C .gpubin
R=/tmp/res/gb; mkdir -p $R; cp .gpubin/call_g.sh $R/call.sh
snap() { tar czf $OUT/gb.tgz -C /tmp/res gb; }
. tools/device/models.sh
start_log $R
write_models $R l8b q7b > /dev/null 2>&1; log "models written"
G=.gpubin/g2/model_bench
r() { local name=$1; shift; env "$@" timeout 60 $BIN /tmp/$M.gguf $ARGS --gpu-time > $R/${M}_$name.txt 2>&1; log "$M $name rc=$? $(grep -E '^\| (pp|tg)' $R/${M}_$name.txt | tr -s ' ' | tr '\n' ' ')"; }
BIN=$G
M=l8b ARGS="-p 0 -n 64 -d 32768 -r 2 --kv turboquant"
r tq_consts X=1
BIN=.gpubin/e/model_bench r tq_e3 WGKERNELS_TQ_SRC=$PWD/exp/e3.wgsl
BIN=$G r tq_consts2 X=1
snap
for M in l8b q7b; do
  ARGS="-p 0 -n 128 -r 2"; r d0_base X=1; r d0_gb2 WGKERNELS_DECODE_GB=2
  ARGS="-p 0 -n 128 -d 4096 -r 2"; r d4k_base X=1; r d4k_gb2 WGKERNELS_DECODE_GB=2
  snap
done
log end; snap
