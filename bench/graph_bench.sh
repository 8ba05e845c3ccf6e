#!/usr/bin/env bash
# Request graphs on a GPU (docs/graphs.md, "Measured"): starts kerneld, then
#   1. the local reference (graph_bench_local): the Llama-3-8B MLP block at
#      decode (T = 1, 16, 64) and a 16-step scale chain, launched one by one
#      and replayed as CUDA graphs in one process;
#   2. the MLP block through kerneld (examples/mlp_graph.py): one graph call
#      against four separate calls, p50 and p99, checked bit for bit;
#   3. the chain through kerneld at 8 clients: one graph call of 16 steps
#      (kernelctl graph, first call = capture) against 16 separate calls of
#      scale (kernelctl perf), in kernels per second;
#   4. the daemon's kerneld_graph_* counters.
#
#   bench/graph_bench.sh [BUILD_DIR]   (default build; "bundle": .device/kerneld)
#
# Environment: KERNELD, KERNELCTL (binaries), LOCAL_BENCH (graph_bench_local),
# PYTHON (a python with the kerneld package, numpy and ml_dtypes installed;
# client/python/tests/gpu_wheels.sh brings them to the GPU machine), ITERS (200),
# KERNELD_FLAGS (extra daemon flags).
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
build=${1:-build}
if [[ $build == bundle ]]; then bench_use_bundle || exit 2; fi
kerneld=${KERNELD:-$build/server/kerneld}
kernelctl=${KERNELCTL:-$build/client/kernelctl}
local_bench=${LOCAL_BENCH:-$build/bench/graph_bench_local}
[[ $build == bundle ]] && local_bench=${LOCAL_BENCH:-$B/bench/graph_bench_local}
python=${PYTHON:-python3}
iters=${ITERS:-200}
for b in "$kerneld" "$kernelctl" "$local_bench"; do
  [[ -x $b ]] || { echo "graph_bench: no $b (build kerneld kernelctl graph_bench_local)" >&2; exit 2; }
done
bench_workdir graph-bench
root=$(cd "$(dirname "$0")/.." && pwd)

echo "== $(bench_gpu); $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?"); $(date -u +%F)"
echo "== 1. local reference (one process)"
"$local_bench" --iters 2000 --seconds 2

# shellcheck disable=SC2086  # KERNELD_FLAGS is a list of flags
bench_start_kerneld gpu --metrics_listen=127.0.0.1:0 ${KERNELD_FLAGS:-}
target=$(ready_tcp "$dir/gpu.ready")
metrics=$(awk '$1 == "metrics" { print $2; exit }' "$dir/gpu.ready")

echo "== 2. MLP block through kerneld ($target)"
if "$python" -c 'import kerneld, ml_dtypes' 2>/dev/null; then
  "$python" "$root/examples/mlp_graph.py" --target "$target" --device cuda:0 --iters "$iters"
else
  echo "(skipped: $python cannot import kerneld and ml_dtypes; set PYTHON to one that can)"
fi

echo "== 3. chain of 16 scale steps on 4096 float32, 8 clients"
"$kernelctl" --target "$target" graph "$root/examples/graphs/chain16.json" --device cuda:0 \
  --repeat 2000 --concurrency 8 --check
"$kernelctl" --target "$target" perf scale --dtype float32 --shape 4096 --attr factor=1.001 \
  --device cuda:0 --concurrency 8 --window-ms 1000
echo "(kernels/s: the graph's steps/s above against perf's req/s, one kernel per request)"

echo "== 4. replay counters"
if [[ -n $metrics ]]; then
  exec 3<>"/dev/tcp/127.0.0.1/$metrics"
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  grep '^kerneld_graph_' <&3 || true
  exec 3>&-
fi
