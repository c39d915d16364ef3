#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/d.tar.xz -C .gpubin; tar xJf .gpubin/e.tar.xz -C .gpubin
R=/tmp/res/sweep; mkdir -p $R; cp .gpubin/call_s.sh $R/call.sh
snap() { tar czf $OUT/sweep.tgz -C /tmp/res sweep; }
. tools/device/models.sh
start_log $R
write_models $R l1b l8b > /dev/null 2>&1; log "models written"
D=.gpubin/d/model_bench
r() { local name=$1; shift; env "$@" timeout 60 $BIN /tmp/$M.gguf $ARGS --gpu-time > $R/${M}_$name.txt 2>&1; log "$M $name rc=$? $(grep -E '^\| (pp|tg)' $R/${M}_$name.txt | tr -s ' ' | tr '\n' ' ')"; }
BIN=$D M=l1b ARGS="-p 0 -n 128 -d 4096 -r 2"
r base X=1
r keys4 WGKERNELS_DECODE_KEYS=4
r keys1 WGKERNELS_DECODE_KEYS=1
r wg256 WGKERNELS_DECODE_WG=256
r wg64 WGKERNELS_DECODE_WG=64
r lanes4 WGKERNELS_DECODE_LANES=4
r gb2 WGKERNELS_DECODE_GB=2
r mc64 WGKERNELS_DECODE_MINCHUNK=64
r mc256 WGKERNELS_DECODE_MINCHUNK=256
r wgs1056 WGKERNELS_DECODE_WGS=1056 WGKERNELS_DECODE_MINCHUNK=32
r pf0 WGKERNELS_DECODE_PF=0
r base2 X=1
snap
BIN=$D M=l1b ARGS="-p 0 -n 64 -d 32768 -r 2 --kv turboquant"
r tq_base X=1
r tq_s256 WGKERNELS_TQ_SPLIT=256
r tq_s128 WGKERNELS_TQ_SPLIT=128
snap
M=l8b ARGS="-p 0 -n 64 -d 32768 -r 2 --kv turboquant"
BIN=$D r tq_head X=1
BIN=.gpubin/e/model_bench r tq_e3 WGKERNELS_TQ_SRC=$PWD/exp/e3.wgsl
BIN=$D r tq_head2 X=1
BIN=.gpubin/e/model_bench r tq_e3b WGKERNELS_TQ_SRC=$PWD/exp/e3.wgsl
log end; snap
