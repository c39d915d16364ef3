#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/g.tar.xz -C .gpubin
R=/tmp/res/c6; mkdir -p $R
snap() { tar czf $OUT/c6.tgz -C /tmp/res c6; }
. tools/device/models.sh
start_log $R
write_models $R l1b; log "l1b written"
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/g
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
g() { timeout 40 $X/$1 /tmp/$2.gguf -p "$prompt" -n 128 --gpu-time > $R/gen_$2_$1_$3.txt 2>&1; log "gen $2 $1 $3 rc=$? $(grep -iE 'decode per token' $R/gen_$2_$1_$3.txt | tr -s ' ')"; }
g generate l1b warm
for k in 1 2 3; do g generate_prev l1b $k; g generate l1b $k; done
snap
wait $WP; log "l8b written"
g generate l8b warm
for k in 1 2; do g generate_prev l8b $k; g generate l8b $k; done
log end; snap
