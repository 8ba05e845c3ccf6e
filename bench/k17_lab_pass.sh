#!/usr/bin/env bash
# One device call for issue 17's remaining gaps (rmsnorm mid >= 0.95 x copy,
# add / scale >= 1.0 x torch, softmax decode >= 0.90 x copy): the variant
# sweep (.device/lab/k17_lab: each variant and the production kernel checked
# against a float64 reference, a variant that fails is reported FAILED and
# not timed, then timed beside copy and beside production), then, when the
# bundle is carried, torch eager and the production kernels at the same
# shapes in the same run (bench/peers.py over the bundle's kernel_bench), so
# that a variant's ratio to torch is (torch / current) x (x cur). Logs under
# $OUT; REPS (30). Prints, last, one table: per shape copy us, production
# (us, x copy) and the fastest correct variant of any part (name, us, x copy).
#   run(command="bench/k17_lab_pass.sh", carry=[".device/kerneld.tar.gz", ".device/lab"])
# (.device/lab/k17_lab alone is enough for the lab and the final table:
#   run(command="PEERS=0 bench/k17_lab_pass.sh", carry=[".device/lab"]))
set -uo pipefail
B=.device/kerneld
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
if [[ ${PEERS:-1} != 0 ]]; then bench_unpack_bundle || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
# One process a part, so that a variant that faults the context (an illegal
# address ends the process, a spin that never ends traps or meets its
# timeout) costs only its own part; each part prints a BEST line per shape
# as soon as the shape is done. Softmax decode is four parts: rows per
# block, split rows with tagged partials, with a counter, the first grid
# split. PARTS (space-separated names) runs a subset; PARTS32=0 leaves the
# float32 parts out.
parts=("softmax-rows:--ops softmax --match rows" "softmax-T:--ops softmax --match splitT"
       "softmax-C:--ops softmax --match splitC" "softmax-grid:--ops softmax --match grid"
       "add:--ops add" "scale:--ops scale"
       "rms:--ops rmsnorm --skip pipe" "pipe:--ops rmsnorm --match pipe")
if [[ ${PARTS32:-1} != 0 ]]; then
  parts+=("add32:--ops add --dtypes float32" "scale32:--ops scale --dtypes float32"
          "rms32:--ops rmsnorm --skip pipe --dtypes float32")
fi
if [[ -n ${PARTS:-} ]]; then
  sel=()
  for p in "${parts[@]}"; do [[ " $PARTS " == *" ${p%%:*} "* ]] && sel+=("$p"); done
  parts=("${sel[@]}")
fi
if [[ -x .device/lab/k17_lab ]]; then
  for p in "${parts[@]}"; do
    name=${p%%:*}
    # shellcheck disable=SC2086  # the part's options split on purpose
    timeout 120 .device/lab/k17_lab --reps "${REPS:-30}" ${p#*:} >"$OUT/k17_lab_$name.txt" 2>&1
    echo "k17_lab $name rc=$?"
  done
else
  echo "k17_lab: .device/lab/k17_lab not carried"
fi
if [[ ${PEERS:-1} != 0 && -x $B/bench/kernel_bench ]]; then
  timeout 150 python3 bench/peers.py --kernel-bench $B/bench/kernel_bench --ops rmsnorm,add,scale \
    --shapes mid,large \
    --extra-shapes r1h4k=1x4096,r1h8k=1x8192,r16h4k=16x4096,r64h8k=64x8192,r16h32k=16x32768,v128k=16x128256 \
    --json "$OUT/peers.json" >"$OUT/peers.txt" 2>"$OUT/peers.err"
  echo "peers rc=$?"
fi
# The full tables are $OUT/k17_lab_<part>.txt; the call's output keeps the
# failures and the summaries.
for p in "${parts[@]}"; do
  f=$OUT/k17_lab_${p%%:*}.txt
  echo "===== k17_lab ${p#*:} (full table in $f) ====="
  grep -E "^k17_lab|FAILED|correctness at tail|bad elements|refused|error" "$f" 2>/dev/null | head -30
  sed -n '/== summary/,$p' "$f" 2>/dev/null | grep -v '^BEST'
  grep -q "== summary" "$f" 2>/dev/null || tail -5 "$f" 2>/dev/null
done
if [[ ${PEERS:-1} != 0 ]]; then
  echo "===== peers (torch / kerneld current, same run) ====="
  cat "$OUT/peers.txt" 2>/dev/null; tail -3 "$OUT/peers.err" 2>/dev/null
fi
# Final table: the BEST lines of every part merged per (op, dtype, shape):
# copy and current are the medians over the parts that measured them, the
# best variant the fastest correct one of any part; x copy = copy / us.
echo "===== final: per shape, copy | production | fastest correct variant (us, x copy) ====="
cat "$OUT"/k17_lab_*.txt 2>/dev/null | grep '^BEST ' >"$OUT/best.txt"
python3 - "$OUT/best.txt" <<'PY' || cat "$OUT/best.txt"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 8:
        continue
    key = (f[1], f[2], f[3])
    copy, cur, best = float(f[4]), float(f[5]), float(f[6])
    name = " ".join(f[7:])
    r = rows.setdefault(key, {"copy": [], "cur": [], "best": None})
    if copy > 0: r["copy"].append(copy)
    if cur > 0: r["cur"].append(cur)
    if best > 0 and (r["best"] is None or best < r["best"][0]):
        r["best"] = (best, name)
def x(c, u):
    return f"{c / u:6.3f}" if c and u else "     -"
print(f"{'op':8} {'dtype':9} {'shape':12} {'copy us':>8} | {'cur us':>8} {'x copy':>6} | "
      f"{'best us':>8} {'x copy':>6} {'x cur':>6}  best variant")
for (op, dt, shape), r in rows.items():
    copy = statistics.median(r["copy"]) if r["copy"] else 0.0
    cur = statistics.median(r["cur"]) if r["cur"] else 0.0
    bu, bn = r["best"] if r["best"] else (0.0, "-")
    print(f"{op:8} {dt:9} {shape:12} {copy:8.2f} | {cur:8.2f} {x(copy, cur)} | "
          f"{bu:8.2f} {x(copy, bu)} {x(cur, bu)}  {bn}")
PY
# A device call returns only a few files: this pass's logs in one archive
# ($OUT/k17_lab.tar.gz), best.txt beside it.
(cd "$OUT" && logs=(gpu.txt k17_lab_*.txt peers.*) &&
  tar czf k17_lab.tar.gz --ignore-failed-read "${logs[@]}" 2>/dev/null && rm -f "${logs[@]}")
