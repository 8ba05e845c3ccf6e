#!/usr/bin/env bash
# Heap allocations per request of kerneld and of the sync echo floor, the
# same request by the same client (16 float32 inline by default): each
# server runs under bench/alloc_count.c twice, for a short run (start-up,
# the schema lookup, three 1 ms windows, shutdown) and for a loaded one
# (three 300 ms windows of `kernelctl perf`), and the difference is divided
# by the requests served between them. Unlike a timing it hardly depends on
# what else the machine is doing (what grows with time alone, timers and
# pollers, is charged to the requests too, and rounds away).
# docs/performance.md ("Seventh session").
#
#   bench/allocs_per_request.sh [BUILD_DIR]     (default: build)
#
# Environment: KERNELD_FLAGS (default --grpc_api=sync), MODE (stream or
# unary; stream), REQUEST (default "--dtype float32 --shape 16"), CC (cc).
set -euo pipefail
build=${1:-build}
kerneld=${KERNELD:-$build/server/kerneld}
kernelctl=${KERNELCTL:-$build/client/kernelctl}
floor=${ECHO_FLOOR:-$build/bench/kerneld_echo_floor}
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"  # ready_tcp, bench_stop_on_exit
dir=$(mktemp -d /tmp/allocs-XXXXXX)
pids=()
bench_stop_on_exit
"${CC:-cc}" -O2 -shared -fPIC -o "$dir/alloc_count.so" "$(dirname "$0")/alloc_count.c" -ldl

# One pass: both servers under the shim; kernelctl perf at one client
# (kerneld, then the floor); writes both servers' allocation counts to
# $dir/$1.counts. Run in this shell (not a subshell) so that the EXIT trap
# stops servers a failed pass left running.
pass() {
  rm -f "$dir"/*.ready "$dir"/*.count
  # shellcheck disable=SC2086
  ALLOC_COUNT_OUT=$dir/k.count LD_PRELOAD=$dir/alloc_count.so "$kerneld" --listen=127.0.0.1:0 \
    --metrics_listen=off --ready_file="$dir/k.ready" ${KERNELD_FLAGS---grpc_api=sync} >/dev/null 2>&1 &
  local kp=$!
  pids+=("$kp")
  ALLOC_COUNT_OUT=$dir/f.count LD_PRELOAD=$dir/alloc_count.so "$floor" --mode sync \
    --listen 127.0.0.1:0 --ready_file "$dir/f.ready" 2>/dev/null &
  local fp=$!
  pids+=("$fp")
  local ka fa windows=3 window_ms=1
  ka=$(ready_tcp "$dir/k.ready")
  fa=$(ready_tcp "$dir/f.ready")
  [[ $1 == load ]] && window_ms=300
  # shellcheck disable=SC2086
  "$kernelctl" --target "$ka" perf scale ${REQUEST:---dtype float32 --shape 16} --attr factor=2 \
    --mode "${MODE:-stream}" --concurrency 1 --window-ms $window_ms --max-windows $windows \
    --compare-floor "$fa" --json "$dir/$1.json" >/dev/null 2>"$dir/perf.err" ||
    { echo "allocs_per_request: kernelctl perf failed:" >&2; cat "$dir/perf.err" >&2; exit 1; }
  kill "$kp" "$fp"
  wait "$kp" "$fp" 2>/dev/null || true
  for c in k f; do
    [[ -s $dir/$c.count ]] || { echo "allocs_per_request: no count from the $c server" >&2; exit 1; }
  done
  echo "$(cat "$dir/k.count") $(cat "$dir/f.count")" >"$dir/$1.counts"
}
pass bare
pass load
read -r kb fb <"$dir/bare.counts"
read -r kl fl <"$dir/load.counts"
python3 - "$dir/bare.json" "$dir/load.json" "$kb" "$fb" "$kl" "$fl" <<'PY'
import json, sys
bare, load = (json.load(open(p)) for p in sys.argv[1:3])
kb, fb, kl, fl = map(int, sys.argv[3:])
for name, i, a, b in (("kerneld", 0, kb, kl), ("floor", 1, fb, fl)):
    n = load[i]["requests_total"] - bare[i]["requests_total"]
    print(f"{name:8s} {(b - a) / n:6.1f} allocations a request ({n} requests)")
PY
