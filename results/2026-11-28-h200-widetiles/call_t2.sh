#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/w1.tar.xz -C .gpubin; tar xJf .gpubin/w2.tar.xz -C .gpubin
R=/tmp/res/t2; mkdir -p $R
snap() { tar czf $OUT/t2.tgz -C /tmp/res t2; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R q7b l8b l1b > /dev/null 2>&1; log "models written"
for side in w1 w2 w2 w1; do
  timeout 100 .gpubin/$side/model_bench /tmp/q7b.gguf -p 512 -n 0 -r 5 --gpu-time > $R/ab_q7b_$side.$((++k)).txt 2>&1
  log "ab q7b $side rc=$? $(grep -E '^\| (pp|tg)' $R/ab_q7b_$side.$k.txt | tr -s ' ' | tr '\n' ' ')"
done
snap
timeout 150 .gpubin/w2/matmul matrix --nocapture > $R/test_matmul.txt 2>&1; log "matmul test rc=$? $(grep -E 'test result|cases passed' $R/test_matmul.txt | tr '\n' ' ')"
snap
for s in 0 128 256; do
  if [ $s = 0 ]; then unset WGKERNELS_TQ_SPLIT; else export WGKERNELS_TQ_SPLIT=$s; fi
  timeout 60 .gpubin/w2/bench --filter "tq_decode_attention h=32 kvh=8 d=128 cap=32768" --reps 20 --no-read-ceiling --csv $R/tq_$s.csv > $R/tq_$s.txt 2>&1
  log "tq $s rc=$? $(grep -E 'tq_decode' $R/tq_$s.csv | cut -d, -f3,6,7 | tr '\n' ' ')"
done
unset WGKERNELS_TQ_SPLIT
snap
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in q7b l8b l1b; do
  $lb -m /tmp/$m.gguf -p 512 -n 128 -r 3 -o md > $R/llama_${m}.txt 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' $R/llama_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  .gpubin/w2/model_bench /tmp/$m.gguf -p 512 -n 128 -r 3 --gpu-time > $R/ours_${m}.txt 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
log end; snap
