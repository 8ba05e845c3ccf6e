#!/usr/bin/env bash
# kerneld against the echo floor, same run, same machine: starts kerneld
# (CPU or GPU, whatever the build and machine give) and kerneld_echo_floor
# (sync and callback API) on loopback TCP and on a unix socket, runs
# `kernelctl perf --compare-floor` for scale, float32, 16 elements inline at
# concurrency 1,8,32, unary and stream, prints the tables and a summary of
# kerneld / floor ratios, and stops the servers. docs/performance.md.
#
#   bench/perf_compare.sh [BUILD_DIR]   (default build; "bundle": the GPU
#                                        machine's .device/kerneld)
#
# Environment: WINDOW_MS (500), MAX_WINDOWS (10), LEVELS (1,8,32),
# FLOORS ("sync callback"), TRANSPORTS ("tcp unix"), MODES ("unary stream"),
# KERNELD_FLAGS (extra daemon flags, e.g. --worker_spin_us=1000),
# PERF_FLAGS (extra kernelctl perf flags, e.g. "--via shm"),
# REQUEST (the request's flags; default "--dtype float32 --shape 16"; the
# GPU request: "--backend cuda --via ipc --dtype float16 --shape 4096" with
# FLOOR_FLAGS=--kernel, so the floor scales the same registered buffer),
# FLOOR_FLAGS (extra floor flags, e.g. --kernel),
# JSON_DIR (keep the JSON records there; default: a temporary directory);
# KERNELD, KERNELCTL, ECHO_FLOOR replace the binaries.
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_binaries "${1:-}"
bench_workdir perf-compare

window_ms=${WINDOW_MS:-500}
max_windows=${MAX_WINDOWS:-10}
levels=${LEVELS:-1,8,32}
floors=${FLOORS:-sync callback}
transports=${TRANSPORTS:-tcp unix}
modes=${MODES:-unary stream}
json_dir=${JSON_DIR:-$dir/json}
mkdir -p "$json_dir"

# shellcheck disable=SC2086  # KERNELD_FLAGS and FLOOR_FLAGS split on purpose
bench_start_kerneld kerneld --listen="unix:$dir/kerneld.sock" ${KERNELD_FLAGS:-}
declare -A tcp
tcp[kerneld]=$(ready_tcp "$dir/kerneld.ready")
for f in $floors; do
  # shellcheck disable=SC2086
  bench_start_floor "floor-$f" --mode "$f" ${FLOOR_FLAGS:-} --listen "unix:$dir/floor-$f.sock"
  tcp[$f]=$(ready_tcp "$dir/floor-$f.ready")
done

echo "# $(uname -n), $(nproc) cores, $(date -u +%FT%TZ); kerneld: $("$kernelctl" --target "${tcp[kerneld]}" info | head -1)"
"$kernelctl" --target "${tcp[kerneld]}" info | sed -n 's/^backends:/# backends:/p'
for t in $transports; do
  for m in $modes; do
    for f in $floors; do
      if [[ $t == tcp ]]; then k=${tcp[kerneld]}; fl=${tcp[$f]}; else k=unix:$dir/kerneld.sock; fl=unix:$dir/floor-$f.sock; fi
      echo
      echo "## $t, $m, floor: $f"
      # shellcheck disable=SC2086
      "$kernelctl" --target "$k" perf scale ${REQUEST:---dtype float32 --shape 16} --attr factor=2 \
        --mode "$m" --concurrency "$levels" --window-ms "$window_ms" --max-windows "$max_windows" \
        --compare-floor "$fl" --json "$json_dir/$t-$m-$f.json" ${PERF_FLAGS:-}
    done
  done
done

echo
echo "## kerneld / floor (p50 and p99: lower is better; throughput: higher is better)"
python3 - "$json_dir" <<'PY'
import glob, json, os, sys
print("| transport | mode | floor | clients | p50 | p99 | throughput | kerneld p50 us | floor p50 us |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    t, m, f = os.path.basename(path)[:-5].split("-")
    recs = json.load(open(path))
    for k, fl in zip(recs[0::2], recs[1::2]):
        r = k["ratio_to_floor"]
        print(f"| {t} | {m} | {f} | {k['concurrency']} | {r['p50']:.2f}x | {r['p99']:.2f}x | "
              f"{r['throughput']:.2f}x | {k['latency_us']['p50']:.0f} | {fl['latency_us']['p50']:.0f} |")
PY
