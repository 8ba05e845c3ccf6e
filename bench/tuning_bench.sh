#!/usr/bin/env bash
# Scheduler v2's tuning on a GPU (issue 35, "Measure"; docs/architecture.md,
# "Scheduling: the rules"). One run:
#   (a) gemm decode shapes (M in MS; N x K in NKS; transpose_b both; DTYPES)
#       swept offline by `kernelctl tune` into file A (a daemon with
#       --tuning=frozen --tuning_file=A: L2 read-flushed medians of REPEATS
#       runs), then the same problems sent to a fresh daemon with
#       --tuning=online --tuning_file=B (ONLINE_RUNS requests each, through
#       `kernelctl run --via VIA`); per bucket with two or more measured
#       impls in both files, does the impl with the lowest median agree?
#       (goal: >= 95%);
#   (b) a mixed decode workload (gemm, rmsnorm, silu_and_mul; MIX_RECORDS
#       records, written as a --trace_file trace) tuned offline into A as
#       well, then replayed with `kernelctl replay` (CONCURRENCY in flight)
#       three ways, each on a fresh daemon: --tuning=online (empty table),
#       --tuning=frozen at A, --tuning=off (static priority); throughput and
#       online / frozen (goal: within 2%).
#   A short table last.
#
#   bench/tuning_bench.sh [BUILD_DIR]   (default build; "bundle": .device/kerneld)
#
# Environment: KERNELD, KERNELCTL replace the binaries; MS (1,4,8,16,32),
# NKS (the N x K pairs: 1024x1024 ... 14336x4096, all of {1024,4096,14336}
# squared but 14336x14336, whose float32 b is over kerneld's 256 MiB message
# limit), DTYPES (float16,bfloat16,float32), REPEATS (30), ONLINE_RUNS (12:
# gemm has two GPU impls, explored 3 runs each), VIA (server-buffer; inline
# for a CPU dry run), MIX_RECORDS (3000), CONCURRENCY (16), DEVICE (tune's
# --device, "" = each GPU model), KERNELD_FLAGS (extra daemon flags). The
# defaults take about 3 minutes on one H100; trim MS or DTYPES to go faster.
# A dry run without a GPU: MS=1 NKS=64x64 DTYPES=float32 VIA=inline
# MIX_RECORDS=200 bench/tuning_bench.sh build-cpu
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_binaries "${1:-}" kerneld kernelctl
IFS=, read -r -a ms <<<"${MS:-1,4,8,16,32}"
read -r -a nks <<<"${NKS:-1024x1024 1024x4096 1024x14336 4096x1024 4096x4096 4096x14336 14336x1024 14336x4096}"
dtypes=${DTYPES:-float16,bfloat16,float32}
repeats=${REPEATS:-30}
online_runs=${ONLINE_RUNS:-12}
via=${VIA:-server-buffer}
mix_records=${MIX_RECORDS:-3000}
concurrency=${CONCURRENCY:-16}
device=${DEVICE:-}
bench_workdir tuning-bench
head=$(bench_stamp)
A=$dir/tuning_A
B=$dir/tuning_B
# Tune needs an admin: the unix socket's caller is this uid.
start() {  # start NAME FLAGS...: sets sock
  local name=$1
  shift
  # shellcheck disable=SC2086  # KERNELD_FLAGS is a list of flags
  bench_start_kerneld "$name" --listen="unix:$dir/$name.sock" "$@" ${KERNELD_FLAGS:-}
  ready_tcp "$dir/$name.ready" >/dev/null
  sock=unix:$dir/$name.sock
}
stop() { bench_stop "$spid"; }  # SIGTERM: an online daemon writes its table

echo "== $head"
echo "== (a) gemm decode shapes: offline sweep into A"
problems=$dir/gemm_problems
: >"$problems"
for m in "${ms[@]}"; do
  for nk in "${nks[@]}"; do
    n=${nk%x*} k=${nk#*x}
    echo "a=${m}x$k,b=${k}x$n,transpose_b=false" >>"$problems"
    echo "a=${m}x$k,b=${n}x$k,transpose_b=true" >>"$problems"
  done
done
start offline --tuning=frozen --tuning_file="$A"
t0=$(date +%s)
"$kernelctl" --target "$sock" tune gemm --dtype "$dtypes" --shapes-file "$problems" \
  --repeats "$repeats" ${device:+--device "$device"} >"$dir/tune_gemm.txt"
tail -n 1 "$dir/tune_gemm.txt"
echo "offline sweep: $(wc -l <"$problems") problems x $(tr , '\n' <<<"$dtypes" | wc -l) dtypes in $(($(date +%s) - t0)) s"
stop

echo "== (a) the same problems online into B ($online_runs requests each, --via $via)"
start online --tuning=online --tuning_file="$B"
t0=$(date +%s)
IFS=, read -r -a dts <<<"$dtypes"
for dt in "${dts[@]}"; do
  while IFS= read -r p; do
    a=${p#a=} a=${a%%,*}
    b=${p#*b=} b=${b%%,*}
    tb=${p##*transpose_b=}
    "$kernelctl" --target "$sock" run gemm --dtype "$dt" --shape "$a" --input "b=$dt:$b" \
      --attr "transpose_b=$tb" --repeat "$online_runs" --via "$via" >/dev/null
  done <"$problems"
done
echo "online: $(($(date +%s) - t0)) s"
stop
agreement=$(python3 - "$A" "$B" gemm <<'PY'
import sys, statistics
def table(path, op):
    best = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if f[0] != "row" or f[1] != op or not f[8]:
            continue
        med = statistics.median_high([int(x) for x in f[8].split(",")])
        best.setdefault((f[3], f[4], f[5]), {})[f[2]] = med
    return best
a, b = table(sys.argv[1], sys.argv[3]), table(sys.argv[2], sys.argv[3])
keys = [k for k in a if k in b and len(a[k]) > 1 and len(b[k]) > 1]
agree = 0
for k in sorted(keys):
    ca, cb = min(a[k], key=a[k].get), min(b[k], key=b[k].get)
    if ca == cb:
        agree += 1
    else:
        fmt = lambda t: ", ".join(f"{i} {v / 1e3:.1f} us" for i, v in sorted(t.items()))
        print(f"  differs {k[0]} {k[1]}: offline {ca} ({fmt(a[k])}); online {cb} ({fmt(b[k])})",
              file=sys.stderr)
print(f"{agree} {len(keys)} {100.0 * agree / len(keys) if keys else 0:.1f}")
PY
)
read -r agree contested agree_pct <<<"$agreement"
echo "buckets with >= 2 impls in both: $contested; same choice: $agree ($agree_pct%)"

echo "== (b) a mixed decode workload, replayed three ways"
trace=$dir/mix.trace
python3 - "$mix_records" "$trace" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
kinds = []
for m in (1, 8, 16):
    for nk in ((1024, 1024), (2048, 1024), (1024, 2048)):
        nn, k = nk
        kinds.append(("gemm", [("a", [m, k]), ("b", [nn, k])], {"transpose_b": ("true", "b")}))
        kinds.append(("gemm", [("a", [m, k]), ("b", [k, nn])], {"transpose_b": ("false", "b")}))
for rows in (1, 16):
    kinds.append(("rmsnorm", [("x", [rows, 4096]), ("weight", [4096])], {}))
    kinds.append(("silu_and_mul", [("x", [rows, 8192])], {}))
with open(path, "w") as f:
    for i in range(n):
        op, ins, attrs = kinds[i % len(kinds)]
        dt = ("bfloat16", "float16")[(i // len(kinds)) % 2]
        rec = {"t_ns": i * 1000, "request_id": str(i), "op": op,
               "inputs": [{"name": a, "dtype": dt, "shape": s, "path": "inline"} for a, s in ins],
               "attrs": {k: v[0] for k, v in attrs.items()},
               "attr_types": {k: v[1] for k, v in attrs.items()}}
        f.write(json.dumps(rec) + "\n")
PY
# The mix's own problems, tuned offline into A beside the gemm sweep.
start offline2 --tuning=frozen --tuning_file="$A"
for dt in bfloat16 float16; do
  "$kernelctl" --target "$sock" tune gemm --dtype "$dt" --repeats "$repeats" ${device:+--device "$device"} \
    --shapes "$(for m in 1 8 16; do for nk in 1024x1024 2048x1024 1024x2048; do n=${nk%x*} k=${nk#*x}
      printf 'a=%sx%s,b=%sx%s,transpose_b=true;a=%sx%s,b=%sx%s,transpose_b=false;' "$m" "$k" "$n" "$k" "$m" "$k" "$k" "$n"
      done; done)" >>"$dir/tune_mix.txt"
  "$kernelctl" --target "$sock" tune rmsnorm --dtype "$dt" --repeats "$repeats" ${device:+--device "$device"} \
    --shapes "x=1x4096,weight=4096;x=16x4096,weight=4096" >>"$dir/tune_mix.txt"
  "$kernelctl" --target "$sock" tune silu_and_mul --dtype "$dt" --repeats "$repeats" ${device:+--device "$device"} \
    --shapes "x=1x8192;x=16x8192" >>"$dir/tune_mix.txt"
done
stop
replay() {  # replay MODE FLAGS...: prints req/s
  local mode=$1
  shift
  start "mix_$mode" "$@"
  "$kernelctl" --target "$sock" replay "$trace" --concurrency "$concurrency" >"$dir/replay_$mode.txt"
  stop
  awk '/^replayed/ { gsub(/\(/, "", $7); print $7 }' "$dir/replay_$mode.txt"
}
online_rps=$(replay online --tuning=online)
frozen_rps=$(replay frozen --tuning=frozen --tuning_file="$A")
off_rps=$(replay off --tuning=off)
for mode in online frozen off; do
  echo "-- $mode"
  cat "$dir/replay_$mode.txt"
done

echo "== $head"
printf '%-44s %12s %10s\n' "measure" "value" "goal"
printf '%-44s %11s%% %10s\n' "gemm buckets: online choice = offline ($agree/$contested)" "$agree_pct" ">= 95%"
printf '%-44s %12s\n' "mix replay, req/s: online" "$online_rps"
printf '%-44s %12s\n' "mix replay, req/s: frozen at A" "$frozen_rps"
printf '%-44s %12s\n' "mix replay, req/s: off (static priority)" "$off_rps"
printf '%-44s %12s %10s\n' "online / frozen" "$(python3 -c "print(f'{$online_rps / $frozen_rps:.3f}')")" ">= 0.98"
printf '%-44s %12s\n' "off / frozen" "$(python3 -c "print(f'{$off_rps / $frozen_rps:.3f}')")"
