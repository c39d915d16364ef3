#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/w1.tar.xz -C .gpubin; tar xJf .gpubin/w2.tar.xz -C .gpubin
R=/tmp/res/t3; mkdir -p $R
snap() { tar czf $OUT/t3.tgz -C /tmp/res t3; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R q7b > /dev/null 2>&1; log "models written"
.gpubin/w2/model_bench /tmp/q7b.gguf -p 512 -n 0 -r 5 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
k=0
for side in w1 w2 w2 w1 w1 w2; do
  k=$((k + 1))
  timeout 100 .gpubin/$side/model_bench /tmp/q7b.gguf -p 512 -n 0 -r 10 --gpu-time > $R/ab_q7b_$side.$k.txt 2>&1
  log "ab q7b $side rc=$? $(grep -E '^\| (pp|tg)' $R/ab_q7b_$side.$k.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for side in llama w2 llama w2; do
  k=$((k + 1))
  if [ $side = llama ]; then $lb -m /tmp/q7b.gguf -p 512 -n 0 -r 10 -o md > $R/pp_$side.$k.txt 2>&1
  else .gpubin/w2/model_bench /tmp/q7b.gguf -p 512 -n 0 -r 10 --gpu-time > $R/pp_$side.$k.txt 2>&1; fi
  log "pp q7b $side rc=$? $(grep -E 'pp512' $R/pp_$side.$k.txt | tr -s ' ')"
  snap
done
log end; snap
