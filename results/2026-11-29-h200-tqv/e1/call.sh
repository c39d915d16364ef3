#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/e.tar.xz -C .gpubin
R=/tmp/res/e1; mkdir -p $R; cp .gpubin/call_e.sh $R/call.sh
snap() { tar czf $OUT/e1.tgz -C /tmp/res e1; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/e
for v in base e2 e3 e2u; do WGKERNELS_TQ_SRC=$PWD/exp/$v.wgsl timeout 60 $X/shader_stats --filter tq_decode_attention --variants subgroup > $R/stats_$v.txt 2>&1; log "stats $v $(grep -A2 'Attend' $R/stats_$v.txt | grep -o 'Register Count [0-9]*')"; done
b() { WGKERNELS_TQ_SRC=$PWD/exp/$1.wgsl timeout 90 $X/kernels --filter tq_decode_attention --variants subgroup --reps 30 --no-read-ceiling --csv $R/tq_$1_$2.csv > $R/tq_$1_$2.txt 2>&1; log "bench $1 $2 rc=$? $(grep -E 'tq_decode' $R/tq_$1_$2.txt | awk '{print $(NF-6), $(NF-5), $NF}' | tr '\n' ' ')"; }
for r in 1 2; do for v in base e2 e3 e2u; do b $v $r; done; snap; done
wait $WP; log "models written"
m() { WGKERNELS_TQ_SRC=$PWD/exp/$1.wgsl timeout 80 $X/model_bench /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv $2 > $R/mb_$1_$2.txt 2>&1; log "mb $1 $2 rc=$? $(grep -E '^\| tg' $R/mb_$1_$2.txt | tr -s ' ')"; snap; }
m base turboquant; m e2 turboquant; m e3 turboquant; m e2u turboquant; m base f16; m base turboquant
log end; snap
