#!/usr/bin/env bash
# One device call for softmax (issue 17): its gpu test, the plan sweep
# (softmax_lab: per row vs split rows, beside copy, one run), and
# kernel_bench at the decode vocabularies, old against new when an older
# kernel_bench is carried in .device/base. Logs under $OUT.
#   run(command="bench/softmax_pass.sh", carry=[".device/kerneld.tar.gz", ".device/lab", ".device/base"])
set -uo pipefail
B=.device/kerneld
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_unpack_bundle || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
SHAPES=${SHAPES:-v32k1=1x32000,v32k=16x32768,v32k64=64x32768,v50k64=64x50000,v128k1=1x128256,v128k4=4x128256,v128k=16x128256,v128k64=64x128256}
timeout 60 $B/tests/softmax_gpu_test --gtest_brief=1 >"$OUT/softmax_gpu_test.log" 2>&1
echo "softmax_gpu_test rc=$?"; tail -4 "$OUT/softmax_gpu_test.log"; grep -m20 "FAILED\|Failure" "$OUT/softmax_gpu_test.log"
[[ -x .device/lab/softmax_lab ]] && timeout 40 .device/lab/softmax_lab --reps 20 | tee "$OUT/softmax_lab.txt"
args=(--ops softmax --flush-l2-clean --reps 30 --extra-shapes "$SHAPES")
if [[ -x .device/base/kernel_bench ]]; then
  OUT=$OUT TOL=0.02 timeout 60 bench/kernel_bench_compare.sh .device/base/kernel_bench $B/bench/kernel_bench "${args[@]}" \
    >"$OUT/compare.txt" 2>&1
  echo "===== kernel_bench softmax, x copy: old vs new (one run) ====="; cat "$OUT/compare.txt"
else
  timeout 60 $B/bench/kernel_bench "${args[@]}" | tee "$OUT/kernel_bench_new.txt"
fi
