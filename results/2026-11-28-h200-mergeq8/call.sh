#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/mq.tar.xz -C .gpubin; tar xJf .gpubin/smp.tar.xz -C .gpubin
R=/tmp/res/mq; mkdir -p $R
snap() { tar czf $OUT/mq.tgz -C /tmp/res mq; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R l1b q7b l8b; log "models written"
( WGKERNELS_KERNEL=q8_merge .gpubin/mq/harness > $R/test_harness_q8_merge.txt 2>&1; echo "rc=$?" >> $R/test_harness_q8_merge.txt
  WGKERNELS_KERNEL=attn_decode .gpubin/mq/harness > $R/test_harness_attn_decode.txt 2>&1; echo "rc=$?" >> $R/test_harness_attn_decode.txt
  .gpubin/mq/model > $R/test_model.txt 2>&1; echo "rc=$?" >> $R/test_model.txt )
log "tests $(grep -hE 'test result|rc=' $R/test_*.txt | tr '\n' ' ')"
snap
.gpubin/mq/model_bench /tmp/l1b.gguf -p 512 -n 128 -r 5 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
for m in l1b q7b l8b; do
  for side in smp mq mq smp; do
    k=$((${k:-0} + 1))
    .gpubin/$side/model_bench /tmp/$m.gguf -p 0 -n 128 -r 5 --gpu-time > $R/ab_${m}_${side}_$k.txt 2>&1
    log "ab $m $side rc=$? $(grep -E '^\| tg' $R/ab_${m}_${side}_$k.txt | tr -s ' ')"
  done
  snap
done
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in l1b q7b l8b; do
  $lb -m /tmp/$m.gguf -p 512 -n 128 -r 3 -o md > $R/llama_${m}.txt 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' $R/llama_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  .gpubin/mq/model_bench /tmp/$m.gguf -p 512 -n 128 -r 5 --gpu-time > $R/ours_${m}.txt 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
$lb -m /tmp/l8b.gguf -p 0 -n 128 -d 4096 -r 2 -o md > $R/llama_l8b_d4096.txt 2>&1; log "llama l8b d4096 $(grep -E 'tg128' $R/llama_l8b_d4096.txt | tr -s ' ')"
for side in smp mq; do
  .gpubin/$side/model_bench /tmp/l8b.gguf -p 0 -n 128 -d 4096 -r 2 --gpu-time > $R/${side}_l8b_d4096.txt 2>&1; log "$side l8b d4096 $(grep -E '^\| tg' $R/${side}_l8b_d4096.txt | tr -s ' ')"
done
snap
for side in smp mq; do
  timeout 100 .gpubin/$side/model_bench /tmp/l8b.gguf -p 0 -n 64 -d 32768 -r 2 --gpu-time > $R/${side}_l8b_d32k.txt 2>&1; log "$side l8b d32768 rc=$? $(grep -E '^\| tg' $R/${side}_l8b_d32k.txt | tr -s ' ')"
  snap
done
log end; snap
