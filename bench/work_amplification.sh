#!/usr/bin/env bash
# What a fixed amount of handler work costs beyond itself. Starts kerneld
# once and one kerneld_echo_floor per --work_ns value, all at once (same
# API, loopback TCP; only the pair under test gets load), then
# for each round and each floor runs `kernelctl perf --compare-floor`
# (kerneld, then that floor, one level) and reads each server's CPU time
# from /proc around it. Prints per floor the medians over the rounds of
# p50, throughput and server CPU per request, kerneld beside it, and
# kerneld's own server total p50 (the work it does per request), so the
# floor whose work matches kerneld's can be read off. docs/performance.md,
# "Seventh session" ("On two cores the gap is the work, amplified").
#
#   bench/work_amplification.sh [BUILD_DIR]      (default: build)
#
# Environment: WORK_NS ("0 1000 2000 4000"), ROUNDS (3), MODE (stream),
# CONCURRENCY (32), WINDOW_MS (300), MAX_WINDOWS (4), FLOOR_MODE (sync),
# KERNELD_FLAGS (default --grpc_api=sync, the API the sync floor matches),
# REQUEST (default "--dtype float32 --shape 16"); KERNELD, KERNELCTL and
# ECHO_FLOOR replace the binaries (a device bundle's, for example).
set -euo pipefail

build=${1:-build}
kerneld=${KERNELD:-$build/server/kerneld}
kernelctl=${KERNELCTL:-$build/client/kernelctl}
floor=${ECHO_FLOOR:-$build/bench/kerneld_echo_floor}
for b in "$kerneld" "$kernelctl" "$floor"; do
  [[ -x $b ]] || { echo "work_amplification: no $b (build kerneld kernelctl kerneld_echo_floor)" >&2; exit 2; }
done
work_ns=${WORK_NS:-0 1000 2000 4000}
rounds=${ROUNDS:-3}
mode=${MODE:-stream}
concurrency=${CONCURRENCY:-32}
floor_mode=${FLOOR_MODE:-sync}

dir=$(mktemp -d /tmp/work-amp-XXXXXX)
pids=()
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"  # ready_tcp, bench_stop_on_exit
bench_stop_on_exit
# utime + stime of a process, in clock ticks (threads that exited included).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# shellcheck disable=SC2086
"$kerneld" --listen=127.0.0.1:0 --metrics_listen=off --ready_file="$dir/kerneld.ready" \
  ${KERNELD_FLAGS---grpc_api=sync} >"$dir/kerneld.log" 2>&1 &
kpid=$!
pids+=("$kpid")
kaddr=$(ready_tcp "$dir/kerneld.ready")
declare -A faddr fpid
for w in $work_ns; do
  "$floor" --mode "$floor_mode" --work_ns "$w" --listen 127.0.0.1:0 \
    --ready_file "$dir/floor-$w.ready" 2>"$dir/floor-$w.log" &
  fpid[$w]=$!
  pids+=("$!")
  faddr[$w]=$(ready_tcp "$dir/floor-$w.ready")
done

echo "# $(uname -n), $(nproc) cores, $(date -u +%FT%TZ); $mode, $concurrency clients, floor $floor_mode," \
  "kerneld flags '${KERNELD_FLAGS---grpc_api=sync}'"
for r in $(seq "$rounds"); do
  for w in $work_ns; do
    k0=$(cpu_ticks "$kpid")
    f0=$(cpu_ticks "${fpid[$w]}")
    # shellcheck disable=SC2086
    "$kernelctl" --target "$kaddr" perf scale ${REQUEST:---dtype float32 --shape 16} --attr factor=2 \
      --mode "$mode" --concurrency "$concurrency" --window-ms "${WINDOW_MS:-300}" \
      --max-windows "${MAX_WINDOWS:-4}" --compare-floor "${faddr[$w]}" \
      --json "$dir/r$r-w$w.json" >/dev/null 2>"$dir/perf.err" ||
      { cat "$dir/perf.err" >&2; exit 1; }
    echo "$r $w $k0 $(cpu_ticks "$kpid") $f0 $(cpu_ticks "${fpid[$w]}")" >>"$dir/cpu.txt"
    echo "round $r, floor --work_ns $w: done" >&2
  done
done

python3 - "$dir" "$(getconf CLK_TCK)" <<'PY'
import json, os, statistics, sys
d, tick = sys.argv[1], int(sys.argv[2])
rows = {}
for line in open(os.path.join(d, "cpu.txt")):
    r, w, k0, k1, f0, f1 = line.split()
    k, f = json.load(open(os.path.join(d, f"r{r}-w{w}.json")))[:2]
    cpu = lambda a, b, rec: (int(b) - int(a)) / tick * 1e6 / max(1, rec["requests_total"])
    rows.setdefault(int(w), []).append({
        "k_p50": k["latency_us"]["p50"], "k_thr": k["throughput"], "k_cpu": cpu(k0, k1, k),
        "k_total": (k.get("server_p50_us") or {}).get("total") or 0.0,
        "f_p50": f["latency_us"]["p50"], "f_thr": f["throughput"], "f_cpu": cpu(f0, f1, f),
        "f_ccpu": f["client_cpu_us_per_request"], "k_ccpu": k["client_cpu_us_per_request"]})
med = lambda rs, key: statistics.median(x[key] for x in rs)
print("| floor --work_ns | floor p50 us | floor req/s | floor server CPU us/req | client CPU us/req "
      "| kerneld p50 us | kerneld req/s | kerneld server CPU us/req | kerneld server total p50 us "
      "| kerneld / floor p50 | throughput |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for w in sorted(rows):
    rs = rows[w]
    print(f"| {w} | {med(rs,'f_p50'):.0f} | {med(rs,'f_thr'):.0f} | {med(rs,'f_cpu'):.1f} | "
          f"{med(rs,'f_ccpu'):.1f} (kerneld's {med(rs,'k_ccpu'):.1f}) | {med(rs,'k_p50'):.0f} | "
          f"{med(rs,'k_thr'):.0f} | {med(rs,'k_cpu'):.1f} | {med(rs,'k_total'):.1f} | "
          f"{statistics.median(x['k_p50'] / x['f_p50'] for x in rs):.2f}x | "
          f"{statistics.median(x['k_thr'] / x['f_thr'] for x in rs):.2f}x |")
PY
