#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/smp.tar.xz -C .gpubin
R=/tmp/res/smp; mkdir -p $R
snap() { tar czf $OUT/smp.tgz -C /tmp/res smp; }
. tools/device/models.sh
start_log $R
( WGKERNELS_KERNEL=model_ .gpubin/smp/harness > $R/test_harness_model.txt 2>&1; echo "rc=$?" >> $R/test_harness_model.txt; .gpubin/smp/model sampling > $R/test_model_sampling.txt 2>&1; echo "rc=$?" >> $R/test_model_sampling.txt ) 
log "tests $(grep -hE 'test result|rc=' $R/test_*.txt | tr '\n' ' ')"
write_models $R l1b l8b; log "models written"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
.gpubin/smp/model_bench /tmp/l1b.gguf -p 512 -n 128 -r 5 > $R/warm_up.txt 2>&1; log "warm-up $(grep -E '^\| (pp|tg)' $R/warm_up.txt | tr -s ' ' | tr '\n' ' ')"
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for k in 1 2; do
  for m in l1b l8b; do
    for mode in greedy topk topk_cpu; do
      sa=""; [ $mode != greedy ] && sa="--temp 0.8 --top-k 40 --seed 1"
      [ $mode = topk_cpu ] && sa="$sa --cpu-sample"
      .gpubin/smp/generate /tmp/$m.gguf -p "$prompt" -n 128 --gpu-time --print-tokens $sa > $R/gen_${m}_${mode}_$k.txt 2>&1
      log "generate $m $mode $k rc=$? $(grep -iE 'decode per token|^decode' $R/gen_${m}_${mode}_$k.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
    done
    snap
  done
done
log end; snap
