#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/x.tar.xz -C .gpubin
R=/tmp/res/c3; mkdir -p $R
snap() { tar czf $OUT/c3.tgz -C /tmp/res c3; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/x
b() { timeout 90 $1 --filter tq_decode_attention --variants subgroup,portable --reps 30 --no-read-ceiling --csv $R/tq_$2.csv > $R/tq_$2.txt 2>&1; log "bench $2 rc=$? $(grep -E 'tq_decode' $R/tq_$2.txt | awk '{print $(NF-6), $(NF-5), $NF}' | tr '\n' ' ')"; }
b $X/kernels_orig orig1
b $X/kernels new1
b $X/kernels_orig orig2
b $X/kernels new2
WGKERNELS_TQ_SPLIT=256 b $X/kernels new_s256
snap
timeout 60 $X/shader_stats --filter tq_decode_attention --variants subgroup > $R/stats_new.txt 2>&1
wait $WP; log "models written"
m() { timeout 80 $1 /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv $3 > $R/mb_$2_$3.txt 2>&1; log "mb $2 $3 rc=$? $(grep -E '^\| tg' $R/mb_$2_$3.txt | tr -s ' ')"; snap; }
m $X/model_bench_orig orig turboquant
m $X/model_bench new turboquant
m $X/model_bench new f16
m $X/model_bench new turboquant
m $X/model_bench_orig orig turboquant
log end; snap
