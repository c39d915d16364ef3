#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/y.tar.xz -C .gpubin
R=/tmp/res/c4; mkdir -p $R
snap() { tar czf $OUT/c4.tgz -C /tmp/res c4; }
. tools/device/models.sh
start_log $R
for ab in 0 1 2 3 4 8 12 0; do
  WGKERNELS_TQ_AB=$ab timeout 60 .gpubin/y/kernels --filter tq_decode_attention --variants subgroup --reps 30 --no-read-ceiling --time-failed > $R/ab_$ab.txt 2>&1; log "ab $ab rc=$? $(grep -E 'tq_decode' $R/ab_$ab.txt | awk '{print $(NF-6), $(NF-5)}' | tr '\n' ' ')"
done
for s in 128 256; do
  WGKERNELS_TQ_SPLIT=$s WGKERNELS_TQ_AB=3 timeout 60 .gpubin/y/kernels --filter tq_decode_attention --variants subgroup --reps 30 --no-read-ceiling --time-failed > $R/ab3_s$s.txt 2>&1; log "ab 3 split $s rc=$? $(grep -E 'tq_decode' $R/ab3_s$s.txt | awk '{print $(NF-6), $(NF-5)}' | tr '\n' ' ')"
done
log end; snap
