#!/usr/bin/env bash
# Issue 12's GPU request against its floor, daemon flags A/B, in one device
# call over the bundle: for each set of kerneld flags in $VARIANTS (";"
# separated; "" is the defaults) bench/perf_compare.sh runs scale on 4096
# float16 in a registered CUDA IPC buffer (kernelctl perf --via ipc) beside
# the echo floor started with --kernel (it scales the same buffer), TCP and
# unix, unary and stream, at $LEVELS clients; then completion_bench. The
# variants take turns in one run, so their ratios to the floor compare.
# Logs in $OUT/fastpath.tar.gz (one file: a device call returns few); the
# summary table of each variant last.
#
#   run(command="bench/fastpath_ab.sh", carry=[".device/kerneld.tar.gz"])
#   VARIANTS=";--gpu_timing=events;--adaptive_spin_us=200" LEVELS=1,32 bench/fastpath_ab.sh
#
# AB_REQUEST and AB_FLOOR_FLAGS replace the request and the floor's flags
# (the issue's other case, 16 float32 inline wherever the scheduler puts it:
# AB_REQUEST="--dtype float32 --shape 16" AB_FLOOR_FLAGS=); TAG names the
# logs' tarball ($OUT/fastpath$TAG.tar.gz); EXTRAS=0 skips completion_bench
# and the --via stages.
set -uo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_use_bundle || exit 1
logs=$(mktemp -d /tmp/fastpath-XXXXXX)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
IFS=';' read -r -a variants <<<"${VARIANTS-;--gpu_timing=events}"
i=0
for v in "${variants[@]}"; do
  i=$((i + 1))
  KERNELD=$B/bin/kerneld KERNELCTL=$B/bin/kernelctl ECHO_FLOOR=$B/bench/kerneld_echo_floor \
    WINDOW_MS=${WINDOW_MS:-250} MAX_WINDOWS=${MAX_WINDOWS:-4} LEVELS=${LEVELS:-1,32} \
    FLOORS=${FLOORS:-sync callback} FLOOR_FLAGS=${AB_FLOOR_FLAGS---kernel} KERNELD_FLAGS="$v" \
    REQUEST=${AB_REQUEST:-"--backend cuda --via ipc --dtype float16 --shape 4096"} \
    JSON_DIR="$logs/json-$i" \
    timeout 300 bench/perf_compare.sh >"$logs/variant-$i.txt" 2>&1
  echo "variant $i '${v}': rc=$?" | tee -a "$logs/summary.txt"
done
if [[ ${EXTRAS:-1} == 1 ]]; then
timeout 90 "$B/bench/completion_bench" 150 3000 >"$logs/completion_bench.txt" 2>&1
# The server's stages by where the tensors are (--via), one daemon, stream
# ping-pong at one client: decode's share for each kind of reference.
rm -f "$logs/k.ready"
"$B/bin/kerneld" --listen 127.0.0.1:0 --metrics_listen off --ready_file "$logs/k.ready" \
  >"$logs/via-kerneld.log" 2>&1 &
kpid=$!
for _ in $(seq 100); do [[ -s $logs/k.ready ]] && break; sleep 0.1; done
T=$(awk '$1 == "grpc" {print $2; exit}' "$logs/k.ready")
for via in ${VIAS-ipc server-buffer shm inline}; do
  echo "== --via $via" >>"$logs/via.txt"
  timeout 60 "$B/bin/kernelctl" --target "$T" perf scale --backend cuda --via "$via" --dtype float16 \
    --shape 4096 --attr factor=2 --mode stream --concurrency 1 --window-ms 250 --max-windows 4 \
    >>"$logs/via.txt" 2>&1
done
kill "$kpid"
wait "$kpid" 2>/dev/null
fi
mkdir -p "$OUT"
tar czf "$OUT/fastpath${TAG:-}.tar.gz" -C "$logs" .
i=0
for v in "${variants[@]}"; do
  i=$((i + 1))
  echo "===== variant $i: kerneld flags '${v}' (kerneld / floor ${AB_FLOOR_FLAGS---kernel})"
  sed -n '/^## kerneld \/ floor/,$p' "$logs/variant-$i.txt"
  # The server's own stages at one client, per transport and mode.
  awk '/^## /{h=$0; n=0; next} /server p50/ && n++ == 0 {sub(/^ +/, ""); print h " | " $0}' \
    "$logs/variant-$i.txt" | cut -c1-230
done
if [[ ${EXTRAS:-1} == 1 ]]; then
  echo "===== stages by --via (stream, one client)"
  awk '/^== /{v=$0} /server p50/{sub(/^ +/, ""); print v " | " $0}' "$logs/via.txt" | cut -c1-200
  echo "===== completion_bench"
  cat "$logs/completion_bench.txt"
fi
rm -rf "$logs"
