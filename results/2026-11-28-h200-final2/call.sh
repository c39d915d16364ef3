#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/fin2.tar.xz -C .gpubin; tar xJf .gpubin/mq.tar.xz -C .gpubin
R=/tmp/res/final; mkdir -p $R
snap() { tar czf $OUT/final.tgz -C /tmp/res final; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R l1b l8b; log "models written"
( .gpubin/fin2/model > $R/test_model.txt 2>&1; echo "rc=$?" >> $R/test_model.txt
  .gpubin/fin2/timing > $R/test_timing.txt 2>&1; echo "rc=$?" >> $R/test_timing.txt
  for k in q8_ attn_decode model_; do WGKERNELS_KERNEL=$k .gpubin/fin2/harness > $R/test_harness_$k.txt 2>&1; echo "rc=$?" >> $R/test_harness_$k.txt; done )
log "tests $(grep -hE 'test result|rc=' $R/test_*.txt | tr '\n' ' ')"
snap
.gpubin/fin2/model_bench /tmp/l1b.gguf -p 512 -n 128 -r 5 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
for side in mq fin2; do
  timeout 100 .gpubin/$side/model_bench /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time > $R/${side}_l8b_d32k.txt 2>&1; log "$side l8b d32768 rc=$? $(grep -E '^\| tg' $R/${side}_l8b_d32k.txt | tr -s ' ')"
  snap
done
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in l1b l8b; do
  $lb -m /tmp/$m.gguf -p 512 -n 128 -r 3 -o md > $R/llama_${m}.txt 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' $R/llama_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  .gpubin/fin2/model_bench /tmp/$m.gguf -p 512 -n 128 -r 5 --gpu-time > $R/ours_${m}.txt 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
timeout 120 $lb -m /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 -fa 1 -o md > $R/llama_l8b_d32k_f16.txt 2>&1; log "llama l8b d32768 f16 rc=$? $(grep -E 'tg64' $R/llama_l8b_d32k_f16.txt | tr -s ' ')"
snap
timeout 120 $lb -m /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 -fa 1 -ctk q4_0 -ctv q4_0 -o md > $R/llama_l8b_d32k_q4.txt 2>&1; log "llama l8b d32768 q4_0 rc=$? $(grep -E 'tg64' $R/llama_l8b_d32k_q4.txt | tr -s ' ')"
snap
timeout 100 .gpubin/fin2/model_bench /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time --kv turboquant > $R/fin2_l8b_d32k_tq.txt 2>&1; log "fin2 l8b d32768 tq rc=$? $(grep -E '^\| tg' $R/fin2_l8b_d32k_tq.txt | tr -s ' ')"
log end; snap
