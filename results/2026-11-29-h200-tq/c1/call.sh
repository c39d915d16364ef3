#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/x.tar.xz -C .gpubin
R=/tmp/res/c1; mkdir -p $R
snap() { tar czf $OUT/c1.tgz -C /tmp/res c1; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/x
for e in "" k kh v kv khv; do
  WGKERNELS_TQ_EXP=$e timeout 90 $X/kernels --filter tq_decode_attention --variants subgroup --reps 30 --no-read-ceiling > $R/tq_$e.txt 2>&1; log "bench '$e' rc=$? $(grep -E 'tq_decode' $R/tq_$e.txt | awk '{print $NF, $(NF-6), $(NF-5)}' | tr '\n' ' ')"
done
snap
for e in "" kv; do
  WGKERNELS_TQ_EXP=$e timeout 60 $X/shader_stats --filter tq_decode_attention --variants subgroup > $R/stats_$e.txt 2>&1; log "stats '$e' rc=$?"
done
snap
wait $WP; log "models written $(ls -la /tmp/l8b.gguf)"
mb=$X/model_bench
for e in "" kv khv; do
  WGKERNELS_TQ_EXP=$e timeout 70 $mb /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv turboquant > $R/mb_tq_$e.txt 2>&1; log "mb tq '$e' rc=$? $(grep -E '^\| tg' $R/mb_tq_$e.txt | tr -s ' ')"
  snap
done
timeout 70 $mb /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv f16 > $R/mb_f16.txt 2>&1; log "mb f16 rc=$? $(grep -E '^\| tg' $R/mb_f16.txt | tr -s ' ')"
log end; snap
