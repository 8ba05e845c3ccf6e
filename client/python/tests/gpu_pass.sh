#!/usr/bin/env bash
# The Python client on the GPU machine, in one device call, from the
# repository root:
#   1. installs the wheels in .whl (client/python/tests/gpu_wheels.sh made them
#      here) into /tmp/site: kerneld, and the protobuf/grpcio it was built with;
#   2. runs the `gpu` tests (torch and cupy over CUDA IPC, out= in place,
#      storage offsets, a freed and reallocated allocation, bfloat16, two
#      client processes) against the CUDA daemon of the bundle;
#   3. runs bench/bench_scale.py: Python p50 against kernelctl's on one daemon;
#   4. bench/profile_ipc.py: where the torch IPC call's time goes (cProfile,
#      the server's own total beside the client's p50); SKIP_PROFILE=1 skips.
# Needs the bundle (scripts/device_bundle): .device/kerneld, or the tarball
# .device/kerneld.tar.gz, which is unpacked here. Logs go to $OUT.
#
#   run(command="client/python/tests/gpu_pass.sh",
#       carry=[".whl", ".device/kerneld.tar.gz"])        # or ".device/kerneld"
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.device/kerneld
# shellcheck source=bench/bench_lib.sh
source bench/bench_lib.sh  # run from the repository root
bench_unpack_bundle || exit 1
[[ -x $B/bin/kerneld ]] || { echo "gpu_pass: no $B/bin/kerneld (carry .device/kerneld or .device/kerneld.tar.gz)"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site
# rpc="native" (the default client) through the bundle's libkerneld_native;
# GPU_PASS_NATIVE=0 runs everything on grpcio instead.
if [[ ${GPU_PASS_NATIVE:-1} == 1 ]]; then
  export KERNELD_NATIVE_LIB=$PWD/$B/lib/libkerneld_native.so
else
  export KERNELD_NATIVE_LIB=0
fi
python3 -c 'import kerneld, grpc, google.protobuf as pb, torch, numpy; import cupy; print("gpu_pass: kerneld", kerneld.__version__, "grpcio", grpc.__version__, "protobuf", pb.__version__, "torch", torch.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())' 2>&1 | tee "$OUT/versions.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/versions.txt"

rc=0
echo "==== gpu tests"
[[ ${SKIP_GPU_TESTS:-0} == 1 ]] || KERNELD_BIN=$PWD/$B/bin/kerneld timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider -rs \
  --junitxml="$OUT/gpu_pytest.xml" client/python/tests/test_gpu.py 2>&1 | tee "$OUT/gpu_pytest.log"
rc=${PIPESTATUS[0]}

echo "==== benchmark"
rm -f /tmp/kpy-ready
# shellcheck disable=SC2086  # KERNELD_FLAGS: extra daemon flags, split on purpose
"$B/bin/kerneld" --listen 127.0.0.1:0 --metrics_listen off --ready_file /tmp/kpy-ready ${KERNELD_FLAGS:-} >"$OUT/bench_kerneld.log" 2>&1 &
kpid=$!
for _ in $(seq 300); do [[ -s /tmp/kpy-ready ]] && break; sleep 0.1; done
T=$(awk '$1 == "grpc" && $2 !~ /^unix:/ {print $2}' /tmp/kpy-ready)
timeout 150 python3 client/python/bench/bench_scale.py --target "$T" --kernelctl "$B/bin/kernelctl" \
  --repeat 3000 --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
echo "==== profile of the torch IPC path"
[[ ${SKIP_PROFILE:-0} == 1 ]] || timeout 120 python3 client/python/bench/profile_ipc.py --target "$T" \
  --calls 2000 >"$OUT/profile_ipc.txt" 2>&1
grep -E "^rpc=|^pieces" "$OUT/profile_ipc.txt"
kill $kpid 2>/dev/null; wait $kpid 2>/dev/null
echo "gpu_pass: pytest rc=$rc"
exit $rc
