#!/usr/bin/env bash
# Request graphs on a GPU (docs/graphs.md, "Measuring"): one run, ratios to
# references measured in the same run.
#   1. the local reference (graph_bench_local): the Llama-3-8B MLP block at
#      decode (T = 1, 16, 64) and a 16-step scale chain, launched one by one
#      and replayed as CUDA graphs in one process;
#   2. through kerneld (graph_service_bench, the C++ client): the MLP block
#      as one graph call (weights in a buffer kerneld allocated) against four
#      separate calls, checked bit for bit, and the echo floor
#      (kerneld_echo_floor --mode sync) answering the same inline bytes; the
#      chain as one graph call against 16 separate calls at 8 clients, in
#      kernels per second; each graph's first call (its capture) against
#      its replayed calls;
#   3. the daemon's kerneld_graph_* counters;
#   4. a short table of the issue's goals, printed last.
#
#   bench/graph_bench.sh [BUILD_DIR]   (default build; "bundle": .device/kerneld)
#
# Environment: KERNELD, KERNELCTL, ECHO_FLOOR, LOCAL_BENCH (graph_bench_local),
# SERVICE_BENCH (graph_service_bench) replace the binaries; ITERS (200),
# CLIENTS (8), WINDOW_S (2: seconds of each throughput run), TOKENS
# (1,16,64), DEVICE (cuda:0), KERNELD_FLAGS (extra daemon flags),
# SERVICE_FLAGS (extra graph_service_bench flags: a dry run on a machine
# without a GPU takes DEVICE=cpu SERVICE_FLAGS="--hidden 256 --intermediate 512").
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_binaries "${1:-}"
build=${1:-build}
if [[ $build == bundle ]]; then
  local_bench=${LOCAL_BENCH:-$B/bench/graph_bench_local}
  service_bench=${SERVICE_BENCH:-$B/bench/graph_service_bench}
else
  local_bench=${LOCAL_BENCH:-$build/bench/graph_bench_local}
  service_bench=${SERVICE_BENCH:-$build/bench/graph_service_bench}
fi
for b in "$local_bench" "$service_bench"; do
  [[ -x $b ]] || { echo "graph_bench: no $b (build graph_bench_local graph_service_bench)" >&2; exit 2; }
done
iters=${ITERS:-200}
clients=${CLIENTS:-8}
seconds=${WINDOW_S:-2}
tokens=${TOKENS:-1,16,64}
device=${DEVICE:-cuda:0}
bench_workdir graph-bench
head=$(bench_stamp)

echo "== $head"
echo "== 1. local reference (one process)"
"$local_bench" --iters 2000 --seconds "$seconds" | tee "$dir/local.txt" | grep -v '^RESULT '

# shellcheck disable=SC2086  # KERNELD_FLAGS is a list of flags
bench_start_kerneld gpu --metrics_listen=127.0.0.1:0 --listen="unix:$dir/kerneld.sock" ${KERNELD_FLAGS:-}
target=$(ready_tcp "$dir/gpu.ready")
service_target=$target
# DEVICE=cpu (a dry run without a GPU): the weights go to shared memory,
# which only a caller on the unix socket may register.
[[ $device == cpu ]] && service_target=unix:$dir/kerneld.sock
metrics=$(awk '$1 == "metrics" { print $2; exit }' "$dir/gpu.ready")
bench_start_floor floor --mode sync
floor_target=$(ready_tcp "$dir/floor.ready")

echo "== 2. through kerneld ($service_target; echo floor $floor_target)"
# shellcheck disable=SC2086  # SERVICE_FLAGS is a list of flags
"$service_bench" --target "$service_target" --floor "$floor_target" --device "$device" --tokens "$tokens" \
  --iters "$iters" --clients "$clients" --seconds "$seconds" ${SERVICE_FLAGS:-} | tee "$dir/service.txt" | grep -v '^RESULT '

echo "== 3. replay counters"
if [[ -n $metrics ]]; then
  exec 3<>"/dev/tcp/127.0.0.1/${metrics##*:}"
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  grep '^kerneld_graph_' <&3 || true
  exec 3>&-
fi

echo
echo "== summary: $head"
awk -v tokens="$tokens" -v clients="$clients" '
  $1 == "RESULT" { r[$2] = $3 }
  function v(k) { return (k in r) ? r[k] : -1 }
  function yn(ok) { return ok ? "yes" : "NO" }
  END {
    n = split(tokens, T, ",")
    printf "MLP block, bf16, p50 us          "
    for (i = 1; i <= n; i++) printf "%12s", "T=" T[i]
    printf "\n"
    split("one graph call|mlp_graph_p50_us_T;four kerneld calls|mlp_calls_p50_us_T;local 4 launches|local_mlp_direct_p50_us_T;local CUDA-graph replay|local_mlp_replay_p50_us_T;echo floor (same bytes)|mlp_echo_p50_us_T;first graph call (capture)|mlp_graph_first_us_T", rows, ";")
    for (j = 1; j <= 6; j++) {
      split(rows[j], f, "|")
      printf "  %-31s", f[1]
      for (i = 1; i <= n; i++) printf "%12.1f", v(f[2] T[i])
      printf "\n"
    }
    printf "  %-31s", "goal: graph <= echo + 1.15 x local"
    for (i = 1; i <= n; i++) {
      lim = v("mlp_echo_p50_us_T" T[i]) + 1.15 * v("local_mlp_replay_p50_us_T" T[i])
      printf "%12s", sprintf("%.0f %s", lim, yn(v("mlp_graph_p50_us_T" T[i]) <= lim))
    }
    printf "\n  %-31s", "capture: first / replayed"
    for (i = 1; i <= n; i++) {
      q = v("mlp_graph_first_us_T" T[i]) / v("mlp_graph_p50_us_T" T[i])
      printf "%12s", sprintf("%.2f %s", q, yn(q <= 3))
    }
    printf "\n  %-31s", "graph = four calls, bit for bit"
    for (i = 1; i <= n; i++) printf "%12s", yn(v("mlp_same_T" T[i]) == 1)
    g = v("chain_graph_kernels_per_s"); c = v("chain_calls_kernels_per_s")
    l = v("local_chain_kernels_per_s_8")
    printf "\nchain of 16 scale steps, 4096 float32, %d clients (kernels/s)\n", clients
    printf "  %-31s%12.0f\n", "one graph call", g
    printf "  %-31s%12.0f   graph / calls %.2f (goal >= 10: %s)\n", "16 separate calls", c, g / c, yn(g >= 10 * c)
    printf "  %-31s%12.0f   graph / local %.3f (goal >= 0.9: %s)\n", "local replay, 8 threads", l, g / l, yn(g >= 0.9 * l)
    e = v("chain_echo_requests_per_s")
    if (e > 0) printf "  %-31s%12.0f   floor / local %.3f: the most any gRPC graph call reaches; graph / floor %.2f\n", "echo floor x steps (bound)", e * 16, e * 16 / l, g / (e * 16)
    q = v("chain_first_us") / v("chain_replayed_p50_us")
    printf "  %-31s%12.1f   replayed p50 %.1f us, %.2f x (goal <= 3: %s)\n", "first graph call (capture), us", v("chain_first_us"), v("chain_replayed_p50_us"), q, yn(q <= 3)
  }' "$dir/local.txt" "$dir/service.txt"
