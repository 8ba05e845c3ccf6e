#!/usr/bin/env bash
# One device call for issue 17's remaining gaps (rmsnorm mid >= 0.95 x copy,
# add >= 1.0 x torch, softmax decode >= 0.90 x copy): the variant sweep
# (.device/lab/k17_lab: each variant and the production kernel checked
# against a float64 reference and timed beside copy and beside production),
# then, when the bundle is carried,
# torch eager and the production kernels at the same shapes in the same run
# (bench/peers.py over the bundle's kernel_bench), so that a variant's ratio
# to torch is (torch / current) x (x cur). Logs under $OUT; REPS (30).
#   run(command="bench/k17_lab_pass.sh", carry=[".device/kerneld.tar.gz", ".device/lab"])
set -uo pipefail
B=.device/kerneld
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
if [[ ! -x $B/bin/kerneld && -f .device/kerneld.tar.gz ]]; then
  mkdir -p $B && tar xzf .device/kerneld.tar.gz -C $B --strip-components=1
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
# One process a part, so that a variant that faults the context (an illegal
# address ends the process, a spin that never ends its timeout) costs only
# its own part: add; rmsnorm without the cp.async pipelines; the pipelines;
# softmax decode (grid-wide split rows).
# float32 rmsnorm and add are parts of their own (PARTS32=0 leaves them out).
parts=("add:--ops add" "rms:--ops rmsnorm --skip pipe" "pipe:--ops rmsnorm --match pipe"
       "softmax:--ops softmax")
if [[ ${PARTS32:-1} != 0 ]]; then
  parts+=("add32:--ops add --dtypes float32" "rms32:--ops rmsnorm --skip pipe --dtypes float32")
fi
if [[ -x .device/lab/k17_lab ]]; then
  for p in "${parts[@]}"; do
    name=${p%%:*}
    # shellcheck disable=SC2086  # the part's options split on purpose
    timeout 60 .device/lab/k17_lab --reps "${REPS:-30}" ${p#*:} >"$OUT/k17_lab_$name.txt" 2>&1
    echo "k17_lab $name rc=$?"
  done
else
  echo "k17_lab: .device/lab/k17_lab not carried"
fi
if [[ -x $B/bench/kernel_bench ]]; then
  timeout 150 python3 bench/peers.py --kernel-bench $B/bench/kernel_bench --ops rmsnorm,add \
    --shapes mid,large --extra-shapes r1h4k=1x4096,r16h4k=16x4096,r64h8k=64x8192,v128k=16x128256 \
    --json "$OUT/peers.json" >"$OUT/peers.txt" 2>"$OUT/peers.err"
  echo "peers rc=$?"
fi
# The full table is $OUT/k17_lab.txt; the call's output keeps the summary.
for p in "${parts[@]}"; do
  f=$OUT/k17_lab_${p%%:*}.txt
  echo "===== k17_lab ${p#*:} (full table in $f) ====="
  grep -E "^k17_lab|FAILED|correctness at tail|bad elements|refused|error" "$f" 2>/dev/null | head -30
  sed -n '/== summary/,$p' "$f" 2>/dev/null
  grep -q "== summary" "$f" 2>/dev/null || tail -5 "$f" 2>/dev/null
done
echo "===== peers (torch / kerneld current, same run) ====="
cat "$OUT/peers.txt" 2>/dev/null; tail -3 "$OUT/peers.err" 2>/dev/null
