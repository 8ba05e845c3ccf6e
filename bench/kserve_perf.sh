#!/usr/bin/env bash
# The KServe v2 front end (docs/kserve.md) under perf_analyzer against the
# same load through kerneld.v1 (kernelctl perf), same daemon, same run: scale
# on x = float32 [SHAPE] (4096), factor 2, at each of LEVELS clients (1 8 32),
# with the tensors inline in the messages (KServe: raw_input_contents;
# kerneld.v1: inline_data) and in CUDA shared memory (KServe:
# CudaSharedMemoryRegister; kerneld.v1: --via ipc, the same cudaMalloc + IPC
# handle path). Prints one table: per level and path, both front ends'
# throughput and p50, and the KServe / kerneld.v1 p50 ratio (issue 34 asks
# for <= 1.1). Run it on the GPU host.
#
#   bench/kserve_perf.sh [BUILD_DIR]   (default build; "bundle": the GPU
#                                       machine's .device/kerneld)
#
# perf_analyzer is not part of kerneld: the PyPI wheel perf-analyzer (glibc
# >= 2.38) provides it. Environment:
#   PERF_ANALYZER   its path (default: perf_analyzer on PATH)
#   LEVELS          client counts ("1 8 32")
#   SHAPE           elements of x (4096)
#   PATHS           "inline cuda" (add "system" for system shared memory,
#                   against kerneld.v1's --via shm; needs TRANSPORT=unix)
#   TRANSPORT       tcp (loopback, the default) or unix (the daemon's unix
#                   socket: perf_analyzer's 0600 POSIX shm objects are
#                   registered only for a caller whose uid kerneld knows)
#   BACKEND         the backend both front ends ask for ("": the
#                   scheduler's choice; "cuda" on the GPU host)
#   MEASURE_MS      perf_analyzer's window and kernelctl's (2000)
#   STABILITY       perf_analyzer's stability percentage (25; its own
#                   default of 10 does not settle at 1 client on a busy host)
#   MAX_TRIALS      perf_analyzer's windows before it gives up (20)
#   KERNELD_FLAGS   extra daemon flags (e.g. --grpc_api=sync)
#   OUT             keep the CSV and JSON records there (default: a
#                   temporary folder, removed at the end)
#   KERNELD, KERNELCTL, KSERVE_FRONT_BENCH replace the binaries.
# Then, where kserve_front_bench is built, the inline comparison again with
# one client program for both front ends (the ratio of the front ends
# alone, the load generators' own costs aside).
# The daemon runs with --anonymous_buffers=shared: perf_analyzer registers
# its regions on one connection and may send on others, and by default each
# anonymous TCP connection is a principal of its own (docs/security.md).
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
if [[ ${1:-} == bundle ]]; then bench_use_bundle || exit 2; fi
build=${1:-build}
[[ $build == bundle ]] && build=$B
kerneld=${KERNELD:-$build/server/kerneld}
kernelctl=${KERNELCTL:-$build/client/kernelctl}
[[ $build == "${B:-}" ]] && kerneld=${KERNELD:-$B/bin/kerneld} kernelctl=${KERNELCTL:-$B/bin/kernelctl}
front=${KSERVE_FRONT_BENCH:-$build/bench/kserve_front_bench}
[[ $build == "${B:-}" ]] && front=${KSERVE_FRONT_BENCH:-$B/bench/kserve_front_bench}
pa=${PERF_ANALYZER:-$(command -v perf_analyzer || true)}
for b in "$kerneld" "$kernelctl" "$pa"; do
  [[ -n $b && -x $b ]] || {
    echo "kserve_perf.sh: no ${b:-perf_analyzer} (build kerneld and kernelctl; install the perf-analyzer wheel or set PERF_ANALYZER)" >&2
    exit 2
  }
done
bench_workdir kserve-perf
levels=${LEVELS:-1 8 32}
shape=${SHAPE:-4096}
paths=${PATHS:-inline cuda}
backend=${BACKEND:-}
ms=${MEASURE_MS:-2000}
out=${OUT:-$dir/out}
mkdir -p "$out"

# shellcheck disable=SC2086  # KERNELD_FLAGS splits on purpose
bench_start_kerneld kerneld --anonymous_buffers=shared --listen="unix:$dir/kerneld.sock" ${KERNELD_FLAGS:-}
addr=$(ready_tcp "$dir/kerneld.ready")
[[ ${TRANSPORT:-tcp} == unix ]] && addr=unix:$dir/kerneld.sock
echo "# $(uname -n), $(nproc) cores, $(bench_gpu), $(date -u +%FT%TZ)"
echo "# kerneld: $("$kernelctl" --target "$addr" info | head -1); perf_analyzer: $pa"
echo "# scale, x float32 [$shape], factor 2, backend ${backend:-as the scheduler picks}, ${ms} ms windows, $addr"

# One perf_analyzer level: prints "req/s p50_us" from its CSV.
kserve_level() {
  local level=$1 path=$2 csv=$out/kserve-$2-$1.csv
  local args=(-m scale -i grpc -u "$addr" --shape "x:$shape" --concurrency-range "$level:$level"
              --request-parameter factor:2:int --percentile 50 -p "$ms" -f "$csv"
              -s "${STABILITY:-25}" -r "${MAX_TRIALS:-20}")
  [[ -n $backend ]] && args+=(--request-parameter "kerneld.backend:$backend:string")
  case $path in
    cuda) args+=(--shared-memory cuda --output-shared-memory-size $((shape * 4))) ;;
    system) args+=(--shared-memory system --output-shared-memory-size $((shape * 4))) ;;
  esac
  "$pa" "${args[@]}" >"$out/kserve-$path-$level.log" 2>&1 || {
    echo "kserve_perf.sh: perf_analyzer failed ($path, $level clients):" >&2
    tail -20 "$out/kserve-$path-$level.log" >&2
    return 1
  }
  python3 - "$csv" <<'EOF'
import csv, sys
row = next(csv.DictReader(open(sys.argv[1])))
print(row["Inferences/Second"], row["p50 latency"])
EOF
}

# The same levels through kerneld.v1: prints "level req/s p50_us" lines.
v1_levels() {
  local path=$1 json=$out/v1-$1.json via=inline
  case $path in cuda) via=ipc ;; system) via=shm ;; esac
  local args=(--dtype float32 --shape "$shape" --attr factor=2 --via "$via" --mode unary
              --concurrency "${levels// /,}" --window-ms "$ms" --json "$json")
  [[ -n $backend ]] && args+=(--backend "$backend")
  "$kernelctl" --target "$addr" perf scale "${args[@]}" >"$out/v1-$path.log" 2>&1 || {
    echo "kserve_perf.sh: kernelctl perf failed ($path):" >&2
    tail -20 "$out/v1-$path.log" >&2
    return 1
  }
  python3 - "$json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["concurrency"], r["throughput"], r["latency_us"]["p50"])
EOF
}

printf '\n%-7s %-7s %12s %10s %12s %10s %12s\n' clients path "kserve/s" "p50 us" "v1/s" "p50 us" "p50 ratio"
for p in $paths; do
  declare -A v1_tp=() v1_p50=()
  while read -r l tp p50; do
    v1_tp[$l]=$tp
    v1_p50[$l]=$p50
  done < <(v1_levels "$p")
  for l in $levels; do
    read -r ktp kp50 < <(kserve_level "$l" "$p")
    # perf_analyzer's CSV is in microseconds, as kernelctl's JSON.
    ratio=$(python3 -c "import sys; a, b = map(float, sys.argv[1:]); print('%.2f' % (a / b) if b else '-')" \
      "$kp50" "${v1_p50[$l]:-0}")
    printf '%-7s %-7s %12.0f %10.1f %12.0f %10.1f %12s\n' "$l" "$p" "$ktp" "$kp50" \
      "${v1_tp[$l]:-0}" "${v1_p50[$l]:-0}" "$ratio"
  done
done
# The same comparison with one client program for both front ends
# (kserve_front_bench: the same stubs, channels and bytes), so that the
# ratio is the front ends' alone; perf_analyzer and kernelctl are different
# load generators with costs of their own.
if [[ -x $front ]]; then
  echo
  echo "# one client program for both (kserve_front_bench), inline, rounds alternating v1 / KServe:"
  front_args=(--target "$addr" --shape "$shape" --clients "${levels// /,}" --seconds "$(awk "BEGIN { print $ms / 1000 }")"
              --json "$out/front.json")
  [[ -n $backend ]] && front_args+=(--backend "$backend")
  "$front" "${front_args[@]}" | grep -v '^RESULT'
fi
echo
echo "# records: $out (perf_analyzer CSV and logs, kernelctl perf JSON)"
[[ -n ${OUT:-} ]] || echo "# (set OUT=DIR to keep them)"
