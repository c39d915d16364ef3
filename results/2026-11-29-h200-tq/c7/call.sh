#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json WGPU_BACKEND=vulkan
mkdir -p /work /tmp; ln -sfn $PWD /work/main; ln -sfn $PWD /tmp/x; tar xJf .gpubin/t.tar.xz -C .gpubin
R=/tmp/res/c7; mkdir -p $R
snap() { tar czf $OUT/c7.tgz -C /tmp/res c7; }
. tools/device/models.sh
start_log $R
WGKERNELS_KERNEL=tq_ timeout 200 .gpubin/t/harness --nocapture > $R/test_harness_tq.txt 2>&1; log "harness tq rc=$? $(grep 'test result' $R/test_harness_tq.txt)"
snap
timeout 200 .gpubin/t/turboquant > $R/test_turboquant.txt 2>&1; log "turboquant rc=$? $(grep 'test result' $R/test_turboquant.txt)"
snap
timeout 150 .gpubin/t/model turboquant > $R/test_model_tq.txt 2>&1; log "model tq rc=$? $(grep 'test result' $R/test_model_tq.txt)"
log end; snap
