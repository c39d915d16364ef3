#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/d.tar.xz -C .gpubin
R=/tmp/res/depth; mkdir -p $R; cp .gpubin/call_d.sh $R/call.sh
snap() { tar czf $OUT/depth.tgz -C /tmp/res depth; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R l1b q7b l8b > /dev/null 2>&1; log "models written"
snap
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
X=.gpubin/d
L() { local m=$1 t=$2; shift 2; timeout 90 $lb -m /tmp/$m.gguf "$@" -o md > $R/llama_${m}_$t.txt 2>&1; log "llama $m $t rc=$? $(grep -E '(pp|tg)[0-9]+' $R/llama_${m}_$t.txt | awk -F'|' '{print $(NF-2), $(NF-1)}' | tr -s ' ' | tr '\n' ' ')"; }
O() { local m=$1 t=$2; shift 2; timeout 90 $X/model_bench /tmp/$m.gguf "$@" --gpu-time > $R/ours_${m}_$t.txt 2>&1; log "ours $m $t rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}_$t.txt | tr -s ' ' | tr '\n' ' ')"; snap; }
for m in l1b q7b; do
  L $m d4096 -p 512 -n 128 -d 4096 -r 3
  O $m d4096 -p 512 -n 128 -d 4096 -r 3
  L $m d32k_f16 -p 0 -n 64 -d 32768 -r 2 -fa 1
  O $m d32k_f16 -p 0 -n 64 -d 32768 -r 2 --kv f16
done
O l8b d32k_tq -p 0 -n 64 -d 32768 -r 2 --kv turboquant
O l8b d32k_f16 -p 0 -n 64 -d 32768 -r 2 --kv f16
for m in l1b q7b; do
  L $m d32k_q4 -p 0 -n 64 -d 32768 -r 2 -fa 1 -ctk q4_0 -ctv q4_0
  O $m d32k_tq -p 0 -n 64 -d 32768 -r 2 --kv turboquant
done
log end; snap
