#!/usr/bin/env bash
# A whole device pass in one call, over the bundle (scripts/device_bundle):
#   PARTS=kernels  the gpu tests, kernel_bench old against new
#                  (.device/base/kernel_bench) and the peers (bench/kernel_pass.sh)
#   PARTS=service  kerneld beside the echo floor and scale on a CUDA IPC buffer
#                  (bench/gpu_service_pass.sh, short windows), then the Python
#                  client's gpu tests and its p50 against kernelctl
#                  (client/python/tests/gpu_pass.sh, wheels in .whl)
#   PARTS="kernels service" both (the default).
# Logs under $OUT; each part prints its own short table last.
#   run(command="bench/device_pass.sh", carry=[".device/kerneld.tar.gz",
#       ".device/base", ".device/peers", ".whl"])
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
B=.device/kerneld
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_unpack_bundle || exit 1
rc=0
for part in ${PARTS:-kernels service}; do
  case $part in
    kernels)
      mkdir -p "$OUT/kernels"
      OUT=$OUT/kernels bench/kernel_pass.sh 2>&1 | tail -${TAIL:-120} || rc=1
      ;;
    service)
      mkdir -p "$OUT/service" "$OUT/python"
      SKIP_TESTS=1 LEVELS=${LEVELS:-1,32} WINDOW_MS=${WINDOW_MS:-250} MAX_WINDOWS=${MAX_WINDOWS:-4} \
        OUT=$OUT/service bench/gpu_service_pass.sh 2>&1 | tail -${TAIL:-120} || rc=1
      OUT=$OUT/python client/python/tests/gpu_pass.sh >"$OUT/python/pass.txt" 2>&1 || rc=1
      grep -E "passed|failed|error" "$OUT/python/pass.txt" | tail -3
      tail -25 "$OUT/python/bench.txt" 2>/dev/null
      ;;
    *) echo "device_pass: unknown part $part"; rc=2 ;;
  esac
done
exit $rc
