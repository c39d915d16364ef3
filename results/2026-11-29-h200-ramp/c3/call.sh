#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work; ln -sfn $PWD /work/main; tar xJf .gpubin/c.tar.xz -C .gpubin
R=/tmp/res/c3; mkdir -p $R
snap() { tar czf $OUT/c3.tgz -C /tmp/res c3; }
. tools/device/models.sh
start_log $R
write_models $R l1b; log "l1b written"
write_models $R l8b > /dev/null 2>&1 &
WP=$!
X=.gpubin/c
m() { timeout 90 $X/$1 /tmp/$2.gguf $4 --gpu-time > $R/mb_$3.txt 2>&1; log "mb $3 rc=$? $(grep -E '^\| (tg|pp)' $R/mb_$3.txt | tr -s ' ' | tr '\n' ' ')"; }
for k in 1 2; do for b in model_bench_orig model_bench model_bench model_bench_orig; do m $b l1b l1b_${b}_$k "-p 512 -n 128 -r 5"; done; done
snap
for s in 4 8; do
  WGK_TRACE=1 timeout 60 $X/model_bench_trace /tmp/l1b.gguf -p 0 -n 512 -r 2 --greedy-steps $s --gpu-time > $R/tr_new_s${s}.txt 2>&1; log "trace new s$s rc=$? $(grep -E '^\| tg' $R/tr_new_s${s}.txt | tr -s ' ')"
done
WGK_TRACE=1 timeout 60 $X/model_bench_trace_orig /tmp/l1b.gguf -p 0 -n 512 -r 2 --greedy-steps 4 --gpu-time > $R/tr_orig_s4.txt 2>&1; log "trace orig s4 rc=$? $(grep -E '^\| tg' $R/tr_orig_s4.txt | tr -s ' ')"
snap
prompt=$(for i in $(seq 1 60); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)
for k in 1 2 3; do for b in generate_orig generate; do
  timeout 60 $X/$b /tmp/l1b.gguf -p "$prompt" -n 256 --gpu-time > $R/gen_l1b_${b}_$k.txt 2>&1
  log "gen l1b $b $k rc=$? $(grep -iE 'decode per token' $R/gen_l1b_${b}_$k.txt | tr -s ' ')"
done; done
wait $WP; log "l8b written"
for b in model_bench_orig model_bench model_bench model_bench_orig; do m $b l8b l8b_$b "-p 512 -n 128 -r 3"; done
snap
for b in model_bench_orig model_bench; do m $b l8b l8b_d4k_$b "-p 512 -n 128 -r 2 -d 4096"; done
log end; snap
