#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/w1.tar.xz -C .gpubin
R=/tmp/res/t1; mkdir -p $R
snap() { tar czf $OUT/t1.tgz -C /tmp/res t1; }
. tools/device/models.sh
start_log $R
write_models $R q7b l8b > /dev/null 2>&1 &
wm=$!
B=.gpubin/w1/bench
for t in none 2,4,4,2,64 2,2,4,2,64 2,2,4,4,64 2,4,4,4,64 4,2,4,4,64 4,4,2,2,64 2,4,2,4,64; do
  if [ $t = none ]; then unset WGKERNELS_GEMM_TILE; else export WGKERNELS_GEMM_TILE=$t; fi
  timeout 150 $B --filter "q4_k m=512 n=|q4_k m=2048 n=4096 k=4096 staged" --variants matrix --reps 20 --no-read-ceiling --csv $R/gemm_$t.csv > $R/gemm_$t.txt 2>&1
  log "gemm $t rc=$? $(grep staged $R/gemm_$t.csv | cut -d, -f2,7 | tr '\n' ' ')"
  snap
done
unset WGKERNELS_GEMM_TILE
for s in 0 128 256; do
  if [ $s = 0 ]; then unset WGKERNELS_TQ_SPLIT; else export WGKERNELS_TQ_SPLIT=$s; fi
  timeout 100 $B --filter "tq_decode|attn_decode" --reps 20 --no-read-ceiling --csv $R/tq_$s.csv > $R/tq_$s.txt 2>&1
  log "tq $s rc=$? $(grep -E 'tq_decode|kv=32768' $R/tq_$s.csv | cut -d, -f2,3,7 | tr '\n' ' ')"
  snap
done
unset WGKERNELS_TQ_SPLIT
wait $wm; log "models written"
for m in q7b l8b; do
  for t in none 2,4,4,2,64 none 2,4,4,2,64; do
    if [ $t = none ]; then unset WGKERNELS_GEMM_TILE; else export WGKERNELS_GEMM_TILE=$t; fi
    timeout 120 .gpubin/w1/model_bench /tmp/$m.gguf -p 512 -n 0 -r 5 --gpu-time > $R/mb_${m}_$t.txt 2>&1
    log "mb $m $t rc=$? $(grep -E '^\| (pp|tg)' $R/mb_${m}_$t.txt | tr -s ' ' | tr '\n' ' ')"
    snap
  done
done
log end; snap
