#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/w2.tar.xz -C .gpubin
R=/tmp/res/d32k; mkdir -p $R
snap() { tar czf $OUT/d32k.tgz -C /tmp/res d32k; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1; log "models written"
mb=.gpubin/w2/model_bench
for kv in f16 turboquant; do
  timeout 60 $mb /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv $kv > $R/ours_l8b_d32k_$kv.txt 2>&1; log "ours l8b d32768 $kv rc=$? $(grep -E '^\| tg' $R/ours_l8b_d32k_$kv.txt | tr -s ' ')"
  snap
done
log end; snap
