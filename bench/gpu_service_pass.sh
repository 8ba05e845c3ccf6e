#!/usr/bin/env bash
# One device call's service pass on the GPU host, over the bundle that
# scripts/device_bundle unpacked into .device/kerneld: the gpu tests, then
# kerneld beside the echo floor (bench/perf_compare.sh, same run), then
# scale on 4096 float16 in a registered CUDA IPC buffer under kernelctl
# perf (the issue's headline shape), with and without --adaptive_spin_us.
# Then the same shape beside the echo floor started with --kernel (it
# registers the same allocation and scales it), and completion_bench.
# SKIP_TESTS=1 / SKIP_COMPARE=1 leave out the first two parts (to fit one
# call beside another pass); SKIP_IPC_LOOP=1 the flag A/B loop. Logs under $OUT; a short table last.
set -uo pipefail
B=${BUNDLE:-.device/kerneld}
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KERNELD_BINARY=$PWD/$B/bin/kerneld
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()
for t in $([[ ${SKIP_TESTS:-0} == 1 ]] || echo "$B"/tests/*); do
  name=$(basename "$t")
  timeout 300 "$t" --gtest_brief=1 >"$OUT/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-28s %s' "$name" "$([[ $rc == 0 ]] && echo PASS || echo "FAIL rc=$rc")")")
  [[ $rc == 0 ]] || tail -20 "$OUT/$name.log"
done
[[ ${SKIP_COMPARE:-0} == 1 ]] || KERNELD=$B/bin/kerneld KERNELCTL=$B/bin/kernelctl ECHO_FLOOR=$B/bench/kerneld_echo_floor \
  WINDOW_MS=${WINDOW_MS:-300} MAX_WINDOWS=${MAX_WINDOWS:-6} \
  timeout 400 bench/perf_compare.sh >"$OUT/perf_compare.txt" 2>&1
summary+=("$(printf '%-28s %s' "perf_compare" "rc=$?")")
# The issue's headline shape beside its own floor: the echo floor started
# with --kernel registers the same CUDA IPC allocation and scales it on the
# GPU (launch + synchronize per request), so kerneld / floor is the price of
# everything kerneld adds to a GPU request.
[[ ${SKIP_COMPARE:-0} == 1 ]] || KERNELD=$B/bin/kerneld KERNELCTL=$B/bin/kernelctl ECHO_FLOOR=$B/bench/kerneld_echo_floor \
  WINDOW_MS=${WINDOW_MS:-300} MAX_WINDOWS=${MAX_WINDOWS:-6} FLOOR_FLAGS=--kernel JSON_DIR="$OUT/ipc_json" \
  REQUEST="--backend cuda --via ipc --dtype float16 --shape 4096" \
  timeout 400 bench/perf_compare.sh >"$OUT/perf_compare_ipc.txt" 2>&1
summary+=("$(printf '%-28s %s' "perf_compare (ipc)" "rc=$?")")
# Launch-to-done of the same kernel with no server: ways of waiting.
timeout 60 "$B/bench/completion_bench" 150 3000 >"$OUT/completion_bench.txt" 2>&1
summary+=("$(printf '%-28s %s' "completion_bench" "rc=$?")")
[[ ${SKIP_IPC_LOOP:-0} == 1 ]] && ipc_flag_sets=() || ipc_flag_sets=("${KERNELD_FLAGS:-}" "${KERNELD_FLAGS:-} --adaptive_spin_us=200")
for flags in "${ipc_flag_sets[@]}"; do
  rm -f /tmp/kready /tmp/kerneld.sock
  "$B/bin/kerneld" --listen 127.0.0.1:0 --listen unix:/tmp/kerneld.sock --metrics_listen off \
    --ready_file /tmp/kready $flags >"$OUT/kerneld_ipc.log" 2>&1 &
  KPID=$!
  for _ in $(seq 100); do [[ -s /tmp/kready ]] && break; sleep 0.1; done
  T=$(awk '/^grpc/ && $2 !~ /^unix/ {print $2; exit}' /tmp/kready)
  for target in "$T" unix:/tmp/kerneld.sock; do
    for mode in unary stream; do
      echo "== flags '$flags' $target $mode" >>"$OUT/perf_ipc.txt"
      timeout 120 "$B/bin/kernelctl" --target "$target" perf scale --backend cuda --via ipc --dtype float16 \
        --shape 4096 --attr factor=2 --concurrency 1,32 --mode $mode --window-ms ${WINDOW_MS:-300} \
        --max-windows ${MAX_WINDOWS:-6} >>"$OUT/perf_ipc.txt" 2>/dev/null
    done
  done
  echo "== flags '$flags' $T unary, inline 2 MiB (1M float16)" >>"$OUT/perf_ipc.txt"
  timeout 60 "$B/bin/kernelctl" --target "$T" perf scale --backend cuda --dtype float16 --shape 1048576 \
    --attr factor=2 --concurrency 1 --window-ms ${WINDOW_MS:-300} --max-windows 6 >>"$OUT/perf_ipc.txt" 2>/dev/null
  kill -TERM $KPID; wait $KPID
done
echo "===== perf_compare (kerneld / floor) ====="; tail -40 "$OUT/perf_compare.txt"
echo "===== scale 4096 float16, CUDA IPC, kerneld / floor --kernel ====="; tail -40 "$OUT/perf_compare_ipc.txt"
echo "===== completion_bench ====="; cat "$OUT/completion_bench.txt"
echo "===== scale 4096 float16, CUDA IPC ====="; cat "$OUT/perf_ipc.txt" 2>/dev/null
echo "===== summary ====="; printf '%s\n' "${summary[@]}"
