#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/a.tar.xz -C .gpubin
R=/tmp/res/c1; mkdir -p $R
snap() { tar czf $OUT/c1.tgz -C /tmp/res c1; }
. tools/device/models.sh
start_log $R
write_models $R l1b; log "models written"
X=.gpubin/a
m() { timeout 60 $X/$1 /tmp/l1b.gguf -p 0 $3 --gpu-time > $R/mb_$2.txt 2>&1; log "mb $2 rc=$? $(grep -E '^\| tg' $R/mb_$2.txt | tr -s ' ')"; }
for k in 1 2; do
  for b in model_bench_orig model_bench model_bench model_bench_orig; do m $b ${b}_n128_$k "-n 128 -r 5"; done
done
snap
for s in 1 2 4 8; do
  m model_bench new_s${s}_n128 "-n 128 -r 5 --greedy-steps $s"
  m model_bench new_s${s}_n512 "-n 512 -r 3 --greedy-steps $s"
  m model_bench_orig orig_s${s}_n128 "-n 128 -r 5 --greedy-steps $s"
done
snap
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for k in 1 2; do
  for b in generate_orig generate; do
    timeout 60 $X/$b /tmp/l1b.gguf -p "$prompt" -n 128 --gpu-time > $R/gen_${b}_$k.txt 2>&1
    log "gen $b $k rc=$? $(grep -iE 'decode per token' $R/gen_${b}_$k.txt | tr -s ' ')"
  done
done
log end; snap
