#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/r.tar.xz -C .gpubin
R=/tmp/res/shapes; mkdir -p $R
snap() { tar czf $OUT/shapes.tgz -C /tmp/res shapes; }
. tools/device/models.sh
start_log $R
build_llama_bench $R &
b=$!
write_models $R q8b g4b > /dev/null 2>&1; log "models written"
X=.gpubin/r
$X/model_bench /tmp/g4b.gguf -p 512 -n 128 -r 2 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
snap
wait $b; log "llama built rc=$?"
lb=/tmp/peer/build/bin/llama-bench
for m in q8b g4b; do
  timeout 60 $lb -m /tmp/$m.gguf -p 512 -n 128 -r 5 -o md > $R/llama_${m}.txt 2>&1
  log "llama $m rc=$? $(grep -E 'pp512|tg128' $R/llama_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  timeout 60 $X/model_bench /tmp/$m.gguf -p 512 -n 128 -r 5 --gpu-time > $R/ours_${m}.txt 2>&1
  log "ours $m rc=$? $(grep -E '^\| (pp|tg)' $R/ours_${m}.txt | tr -s ' ' | tr '\n' ' ')"
  snap
done
log end; snap
