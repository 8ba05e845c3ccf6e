#!/usr/bin/env bash
# User kernels on a GPU (docs/user-kernels.md, "Measuring"; issue 30's
# Measure): one kerneld with --allow_user_kernels and an empty
# --jit_cache_dir, driven by user_kernel_bench on its unix socket (the
# caller's uid is the daemon's: an admin) through
#   1. register to first result: a user `scale`'s cold RegisterKernel plus
#      its first Execute (goal <= 2000 ms), then a warm re-register from
#      the JIT cache (goal <= 20 ms) plus its first Execute;
#   2. call overhead: Execute of the user scale and the built-in scale on
#      the same input (VIA: a server buffer, or inline), interleaved; p50,
#      p99 and the p50 ratio user / built-in (goal <= 1.3);
#   3. a fault's cost: FAULTS calls of a kernel that calls __trap() (each
#      must fail INTERNAL), each followed by user scale calls until one
#      succeeds (the sandbox's replacement: p50 and max, goal <= 1000 ms),
#      while another connection calls the built-in scale and rmsnorm in a
#      loop (errors: goal 0; p99 beside a quiet window before the faults).
# Then the daemon is stopped. The table is the bench's; the line above it
# names the GPU, the commit and the date.
#
#   bench/user_kernel_bench.sh [BUILD_DIR]   (default build; "bundle": .device/kerneld)
#
# Environment: KERNELD, USER_KERNEL_BENCH replace the binaries; DEVICE
# (cuda:0), ELEMS (4096 float32), ITERS (2000 calls of each op), FAULTS
# (100), QUIET_CALLS (2000), VIA (buffer, or inline), BUILTIN_BACKEND (cuda),
# KERNELD_FLAGS (extra daemon flags), OUT (a folder to keep the daemon's log,
# the bench's output and its JSON record in; default: none kept).
# Exit status: the bench's (0 measured, 1 a call or check failed, 3 this
# daemon cannot run user kernels: no GPU, said why); 2 a binary is missing.
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
build=${1:-build}
if [[ $build == bundle ]]; then
  bench_use_bundle || exit 2
  bench=${USER_KERNEL_BENCH:-$B/bench/user_kernel_bench}
else
  bench=${USER_KERNEL_BENCH:-$build/bench/user_kernel_bench}
fi
kerneld=${KERNELD:-$build/server/kerneld}
for b in "$kerneld" "$bench"; do
  [[ -x $b ]] || { echo "user_kernel_bench: no $b (build kerneld user_kernel_bench, or set KERNELD, USER_KERNEL_BENCH)" >&2; exit 2; }
done
out=${OUT:-}
if [[ -n $out ]]; then
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
fi
bench_workdir user-kernel-bench
head=$(bench_stamp)
keep() {  # keep FILE...: copies them into OUT, when set
  [[ -z $out ]] || cp "$@" "$out/" 2>/dev/null || true
}

echo "== $head"
# shellcheck disable=SC2086  # KERNELD_FLAGS is a list of flags
bench_start_kerneld kerneld --listen="unix:$dir/kerneld.sock" --allow_user_kernels \
  --jit_cache_dir="$dir/jit" ${KERNELD_FLAGS:-}
# Ready, or the daemon's end: a daemon that cannot start says why in its log.
for _ in $(seq 300); do
  grep -q '^grpc unix:' "$dir/kerneld.ready" 2>/dev/null && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q '^grpc unix:' "$dir/kerneld.ready" 2>/dev/null; then
  echo "user_kernel_bench: kerneld did not start; its log:" >&2
  tail -20 "$dir/kerneld.log" >&2
  keep "$dir/kerneld.log"
  exit 1
fi

rc=0
"$bench" --target "unix:$dir/kerneld.sock" --device "${DEVICE:-cuda:0}" --elems "${ELEMS:-4096}" \
  --iters "${ITERS:-2000}" --faults "${FAULTS:-100}" --quiet_calls "${QUIET_CALLS:-2000}" \
  --via "${VIA:-buffer}" --builtin_backend "${BUILTIN_BACKEND:-cuda}" \
  --json "$dir/user_kernel_bench.json" >"$dir/user_kernel_bench.txt" 2>&1 || rc=$?
grep -v '^RESULT ' "$dir/user_kernel_bench.txt" || true

bench_stop "$spid"
keep "$dir/kerneld.log" "$dir/user_kernel_bench.txt" "$dir/user_kernel_bench.json"
case $rc in
  0) ;;
  3) echo "user_kernel_bench: nothing measured (see above): user kernels need kerneld on a GPU host" >&2 ;;
  *) echo "user_kernel_bench: the bench failed (exit $rc); the daemon's log ends:" >&2
     tail -20 "$dir/kerneld.log" >&2 ;;
esac
[[ -z $out ]] || echo "== logs in $out"
exit "$rc"
