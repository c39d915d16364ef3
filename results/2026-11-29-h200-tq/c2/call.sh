#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/x.tar.xz -C .gpubin
R=/tmp/res/c2; mkdir -p $R
snap() { tar czf $OUT/c2.tgz -C /tmp/res c2; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/x
b() { timeout 90 $1 --filter tq_decode_attention --variants subgroup --reps 30 --no-read-ceiling --time-failed > $R/tq_$2.txt 2>&1; log "bench $2 rc=$? $(grep -E 'tq_decode' $R/tq_$2.txt | awk '{print $(NF-6), $(NF-5), $NF}' | tr '\n' ' ')"; }
b $X/kernels_orig orig
for e in "" k kh; do WGKERNELS_TQ_EXP=$e b $X/kernels "x$e"; done
b $X/kernels_orig orig2
WGKERNELS_TQ_EXP=k b $X/kernels xk2
snap
WGKERNELS_TQ_EXP=k timeout 60 $X/shader_stats --filter tq_decode_attention --variants subgroup > $R/stats_k.txt 2>&1
timeout 60 $X/shader_stats --filter tq_decode_attention --variants subgroup > $R/stats_.txt 2>&1
wait $WP; log "models written"
mb=$X/model_bench
for e in "" k; do
  WGKERNELS_TQ_EXP=$e timeout 80 $mb /tmp/l8b.gguf -p 0 -n 16 -d 32768 -r 1 --profile --kv turboquant > $R/prof_tq_$e.txt 2>&1; log "prof tq '$e' rc=$?"
  snap
done
timeout 80 $mb /tmp/l8b.gguf -p 0 -n 16 -d 32768 -r 1 --profile --kv f16 > $R/prof_f16.txt 2>&1; log "prof f16 rc=$?"
log end; snap
