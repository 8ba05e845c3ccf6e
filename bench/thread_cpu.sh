#!/usr/bin/env bash
# Where a server's CPU goes, by thread name: starts kerneld (KERNELD_FLAGS,
# default --grpc_api=sync) and the sync echo floor, runs kernelctl perf
# (MODE, default stream; 32 clients; 16 float32 inline) against each in
# turn, and diffs /proc/PID/task/*/stat between two snapshots taken while
# the load runs (threads that exit in between are not seen). Prints CPU
# microseconds per request by thread name for both servers. The floor's
# snapshots are timed by sleeps (6.5 and 8.5 s after the start, inside the
# floor's half of --compare-floor when kerneld's half took its 3 windows):
# compare its per-request figures only when its throughput line looks sane.
#   bench/thread_cpu.sh [BUILD_DIR]    (or KERNELD / KERNELCTL / ECHO_FLOOR)
set -euo pipefail
build=${1:-build}
kerneld=${KERNELD:-$build/server/kerneld}
kernelctl=${KERNELCTL:-$build/client/kernelctl}
floor=${ECHO_FLOOR:-$build/bench/kerneld_echo_floor}
dir=$(mktemp -d /tmp/thread-cpu-XXXXXX)
pids=()
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"  # ready_tcp, bench_stop_on_exit
bench_stop_on_exit
# shellcheck disable=SC2086
"$kerneld" --listen=127.0.0.1:0 --metrics_listen=off --ready_file="$dir/k.ready" \
  ${KERNELD_FLAGS---grpc_api=sync} >"$dir/k.log" 2>&1 &
kpid=$!; pids+=("$kpid")
"$floor" --mode sync --listen 127.0.0.1:0 --ready_file "$dir/f.ready" 2>"$dir/f.log" &
fpid=$!; pids+=("$fpid")
ka=$(ready_tcp "$dir/k.ready")
fa=$(ready_tcp "$dir/f.ready")
sleep 0.5
snap() {  # tid comm ticks context-switches (a thread gone mid-read is left out)
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" \
      "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')" \
      "$(awk '/ctxt_switches/ {s += $2} END {print s}' "$t/status")"
  done 2>/dev/null | awk 'NF == 4' | sort
}
for who in kerneld floor; do
  pid=$kpid; [[ $who == floor ]] && pid=$fpid
  target=$ka; args=(); [[ $who == floor ]] && args=(--compare-floor "$fa")
  "$kernelctl" --target "$target" perf scale --dtype float32 --shape 16 --attr factor=2 \
    --mode "${MODE:-stream}" --concurrency "${CONCURRENCY:-32}" --window-ms 1500 --max-windows 3 \
    "${args[@]}" --json "$dir/$who.json" >/dev/null 2>&1 &
  lp=$!
  # For the floor, kerneld runs first (its 3 windows); snapshot in the floor's.
  [[ $who == floor ]] && sleep 5
  sleep 1.5; snap "$pid" >"$dir/a"; t0=$(date +%s.%N)
  sleep 2; snap "$pid" >"$dir/b"; t1=$(date +%s.%N)
  wait "$lp" || true
  python3 - "$dir/a" "$dir/b" "$dir/$who.json" "$who" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import collections, json, sys
a = {l.split()[0]: l.split() for l in open(sys.argv[1])}
b = {l.split()[0]: l.split() for l in open(sys.argv[2])}
recs = json.load(open(sys.argv[3]))
rec = recs[-1] if sys.argv[4] == "floor" else recs[0]
rate = rec["throughput"]
secs = float(sys.argv[6]) - float(sys.argv[5]); tick = int(sys.argv[7])
by = collections.Counter(); cs = collections.Counter(); n = collections.Counter()
for tid, (_, comm, t, c) in b.items():
    if tid in a:
        by[comm] += int(t) - int(a[tid][2])
        cs[comm] += int(c) - int(a[tid][3])
    n[comm] += 1
tot = sum(by.values())
per = lambda x: x / secs / rate
print(f"## {sys.argv[4]}: {rate:.0f} req/s, {per(tot / tick * 1e6):.1f} CPU us/req, "
      f"{per(sum(cs.values())):.2f} context switches/req over the threads alive throughout")
for comm, d in by.most_common(6):
    print(f"  {comm:18s} x{n[comm]:3d}  {per(d / tick * 1e6):6.1f} us/req  {per(cs[comm]):5.2f} switches/req")
PY
done
