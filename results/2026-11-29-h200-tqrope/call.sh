#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/q.tar.xz -C .gpubin
R=/tmp/res/tqrope; mkdir -p $R
snap() { tar czf $OUT/tqrope.tgz -C /tmp/res tqrope; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1; log "models written"
X=.gpubin/q
k=0
for b in model_bench_orig model_bench model_bench model_bench_orig; do
  k=$((k + 1))
  timeout 50 $X/$b /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv turboquant > $R/tq_${b}_$k.txt 2>&1; log "$b $k rc=$? $(grep -E '^\| tg' $R/tq_${b}_$k.txt | tr -s ' ')"
  snap
done
log end; snap
