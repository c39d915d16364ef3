#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/z.tar.xz -C .gpubin
R=/tmp/res/c6; mkdir -p $R
snap() { tar czf $OUT/c6.tgz -C /tmp/res c6; }
. tools/device/models.sh
start_log $R
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/z
timeout 60 $X/kernels --filter tq_quantize --variants subgroup --reps 30 --no-read-ceiling > $R/tq_quant.txt 2>&1; log "bench rc=$? $(grep -E 'tq_quant' $R/tq_quant.txt | awk '{print $(NF-6)}' | tr '\n' ' ')"
wait $WP; log "models written"
m() { timeout 80 $1 /tmp/l8b.gguf -p 0 $4 -r $5 --gpu-time --kv turboquant > $R/mb_$2_$3.txt 2>&1; log "mb $2 $3 rc=$? $(grep -E '^\| tg' $R/mb_$2_$3.txt | tr -s ' ')"; snap; }
m $X/model_bench_orig orig d32k "-n 64 -d 32768" 2
m $X/model_bench new d32k "-n 64 -d 32768" 2
m $X/model_bench_orig orig tg128 "-n 128" 3
m $X/model_bench new tg128 "-n 128" 3
m $X/model_bench new d32k2 "-n 64 -d 32768" 2
m $X/model_bench_orig orig d32k2 "-n 64 -d 32768" 2
log end; snap
