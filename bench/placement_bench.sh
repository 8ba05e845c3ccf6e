#!/usr/bin/env bash
# Scheduler v2's placement across GPUs (issue 35, "Measure", 2 x H100;
# docs/architecture.md, "Scheduling: the rules", "Which device"). One run,
# each part on a fresh daemon, the same mixed inline workload every time:
# one `kernelctl perf` per MIX entry, all at once, CLIENTS clients split
# evenly between them (unary, inline tensors, a connection per client); a
# warm-up of WARM_MS, then three windows of WINDOW_MS measured; throughput is
# the sum of the entries' req/s.
#   (a) one GPU: the daemon sees only the first of GPUS (kerneld has no
#       flag that selects devices: CUDA_VISIBLE_DEVICES does it); then all
#       GPUS; all / one (goal: >= 1.8);
#   (b) the all-GPU daemon again while SLOW_GPU is busy with another
#       process (a torch float16 matmul loop pinned to it with
#       CUDA_VISIBLE_DEVICES, started before the daemon and stopped after;
#       --cuda_streams is one value for every GPU, so it cannot slow one);
#       each GPU's share of the measured requests and its mean execute
#       time, from kerneld_requests_total and
#       kerneld_execute_duration_seconds (docs/metrics.md) scraped before
#       and after the measured windows, beside its share in (a)'s all-GPU
#       run (goal: the loaded GPU's share drops, about in proportion to its
#       slower execute time).
#   A short table last.
#
#   bench/placement_bench.sh [BUILD_DIR]   (default build; "bundle": .device/kerneld)
#
# Environment: KERNELD, KERNELCTL replace the binaries; CLIENTS (64); MIX
# (";"-separated `kernelctl perf` arguments; default rmsnorm float16
# 16x4096, silu_and_mul float16 16x8192, and two float16 gemm decode shapes
# whose inline b is 8 MiB: a 8x4096 by b 4096x1024, and a 1x1024 by b
# 4096x1024 transposed); WARM_MS (3000), WINDOW_MS (2000); GPUS (the
# nvidia-smi indices to use, "0,1"; default every GPU); SLOW_GPU (the
# loaded one; default the second of GPUS); LOAD_N (8192: the loader's
# square matmul size); KERNELD_FLAGS (extra daemon flags). GPU indices are
# nvidia-smi's (CUDA_DEVICE_ORDER=PCI_BUS_ID is set for the daemon and the
# loader). Needs python3 (metrics, JSON), and torch on the GPU host for
# (b). Fewer than 2 GPUs: says so and exits 0. About 1 minute on 2 x H100.
# A dry run of the plumbing without a GPU (the CPU daemon; every part runs,
# the loader spins a CPU core instead, the figures mean nothing): DRY=1
# CLIENTS=8 WARM_MS=300 WINDOW_MS=300 MIX="rmsnorm --dtype float16 --shape
# 16x4096;silu_and_mul --dtype float16 --shape 16x8192" \
#   bench/placement_bench.sh build-cpu
set -euo pipefail
# shellcheck source=bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
bench_binaries "${1:-}" kerneld kernelctl
clients=${CLIENTS:-64}
IFS=';' read -r -a mix <<<"${MIX:-rmsnorm --dtype float16 --shape 16x4096;silu_and_mul --dtype float16 --shape 16x8192;gemm --dtype float16 --shape 8x4096 --input b=float16:4096x1024 --attr transpose_b=false;gemm --dtype float16 --shape 1x1024 --input b=float16:4096x1024 --attr transpose_b=true}"
warm_ms=${WARM_MS:-3000}
window_ms=${WINDOW_MS:-2000}
load_n=${LOAD_N:-8192}
dry=${DRY:-0}
export CUDA_DEVICE_ORDER=PCI_BUS_ID

# The GPUs: index and UUID (the metrics' device label) of each.
declare -A uuid_of=()
gpus=()
while IFS=', ' read -r idx uuid; do
  [[ -n $idx ]] || continue
  uuid_of[$idx]=$uuid
  gpus+=("$idx")
done < <(nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null || true)
if [[ -n ${GPUS:-} ]]; then IFS=, read -r -a gpus <<<"$GPUS"; fi
if ((${#gpus[@]} < 2)) && [[ $dry != 1 ]]; then
  echo "placement_bench: ${#gpus[@]} GPU(s) here; it needs 2 or more (DRY=1 checks the plumbing on the CPU daemon)"
  exit 0
fi
one_gpu=${gpus[0]:-}
slow_gpu=${SLOW_GPU:-${gpus[1]:-}}
all_gpus=$(IFS=,; echo "${gpus[*]}")

bench_workdir placement-bench
gpu_name=$(bench_gpu 2>/dev/null | head -n 1)
((${#gpus[@]} == 0)) || gpu_name="$gpu_name x ${#gpus[@]}"
head=$(bench_stamp "$gpu_name")
# Device label -> name in the output: gpuN for a GPU, the label otherwise.
names=$dir/device_names
: >"$names"
for i in "${!uuid_of[@]}"; do echo "${uuid_of[$i]} gpu$i" >>"$names"; done

# start NAME VISIBLE: a daemon seeing the GPUs VISIBLE ("" = unchanged);
# sets addr and metrics.
start() {
  local name=$1 visible=$2
  server_env=()
  [[ -n $visible ]] && server_env=("CUDA_VISIBLE_DEVICES=$visible")
  # shellcheck disable=SC2086  # KERNELD_FLAGS is a list of flags
  bench_start_kerneld "$name" --metrics_listen=127.0.0.1:0 ${KERNELD_FLAGS:-}
  addr=$(ready_tcp "$dir/$name.ready")
  metrics=127.0.0.1:$(awk '$1 == "metrics" { print $2 }' "$dir/$name.ready")
}

scrape() {  # scrape FILE: the daemon's /metrics
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode())' \
    "$metrics" >"$1"
}

# run_mix NAME MAX_WINDOWS WINDOW_MS: every MIX entry's perf at once, CLIENTS
# split between them; fails if one fails to run.
run_mix() {
  local name=$1 windows=$2 ms=$3 n=${#mix[@]} i c ppids=() rc=0
  for i in "${!mix[@]}"; do
    c=$((clients / n + (i < clients % n ? 1 : 0)))
    ((c > 0)) || c=1
    # shellcheck disable=SC2086  # a MIX entry is a list of arguments
    "$kernelctl" --target "$addr" perf ${mix[$i]} --concurrency "$c" --window-ms "$ms" \
      --max-windows "$windows" --json "$dir/$name.$i.json" >"$dir/$name.$i.txt" 2>&1 &
    ppids+=($!)
  done
  for i in "${!ppids[@]}"; do
    wait "${ppids[$i]}" || { rc=1; echo "placement_bench: $name: perf ${mix[$i]} failed:" >&2; tail -n 5 "$dir/$name.$i.txt" >&2; }
  done
  return $rc
}

# measure PART: warm-up, then scrape, three windows, scrape. Prints
# "REQ_PER_S ERRORS" and writes $dir/PART.shares (python below).
measure() {
  local part=$1
  run_mix "$part.warm" 3 "$((warm_ms / 3))" >/dev/null || true  # warm-up errors (a queue filling) do not count
  scrape "$dir/$part.before"
  run_mix "$part" 3 "$window_ms" || true  # its errors are counted below
  scrape "$dir/$part.after"
  python3 - "$dir" "$part" "${#mix[@]}" "$names" <<'PY'
import json, re, sys
d, part, n, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rps = errors = 0.0
for i in range(n):
    try:
        recs = json.load(open(f"{d}/{part}.{i}.json"))
    except OSError:
        sys.exit(f"placement_bench: {part}: MIX entry {i + 1} measured nothing")
    for rec in recs:
        if rec["target"] == "kerneld":
            rps += rec["throughput"]
            errors += rec["errors_total"]
label = dict(line.split() for line in open(names) if line.strip())
pat = re.compile(r'^(kerneld_requests_total|kerneld_execute_duration_seconds_sum|'
                 r'kerneld_execute_duration_seconds_count)\{([^}]*)\} (\S+)$')
def read(path):
    t = {}
    for line in open(path):
        m = pat.match(line.strip())
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("device", "none") == "none":
            continue
        if m.group(1) == "kerneld_requests_total" and labels.get("code") != "OK":
            continue
        key = (m.group(1), labels["device"])
        t[key] = t.get(key, 0.0) + float(m.group(3))
    return t
a, b = read(f"{d}/{part}.before"), read(f"{d}/{part}.after")
delta = {k: b[k] - a.get(k, 0.0) for k in b}
devs = sorted({dev for (_, dev) in delta}, key=lambda x: label.get(x, x))
total = sum(delta.get(("kerneld_requests_total", dev), 0.0) for dev in devs) or 1.0
with open(f"{d}/{part}.shares", "w") as f:
    for dev in devs:
        reqs = delta.get(("kerneld_requests_total", dev), 0.0)
        cnt = delta.get(("kerneld_execute_duration_seconds_count", dev), 0.0)
        s = delta.get(("kerneld_execute_duration_seconds_sum", dev), 0.0)
        f.write(f"{label.get(dev, dev)} {reqs:.0f} {100 * reqs / total:.1f} {1e6 * s / cnt if cnt else 0:.1f}\n")
print(f"{rps:.0f} {errors:.0f}")
PY
}

show() {  # show PART TITLE
  echo "-- $2"
  local i
  for i in "${!mix[@]}"; do
    printf '  %-58s %s\n' "$(sed -E 's/--(dtype|shape|input|attr) //g' <<<"${mix[$i]}" | cut -c1-58)" "$(awk '/^c=/ { printf "%s clients: %s req/s, p50 %s us, p99 %s us, %s errors", \
      substr($1, 3), $3, $4, $6, $9; exit }' "$dir/$1.$i.txt")"
  done
  awk '{ printf "  %-10s %8d requests  %5.1f%%  execute mean %.1f us\n", $1, $2, $3, $4 }' "$dir/$1.shares"
}
share() {  # share PART DEVICE: DEVICE's share of PART's requests, or "-"
  awk -v d="$2" '$1 == d { print $3 "%"; found = 1 } END { if (!found) print "-" }' "$dir/$1.shares"
}
ratio() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); print(f'{a / b:.2f}' if b else '-')" "$1" "$2"; }

echo "== $head"
echo "== GPUs ${all_gpus:-none}; one: ${one_gpu:-none}; loaded in (b): ${slow_gpu:-none}; $clients clients over ${#mix[@]} ops"
echo "== (a) one GPU, then all"
start one "$one_gpu"
measure one >"$dir/one.result"
read -r one_rps one_err <"$dir/one.result"
bench_stop "$spid"
show one "one GPU (${one_gpu:-cpu}): $one_rps req/s, $one_err errors"
start all "$all_gpus"
measure all >"$dir/all.result"
read -r all_rps all_err <"$dir/all.result"
bench_stop "$spid"
show all "all GPUs (${all_gpus:-cpu}): $all_rps req/s, $all_err errors"

echo "== (b) all GPUs, ${slow_gpu:+gpu$slow_gpu }loaded by another process"
cat >"$dir/load.py" <<'PY'
# Keeps one GPU busy: a float16 matmul loop (CUDA_VISIBLE_DEVICES picks it).
# Writes its ready file once the first product is done. Without a GPU (a
# dry run) it spins the CPU instead.
import sys, time
ready, n, dry = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
try:
    import torch
    gpu = torch.cuda.is_available()
except ImportError:
    gpu = False
if not gpu and not dry:
    sys.exit("load.py: no torch with a GPU here")
if gpu:
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = a @ b
    torch.cuda.synchronize()
open(ready, "w").write("busy\n")
while True:
    if gpu:
        for _ in range(16):
            c = a @ b
        torch.cuda.synchronize()
    else:
        x = sum(i * i for i in range(100000))
PY
CUDA_VISIBLE_DEVICES=${slow_gpu:-} python3 "$dir/load.py" "$dir/load.ready" "$load_n" "$dry" >"$dir/load.log" 2>&1 &
lpid=$!
pids+=("$lpid")
for _ in $(seq 1200); do
  [[ -s $dir/load.ready ]] && break
  kill -0 "$lpid" 2>/dev/null || { echo "placement_bench: the loader ended:" >&2; cat "$dir/load.log" >&2; exit 1; }
  sleep 0.1
done
[[ -s $dir/load.ready ]] || { echo "placement_bench: the loader never became busy" >&2; exit 1; }
start slow "$all_gpus"
measure slow >"$dir/slow.result"
read -r slow_rps slow_err <"$dir/slow.result"
bench_stop "$spid"
bench_stop "$lpid"
show slow "all GPUs, ${slow_gpu:+gpu$slow_gpu }loaded: $slow_rps req/s, $slow_err errors"

echo "== $head"
printf '%-46s %14s %10s\n' "measure" "value" "goal"
printf '%-46s %14s\n' "mix req/s, one GPU (${one_gpu:+gpu}${one_gpu:-cpu})" "$one_rps"
printf '%-46s %14s\n' "mix req/s, all GPUs (${all_gpus:+gpus }${all_gpus:-cpu})" "$all_rps"
printf '%-46s %14s %10s\n' "all / one" "$(ratio "$all_rps" "$one_rps")" ">= 1.8"
printf '%-46s %14s\n' "mix req/s, all GPUs, ${slow_gpu:+gpu$slow_gpu }loaded" "$slow_rps"
for g in "${gpus[@]:-cpu}"; do
  [[ $g == cpu ]] || g=gpu$g
  printf '%-46s %14s %10s\n' "share of requests, $g: unloaded / loaded" \
    "$(share all "$g") / $(share slow "$g")" "$([[ $g == "gpu${slow_gpu:-}" ]] && echo "drops")"
done
printf '%-46s %14s\n' "errors (one, all, loaded)" "$one_err, $all_err, $slow_err"
