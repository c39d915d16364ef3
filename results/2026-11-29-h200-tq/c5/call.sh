#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/y.tar.xz -C .gpubin
R=/tmp/res/c5; mkdir -p $R
snap() { tar czf $OUT/c5.tgz -C /tmp/res c5; }
. tools/device/models.sh
start_log $R
r() { timeout 60 .gpubin/y/kernels --filter "tq_decode_attention h=32 kvh=8 d=128 cap=32768" --variants subgroup --reps 30 --no-read-ceiling --time-failed > $R/ab_$1.txt 2>&1; log "ab $1 rc=$? $(grep -E 'tq_decode' $R/ab_$1.txt | awk '{print $(NF-6), $(NF-5)}' | tr '\n' ' ')"; }
for ab in 0 3 19 35 67 115 0; do WGKERNELS_TQ_AB=$ab r $ab; done
WGKERNELS_TQ_NOMERGE=1 WGKERNELS_TQ_AB=0 r nm0
WGKERNELS_TQ_NOMERGE=1 WGKERNELS_TQ_AB=3 r nm3
WGKERNELS_TQ_NOMERGE=1 WGKERNELS_TQ_AB=115 r nm115
log end; snap
