#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/r.tar.xz -C .gpubin
R=/tmp/res/rows; mkdir -p $R
snap() { tar czf $OUT/rows.tgz -C /tmp/res rows; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R l1b q7b l8b > /dev/null 2>&1; log "models written"
X=.gpubin/r
$X/model_bench /tmp/l1b.gguf -p 512 -n 128 -r 3 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
snap
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in l1b q7b l8b; do
  timeout 60 $lb -m /tmp/$m.gguf -p 512 -n 128 -r 5 -o md > $R/llama_${m}.txt 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' $R/llama_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  timeout 60 $X/model_bench /tmp/$m.gguf -p 512 -n 128 -r 5 --gpu-time > $R/ours_${m}.txt 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
timeout 60 $lb -m /tmp/l8b.gguf -p 512 -n 128 -d 4096 -r 3 -o md > $R/llama_l8b_d4096.txt 2>&1; log "llama l8b d4096 rc=$? $(grep -E 'pp512|tg128' $R/llama_l8b_d4096.txt | tr -s ' ' | tr '\n' ' ')"
timeout 60 $X/model_bench /tmp/l8b.gguf -p 512 -n 128 -d 4096 -r 3 --gpu-time > $R/ours_l8b_d4096.txt 2>&1; log "ours l8b d4096 rc=$? $(grep -E '^\| (pp|tg)' $R/ours_l8b_d4096.txt | tr -s ' ' | tr '\n' ' ')"
snap
timeout 60 $lb -m /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 -fa 1 -o md > $R/llama_l8b_d32k_f16.txt 2>&1; log "llama l8b d32768 f16 rc=$? $(grep -E 'tg64' $R/llama_l8b_d32k_f16.txt | tr -s ' ')"
timeout 60 $lb -m /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 -fa 1 -ctk q4_0 -ctv q4_0 -o md > $R/llama_l8b_d32k_q4.txt 2>&1; log "llama l8b d32768 q4_0 rc=$? $(grep -E 'tg64' $R/llama_l8b_d32k_q4.txt | tr -s ' ')"
for kv in f16 turboquant; do
  timeout 70 $X/model_bench /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv $kv > $R/ours_l8b_d32k_$kv.txt 2>&1; log "ours l8b d32768 $kv rc=$? $(grep -E '^\| tg' $R/ours_l8b_d32k_$kv.txt | tr -s ' ')"
  snap
done
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for m in l1b l8b; do for k in 1 2; do
  timeout 40 $X/generate /tmp/$m.gguf -p "$prompt" -n 128 --gpu-time > $R/gen_${m}_$k.txt 2>&1
  log "gen $m $k rc=$? $(grep -iE 'decode per token' $R/gen_${m}_$k.txt | tr -s ' ')"
done; done
log end; snap
