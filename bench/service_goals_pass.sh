#!/usr/bin/env bash
# Issue 12's goals in one device call, over the bundle (.device/kerneld or
# .device/kerneld.tar.gz): each goal's request measured on kerneld (default
# flags and --grpc_api=sync) and on the echo floors (sync and callback API)
# by the same client in the same run (bench/perf_compare.sh), then
# bench/work_amplification.sh on the 16 float32 inline request. Logs in
# $OUT/goals.tar.gz. Prints the goals table (goal, target, kerneld default,
# kerneld --grpc_api=sync, best floor), the 16 float32 ratios, then the
# work-amplification tables.
#
#   run(command="bench/service_goals_pass.sh", carry=[".device/kerneld.tar.gz"])
set -uo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_use_bundle || exit 1
logs=$(mktemp -d /tmp/goals-XXXXXX)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$logs/gpu.txt" 2>&1 || echo "no GPU" >"$logs/gpu.txt"
(nproc; uname -n) >>"$logs/gpu.txt"
w=${WINDOW_MS:-250}
mw=${MAX_WINDOWS:-4}
ipc="--backend cuda --via ipc --dtype float16 --shape 4096"
i=0
for flags in "" "--grpc_api=sync"; do
  i=$((i + 1))
  # The headline request beside the floor that scales the same buffer.
  KERNELD_FLAGS="$flags" WINDOW_MS=$w MAX_WINDOWS=$mw LEVELS=1,32 FLOOR_FLAGS=--kernel \
    REQUEST="$ipc" JSON_DIR="$logs/ipc-$i" timeout 300 bench/perf_compare.sh >"$logs/ipc-$i.txt" 2>&1
  echo "ipc '$flags': rc=$?" >>"$logs/rc.txt"
  # 2 MiB inline (1M float16) on the GPU, unary over TCP, one client.
  KERNELD_FLAGS="$flags" WINDOW_MS=$w MAX_WINDOWS=$mw LEVELS=1 FLOOR_FLAGS=--kernel TRANSPORTS=tcp \
    MODES=unary REQUEST="--backend cuda --dtype float16 --shape 1048576" JSON_DIR="$logs/big-$i" \
    timeout 300 bench/perf_compare.sh >"$logs/big-$i.txt" 2>&1
  echo "2 MiB '$flags': rc=$?" >>"$logs/rc.txt"
  # 16 float32 inline, wherever the scheduler puts it.
  KERNELD_FLAGS="$flags" WINDOW_MS=$w MAX_WINDOWS=$mw LEVELS=1,8,32 JSON_DIR="$logs/small-$i" \
    timeout 300 bench/perf_compare.sh >"$logs/small-$i.txt" 2>&1
  echo "16 float32 '$flags': rc=$?" >>"$logs/rc.txt"
done
for m in stream unary; do
  MODE=$m ROUNDS=3 WORK_NS="0 1000 2000 4000" timeout 240 bench/work_amplification.sh \
    >"$logs/work-$m.txt" 2>"$logs/work-$m.err"
  echo "work amplification $m: rc=$?" >>"$logs/rc.txt"
done
mkdir -p "$OUT"
tar czf "$OUT/goals.tar.gz" -C "$logs" .
cat "$logs/gpu.txt" "$logs/rc.txt"
python3 bench/service_goals_table.py "$logs"
for m in stream unary; do
  echo "## handler work, $m, 32 clients (bench/work_amplification.sh)"
  cat "$logs/work-$m.txt"
done
rm -rf "$logs"
