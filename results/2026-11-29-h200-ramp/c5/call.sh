#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/t2.tar.xz -C .gpubin
R=/tmp/res/c5; mkdir -p $R
snap() { tar czf $OUT/c5.tgz -C /tmp/res c5; }
. tools/device/models.sh
start_log $R
write_models $R l1b; log "models written"
X=.gpubin/t2
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for k in 1 2 3; do
  WGK_TRACE=1 timeout 40 $X/generate_trace /tmp/l1b.gguf -p "$prompt" -n 128 --gpu-time > $R/gen_tr_$k.txt 2>&1
  log "gen $k rc=$? $(grep -iE 'decode per token' $R/gen_tr_$k.txt | tr -s ' ')"
done
WGK_TRACE=1 timeout 40 $X/generate_trace /tmp/l1b.gguf -p "$prompt" -n 512 --gpu-time > $R/gen_tr_n512.txt 2>&1
log "gen n512 rc=$? $(grep -iE 'decode per token' $R/gen_tr_n512.txt | tr -s ' ')"
log end; snap
