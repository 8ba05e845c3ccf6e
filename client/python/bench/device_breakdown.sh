#!/usr/bin/env bash
# On the GPU machine: where the Python client's call time goes beside
# kernelctl's (call_breakdown.py), and whether the gap between calls changes
# the next one (gap_probe.py), on the bundle's CUDA daemon. Needs .whl
# (tests/gpu_wheels.sh) and the bundle:
#   run(command="client/python/bench/device_breakdown.sh", carry=[".whl", ".device/kerneld.tar.gz"])
set -uo pipefail
B=.device/kerneld
# shellcheck source=bench/bench_lib.sh
source bench/bench_lib.sh  # run from the repository root
bench_unpack_bundle || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site LD_LIBRARY_PATH=/usr/local/cuda/lib64 KERNELD_NATIVE_LIB=$PWD/$B/lib/libkerneld_native.so
rm -f /tmp/kr; $B/bin/kerneld --listen 127.0.0.1:0 --metrics_listen off --ready_file /tmp/kr ${KERNELD_FLAGS:-} > $OUT/kd.log 2>&1 &
for _ in $(seq 300); do [[ -s /tmp/kr ]] && break; sleep 0.1; done
T=$(awk '$1 == "grpc" && $2 !~ /^unix:/ {print $2}' /tmp/kr)
nproc; uptime
[[ ${CPROBE:-1} == 1 && -x $B/bench/native_call_probe ]] && $B/bench/native_call_probe $T 2000 3 2>&1 | tee $OUT/native_call_probe.txt
python3 client/python/bench/call_breakdown.py --target $T --kernelctl $B/bin/kernelctl --calls 2000 --rounds ${ROUNDS:-3} 2>&1 | tee $OUT/breakdown.txt
[[ ${PROBE:-1} == 1 ]] && python3 client/python/bench/gap_probe.py --target $T --calls 2000 2>&1 | tee $OUT/gap_probe.txt
kill %1
