#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/b.tar.xz -C .gpubin
R=/tmp/res/c2; mkdir -p $R
snap() { tar czf $OUT/c2.tgz -C /tmp/res c2; }
. tools/device/models.sh
start_log $R
write_models $R l1b; log "models written"
X=.gpubin/b
for s in 4 8 1; do
  for n in 128 512; do
    WGK_TRACE=1 timeout 60 $X/model_bench_trace /tmp/l1b.gguf -p 0 -n $n -r 2 --greedy-steps $s --gpu-time > $R/tr_s${s}_n$n.txt 2>&1
    log "tr s$s n$n rc=$? $(grep -E '^\| tg' $R/tr_s${s}_n$n.txt | tr -s ' ')"
  done
done
nproc > $R/cpu.txt; lscpu >> $R/cpu.txt 2>&1
log end; snap
