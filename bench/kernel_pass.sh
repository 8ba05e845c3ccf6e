#!/usr/bin/env bash
# One device call's kernel pass on the GPU host: the gpu tests of the bundle,
# then kernel_bench old against new in one run (bench/kernel_bench_compare.sh,
# when an older kernel_bench is carried in .device/base), then the peers
# (bench/peers.py: torch eager, and FlashInfer's norms when
# .device/peers/flashinfer_peer is carried) at the decode shapes of issue 17.
# Logs under $OUT; a short table last.
#   run(command="bench/kernel_pass.sh", carry=[".device/kerneld.tar.gz", ".device/base", ".device/peers"])
set -uo pipefail
B=.device/kerneld
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_unpack_bundle || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KERNELD_BINARY=$PWD/$B/bin/kerneld
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()
for t in "$B"/tests/*; do
  name=$(basename "$t")
  timeout 240 "$t" --gtest_brief=1 >"$OUT/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-34s %s' "$name" "$([[ $rc == 0 ]] && echo PASS || echo "FAIL rc=$rc")")")
  [[ $rc == 0 ]] || tail -15 "$OUT/$name.log"
done
if [[ -x .device/base/kernel_bench ]]; then
  OUT=$OUT timeout 200 bench/kernel_bench_compare.sh .device/base/kernel_bench $B/bench/kernel_bench \
    --flush-l2-clean --reps 30 >"$OUT/compare.txt" 2>&1
  summary+=("$(printf '%-34s %s' "kernel_bench_compare" "rc=$?")")
fi
fi_args=()
[[ -x .device/peers/flashinfer_peer ]] && fi_args=(--flashinfer .device/peers/flashinfer_peer)
timeout 200 python3 bench/peers.py --kernel-bench $B/bench/kernel_bench "${fi_args[@]}" \
  --ops rmsnorm,fused_add_rmsnorm,layernorm,softmax,scale,add,silu_and_mul \
  --shapes decode,mid,large \
  --extra-shapes r1h2k=1x2048,r1h4k=1x4096,r1h8k=1x8192,r16h2k=16x2048,r16h8k=16x8192,r64h4k=64x4096,r64h8k=64x8192,v32k=16x32768,v128k=16x128256,v128k64=64x128256 \
  --json "$OUT/peers.json" >"$OUT/peers.txt" 2>"$OUT/peers.err"
summary+=("$(printf '%-34s %s' "peers" "rc=$?")")
echo "===== kernel_bench old vs new (vs copy) ====="; cat "$OUT/compare.txt" 2>/dev/null | tail -80
echo "===== peers ====="; cat "$OUT/peers.txt"; tail -3 "$OUT/peers.err"
echo "===== summary ====="; printf '%s\n' "${summary[@]}"
