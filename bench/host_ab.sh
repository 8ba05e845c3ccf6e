#!/usr/bin/env bash
# A/B measurements of the service path on one machine, kerneld beside the
# echo floor (bench/echo_floor_server.cc) by the same client in the same run;
# docs/performance.md reads them.
#
#   bench/host_ab.sh MEASURE [BUILD_DIR]   (default build; "bundle": the GPU
#                                           machine's .device/kerneld)
#
# MEASURE:
#   compare  bench/perf_compare.sh (kerneld / floor tables and their summary)
#   work     what a fixed amount of handler work costs beyond itself: kerneld
#            beside floors that spin WORK_NS ns a request ("0 1000 2000
#            4000"), ROUNDS (3) rounds of `kernelctl perf --compare-floor`
#            (MODE stream, CONCURRENCY 32), each server's CPU a request read
#            from /proc; medians over the rounds
#   threads  a server's CPU and context switches a request by thread name
#            (/proc/PID/task/*/stat diffed while the load runs), kerneld and
#            the sync floor; the floor's snapshots are timed by sleeps inside
#            its half of --compare-floor: read them only when its throughput
#            looks sane
#   allocs   heap allocations a request of kerneld and the sync floor
#            (bench/alloc_count.c under LD_PRELOAD): a short run and a loaded
#            one, the difference over the requests between them; hardly
#            depends on what else the machine does
#   via      kerneld's stages by where the tensors are (--via ipc,
#            server-buffer, shm, inline; VIAS), scale on 4096 float16, stream
#            ping-pong at one client (CUDA builds)
#   python   the Python client against kernelctl on one CPU daemon (scale on
#            16 and 4096 float32 inline and 4096 through shm;
#            client/python/bench/python_vs_kernelctl.py; PYTHON must import
#            kerneld, default build/pyvenv/bin/python from
#            client/python/tests/run.sh)
#
# VARIANTS: ";"-separated kerneld flag sets; compare, work, threads, allocs
# and via run once for each, in turn in one run, each under a "## kerneld
# flags" line, so their ratios to the floor compare. Unset: one set,
# KERNELD_FLAGS (default --grpc_api=sync for work, threads and allocs, the
# API the sync floor matches; none for compare and via). E.g. on the GPU
# machine, the GPU request with and without timing events:
#   VARIANTS=";--gpu_timing=events" REQUEST="--backend cuda --via ipc --dtype float16 --shape 4096" \
#     FLOOR_FLAGS=--kernel LEVELS=1,32 WINDOW_MS=250 MAX_WINDOWS=4 bench/host_ab.sh compare bundle
# Other environment: REQUEST (default "--dtype float32 --shape 16"; compare,
# work, allocs), WINDOW_MS, MAX_WINDOWS, FLOOR_MODE (work: sync), CC (allocs);
# KERNELD, KERNELCTL, ECHO_FLOOR replace the binaries.
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
measure=${1:-}
case $measure in
  -h | --help) usage; exit 0 ;;
  compare | work | threads | allocs | via | python) ;;
  *) echo "host_ab: MEASURE is compare, work, threads, allocs, via or python (--help)" >&2; exit 2 ;;
esac
build=${2:-}
request=${REQUEST:---dtype float32 --shape 16}

# ---- work --------------------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime

measure_work() {
  local work_ns=${WORK_NS:-0 1000 2000 4000} mode=${MODE:-stream} w r k0 f0 kaddr kpid
  declare -A faddr fpid
  # shellcheck disable=SC2086
  bench_start_kerneld kerneld $1
  kpid=$spid
  kaddr=$(ready_tcp "$dir/kerneld.ready")
  for w in $work_ns; do
    bench_start_floor "floor-$w" --mode "${FLOOR_MODE:-sync}" --work_ns "$w"
    fpid[$w]=$spid
    faddr[$w]=$(ready_tcp "$dir/floor-$w.ready")
  done
  echo "# $(uname -n), $(nproc) cores, $(date -u +%FT%TZ); $mode, ${CONCURRENCY:-32} clients," \
    "floor ${FLOOR_MODE:-sync}"
  rm -f "$dir/cpu.txt"
  for r in $(seq "${ROUNDS:-3}"); do
    for w in $work_ns; do
      k0=$(cpu_ticks "$kpid")
      f0=$(cpu_ticks "${fpid[$w]}")
      # shellcheck disable=SC2086
      "$kernelctl" --target "$kaddr" perf scale $request --attr factor=2 --mode "$mode" \
        --concurrency "${CONCURRENCY:-32}" --window-ms "${WINDOW_MS:-300}" \
        --max-windows "${MAX_WINDOWS:-4}" --compare-floor "${faddr[$w]}" \
        --json "$dir/r$r-w$w.json" >/dev/null 2>"$dir/perf.err" ||
        { cat "$dir/perf.err" >&2; exit 1; }
      echo "$r $w $k0 $(cpu_ticks "$kpid") $f0 $(cpu_ticks "${fpid[$w]}")" >>"$dir/cpu.txt"
      echo "round $r, floor --work_ns $w: done" >&2
    done
  done
  for p in "${pids[@]}"; do bench_stop "$p"; done
  pids=()
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
}

# ---- threads -----------------------------------------------------------------
snap() {  # tid comm ticks context-switches (a thread gone mid-read is left out)
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" \
      "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')" \
      "$(awk '/ctxt_switches/ {s += $2} END {print s}' "$t/status")"
  done 2>/dev/null | awk 'NF == 4' | sort
}

measure_threads() {
  local kpid fpid ka fa who pid target lp t0 t1
  # shellcheck disable=SC2086
  bench_start_kerneld kerneld $1
  kpid=$spid
  bench_start_floor floor --mode sync
  fpid=$spid
  ka=$(ready_tcp "$dir/kerneld.ready")
  fa=$(ready_tcp "$dir/floor.ready")
  sleep 0.5
  for who in kerneld floor; do
    pid=$kpid target=$ka args=()
    [[ $who == floor ]] && pid=$fpid args=(--compare-floor "$fa")
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
  for p in "${pids[@]}"; do bench_stop "$p"; done
  pids=()
}

# ---- allocs ------------------------------------------------------------------
# One pass: both servers under the counter, kernelctl perf at one client
# (kerneld, then the floor); writes both servers' counts to $dir/$2.counts.
alloc_pass() {
  local flags=$1 pass=$2 kp fp ka fa windows=3 window_ms=10 c
  rm -f "$dir"/*.count
  server_env=("ALLOC_COUNT_OUT=$dir/k.count" "LD_PRELOAD=$dir/alloc_count.so")
  # shellcheck disable=SC2086
  bench_start_kerneld k $flags
  kp=$spid
  server_env=("ALLOC_COUNT_OUT=$dir/f.count" "LD_PRELOAD=$dir/alloc_count.so")
  bench_start_floor f --mode sync
  fp=$spid
  server_env=()
  ka=$(ready_tcp "$dir/k.ready")
  fa=$(ready_tcp "$dir/f.ready")
  [[ $pass == load ]] && window_ms=300
  # shellcheck disable=SC2086
  "$kernelctl" --target "$ka" perf scale $request --attr factor=2 --mode "${MODE:-stream}" \
    --concurrency 1 --window-ms $window_ms --max-windows $windows --compare-floor "$fa" \
    --json "$dir/$pass.json" >/dev/null 2>"$dir/perf.err" ||
    { echo "host_ab allocs: kernelctl perf failed:" >&2; cat "$dir/perf.err" >&2; exit 1; }
  bench_stop "$kp"
  bench_stop "$fp"
  pids=()
  for c in k f; do
    [[ -s $dir/$c.count ]] || { echo "host_ab allocs: no count from the $c server" >&2; exit 1; }
  done
  echo "$(cat "$dir/k.count") $(cat "$dir/f.count")" >"$dir/$pass.counts"
}

measure_allocs() {
  [[ -f $dir/alloc_count.so ]] ||
    "${CC:-cc}" -O2 -shared -fPIC -o "$dir/alloc_count.so" "$here/alloc_count.c" -ldl
  alloc_pass "$1" bare
  alloc_pass "$1" load
  local kb fb kl fl
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
}

# ---- via ---------------------------------------------------------------------
measure_via() {
  local t via
  # shellcheck disable=SC2086
  bench_start_kerneld kerneld $1
  t=$(ready_tcp "$dir/kerneld.ready")
  for via in ${VIAS:-ipc server-buffer shm inline}; do
    "$kernelctl" --target "$t" perf scale --backend cuda --via "$via" --dtype float16 --shape 4096 \
      --attr factor=2 --mode stream --concurrency 1 --window-ms "${WINDOW_MS:-250}" \
      --max-windows "${MAX_WINDOWS:-4}" >"$dir/via.txt" 2>&1 || true
    awk -v v="$via" '/server p50/ {sub(/^ +/, ""); print "--via " v " | " $0}' "$dir/via.txt" | cut -c1-200
    grep -q "server p50" "$dir/via.txt" || { echo "--via $via:"; tail -3 "$dir/via.txt"; }
  done
  bench_stop "$spid"
  pids=()
}

# ---- python ------------------------------------------------------------------
measure_python() {
  local root py args
  root=$(cd "$here/.." && pwd)
  if [[ -z $build ]]; then
    build=$root/build-cpu
    [[ -x $build/server/kerneld ]] || build=$root/build
  fi
  py=${PYTHON:-$root/build/pyvenv/bin/python}
  [[ -x $py ]] || py=python3
  for args in "--shape 16" "--shape 4096" "--shape 4096 --via shm"; do
    # shellcheck disable=SC2086
    "$py" "$root/client/python/bench/python_vs_kernelctl.py" --kerneld "${KERNELD:-$build/server/kerneld}" \
      --kernelctl "${KERNELCTL:-$build/client/kernelctl}" --dtype float32 $args
    echo
  done
}

if [[ $measure == python ]]; then
  measure_python
  exit
fi
bench_binaries "$build"
bench_workdir "host-ab-$measure"
default_flags=
case $measure in work | threads | allocs) default_flags=--grpc_api=sync ;; esac
if [[ -n ${VARIANTS+x} ]]; then
  IFS=';' read -r -a variants <<<"$VARIANTS"
else
  variants=("${KERNELD_FLAGS-$default_flags}")
fi
for v in "${variants[@]}"; do
  [[ ${#variants[@]} -gt 1 ]] && echo "## kerneld flags '$v'"
  case $measure in
    compare) KERNELD_FLAGS=$v "$here/perf_compare.sh" "$build" ;;
    *) "measure_$measure" "$v" ;;
  esac
done
