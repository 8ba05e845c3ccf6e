#!/usr/bin/env bash
# The sync API's pollers on the GPU host, A/B in one device call over the
# bundle: bench/work_amplification.sh (16 float32 inline, no floor work)
# for each kerneld flag set in $VARIANTS (";" separated), stream and unary
# at 32 clients, then scale on 4096 float16 in a CUDA IPC buffer at 32
# unary clients beside the --kernel floor (why the automatic setting keeps
# as many pollers as the GPU has streams). docs/performance.md.
#
#   run(command="bench/pollers_ab.sh", carry=[".device/kerneld.tar.gz"])
set -uo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_use_bundle || exit 1
IFS=';' read -r -a variants <<<"${VARIANTS-"--grpc_api=sync;--grpc_api=sync --grpc_sync_pollers=2;--grpc_api=sync --grpc_sync_pollers=1"}"
logs=$(mktemp -d /tmp/pollers-XXXXXX)
for v in "${variants[@]}"; do
  for m in stream unary; do
    echo "## kerneld '$v', $m, 32 clients, 16 float32 inline (vs the sync floor, no work)"
    KERNELD_FLAGS="$v" MODE=$m ROUNDS=${ROUNDS:-3} WORK_NS=0 timeout 120 bench/work_amplification.sh \
      2>>"$logs/err.txt" | tail -1
  done
done
for v in "${variants[@]}"; do
  echo "## kerneld '$v', IPC scale 4096 float16, 32 unary clients over TCP (vs the --kernel floor)"
  KERNELD_FLAGS="$v" FLOORS=callback TRANSPORTS=tcp MODES=unary LEVELS=32 FLOOR_FLAGS=--kernel \
    REQUEST="--backend cuda --via ipc --dtype float16 --shape 4096" WINDOW_MS=250 MAX_WINDOWS=4 \
    timeout 120 bench/perf_compare.sh 2>>"$logs/err.txt" | tail -1
done
mkdir -p "$OUT"
cp "$logs/err.txt" "$OUT/pollers_err.txt"
rm -rf "$logs"
