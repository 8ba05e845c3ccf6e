#!/usr/bin/env bash
# The pass on the GPU machine, in parts, from the repository root, over the
# bundle scripts/device_bundle made (.device/kerneld, or the tarball
# .device/kerneld.tar.gz, which is unpacked here):
#
#   bench/device_pass.sh [PARTS]          PARTS: comma- or space-separated
#   PARTS=tests,kernels bench/device_pass.sh
#
# Parts (each a function below, logs under $OUT/PART, its own short table):
#   tests      every gpu test binary of the bundle
#   smoke      kerneld on the GPU driven by kernelctl: scale in each dtype,
#              gemm's per-request ranking, the zero-copy round trips (CUDA
#              IPC, server buffer, shm, inline), again with --worker_spin_us
#   kernels    kernel_bench with L2 flushed clean (OPS, DTYPES, SHAPES narrow
#              it; gemm again after a dirty flush); with an older kernel_bench
#              in .device/base, old against new in one run, interleaved, and
#              the rows whose ratio moved by more than TOL (0.02) flagged
#   peers      bench/peers.py: torch eager, and FlashInfer's norms when
#              .device/peers/flashinfer_peer is there, on kernel_bench's
#              records (PEER_OPS, PEER_SHAPES)
#   attention  bench/peers.py on the attention ops against torch and
#              FlashInfer's Python package (the wheels in .whl/flashinfer,
#              client/python/tests/gpu_wheels.sh, installed in /tmp/fisite),
#              its kernels JIT-compiled for FLASHINFER_CUDA_ARCH_LIST (9.0)
#              into FLASHINFER_WORKSPACE_BASE (/tmp/fiws); PEER_OPS
#              (batch_decode_paged,batch_prefill_paged,append_paged_kv_cache),
#              PEER_DTYPES (bfloat16), PEER_SHAPES (all the ops' shapes),
#              ATTENTION_TIMEOUT (420 s); then examples/decode_loop.py through
#              the bundle's daemon (B 16, kv 8192, DECODE_STEPS steps, 200;
#              DECODE_LOOP=0 skips it; the wheels in .whl as for python)
#   service    kerneld beside the echo floors (bench/perf_compare.sh): 16
#              float32 inline, then scale on 4096 float16 in a CUDA IPC buffer
#              beside the floor started with --kernel; completion_bench
#   goals      the service goals table: kerneld default and --grpc_api=callback
#              against both floors on each goal's request
#              (bench/service_goals_table.py), then the work amplification
#              (bench/host_ab.sh work), stream and unary
#   latency    service_latency_bench, cuda and cpu backends
#   python     the Python client: the wheels in .whl
#              (client/python/tests/gpu_wheels.sh makes them) installed in
#              /tmp/site, its gpu tests against the bundle's daemon,
#              bench_scale.py (p50 against kernelctl's) and profile_ipc.py
#              (SKIP_PROFILE=1 skips it); GPU_PASS_NATIVE=0 runs on grpcio
#   breakdown  where the Python call's time goes: native_call_probe,
#              call_breakdown.py (ROUNDS) and gap_probe.py
#   lane       the same-host lane (docs/lane.md): the Python client on the
#              lane with torch over CUDA IPC, scale on 4096 float16 with out=,
#              against torch.mul + synchronize in the same process, beside
#              the Python gRPC client and kernelctl perf --lane
#              (client/python/bench/lane_bench.py, its own daemon)
#   userkernels  user kernels (docs/user-kernels.md, "Measuring"):
#              bench/user_kernel_bench.sh, register to first result, call
#              overhead against the built-in scale, 100 __trap() faults
#   tuning     scheduler v2's tuning (bench/tuning_bench.sh): offline sweep
#              against online choice on gemm decode shapes, and a mixed
#              replay online, frozen and at static priority
#   placement  scheduler v2's placement on a host of 2 or more GPUs
#              (bench/placement_bench.sh): a mixed inline load at 64 clients
#              on all GPUs against one, and with one GPU loaded
#   kserve     the KServe v2 front end (docs/kserve.md): tritonclient's CUDA
#              shared-memory test (test_kserve_gpu.py), then
#              bench/kserve_perf.sh (perf_analyzer against kernelctl perf on
#              kerneld.v1, same daemon and run); both from the wheels in
#              .whl (client/python/tests/gpu_wheels.sh)
#   labs       the labs in .device/lab (built only with -DKERNELD_LABS=ON;
#              bench/labs/README.md): gemm_decode_lab's checks and sweep,
#              top_k_lab, decode_chunks_lab,
#              softmax_floor_lab
# Default: tests,smoke,kernels,latency. WINDOW_MS (250) and MAX_WINDOWS (4)
# set the service parts' windows, KERNELD_FLAGS extra daemon flags. Logs go
# to $OUT (gpu-logs), packed as $OUT/logs.tgz at the end; the exit status is
# 1 when a part failed, 2 for a part this script does not know.
# shellcheck disable=SC2317  # the parts are called by name (part_$part)
set -uo pipefail
here=$(dirname "$0")
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
case ${1:-} in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
parts=${1:-${PARTS:-tests,smoke,kernels,latency}}
parts=${parts//,/ }
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
bench_use_bundle || exit 2
export PYTHONUNBUFFERED=1
window_ms=${WINDOW_MS:-250}
max_windows=${MAX_WINDOWS:-4}
summary=()
failed=0

# note NAME RC: one summary row; a nonzero RC fails the pass.
note() {
  summary+=("$(printf '%-34s %s' "$1" "$([[ $2 == 0 ]] && echo PASS || echo "FAIL rc=$2")")")
  [[ $2 == 0 ]] || failed=1
}

# A kerneld on the GPU for the parts that drive one; sets T (its TCP
# address), U (its unix socket: a caller there has a verified uid, which
# registering shared memory needs) and kp. Extra flags follow.
start_daemon() {
  rm -f "$dir/k.ready" "$dir/k.sock"
  U=unix:$dir/k.sock
  # shellcheck disable=SC2086  # KERNELD_FLAGS split on purpose
  "$kerneld" --listen 127.0.0.1:0 --listen "$U" --metrics_listen off --ready_file "$dir/k.ready" \
    ${KERNELD_FLAGS:-} "$@" >>"$log/kerneld.log" 2>&1 &
  kp=$!
  pids+=("$kp")
  T=$(ready_tcp "$dir/k.ready")
}
stop_daemon() {
  kill -TERM "$kp" 2>/dev/null
  wait "$kp"
}

part_tests() {
  local t name rc
  for t in "$B"/tests/*; do
    name=$(basename "$t")
    timeout 300 "$t" --gtest_brief=1 >"$log/$name.log" 2>&1
    rc=$?
    note "$name" "$rc"
    [[ $rc == 0 ]] || tail -15 "$log/$name.log"
  done
}

# zero_copy TAG "BACKEND VIA"...: scale on 4096 float16 round trips over the
# unix socket, checked: kernelctl is a second process, so a CUDA IPC handle
# really crosses processes.
zero_copy() {
  local tag=$1 v
  shift
  for v in "$@"; do
    # shellcheck disable=SC2086  # two words
    set -- $v
    echo "== --backend $1 --via $2$tag" >>"$log/zero_copy.txt"
    "$kernelctl" --target "$U" run scale --backend "$1" --via "$2" --dtype float16 --shape 4096 \
      --attr factor=2.0 --repeat 3000 --check >>"$log/zero_copy.txt" 2>&1
    note "kernelctl $1 --via $2$tag" $?
  done
}

part_smoke() {
  local dt v
  start_daemon
  "$kernelctl" --target "$T" info >"$log/info.txt" 2>&1
  head -3 "$log/info.txt"
  for dt in float16 bfloat16 float32; do
    "$kernelctl" --target "$T" run scale --backend cuda --dtype "$dt" --shape 4097 --attr factor=2.0 \
      --check --repeat 200 >>"$log/kernelctl.txt" 2>&1
    note "kernelctl scale cuda $dt" $?
  done
  # gemm's per-request ranking (kernels/ops/gemm): with no backend named,
  # float32 16x4096 @ [4096, 4096] goes to the cuda decode kernel, bfloat16
  # with transpose_b to cublas; both checked against the float64 reference.
  for v in "float32 false cuda" "bfloat16 true cublas"; do
    # shellcheck disable=SC2086  # two or three words
    set -- $v
    "$kernelctl" --target "$T" run gemm --dtype "$1" --input a="$1":16x4096 --input b="$1":4096x4096 \
      --attr transpose_b="$2" --check >"$log/gemm_$1.txt" 2>&1 && grep -q "^gemm on $3/" "$log/gemm_$1.txt"
    note "kernelctl gemm $1 -> $3" $?
  done
  zero_copy "" "cuda ipc" "cuda server-buffer" "cuda inline" "cpu shm" "cpu inline"
  stop_daemon
  note "kerneld SIGTERM exit" $?
  # The same with idle device threads polling their queues.
  start_daemon --worker_spin_us 1000
  zero_copy " spin" "cuda ipc" "cpu shm"
  stop_daemon
  echo "== zero copy (scale, 4096 float16)"
  grep -E "^==|ready in|client p50|server p50" "$log/zero_copy.txt"
}

# key_ratio FILE: "op dtype shape impl,ratio" per kernel_bench row: "x copy"
# for memory-bound rows, "vs cublas" for gemm.
key_ratio() {
  awk '$1 == "gemm" && $4 != "" { for (i = 1; i <= NF; ++i) if ($i == "cublas" && $(i-1) == "vs") { print $1" "$2" "$3" "$4 "," $(i+1); next } }
       NF == 8 && $8 ~ /^[0-9.]+$/ { print $1" "$2" "$3" "$4 "," $8 }' "$1" | sort
}

part_kernels() {
  local args=(--flush-l2-clean --reps "${REPS:-30}")
  [[ -n ${OPS:-} ]] && args+=(--ops "$OPS")
  [[ -n ${DTYPES:-} ]] && args+=(--dtypes "$DTYPES")
  [[ -n ${SHAPES:-} ]] && args+=(--extra-shapes "$SHAPES")
  timeout 300 "$B/bench/kernel_bench" "${args[@]}" >"$log/kernel_bench.txt" 2>&1
  note "kernel_bench" $?
  if [[ -z ${OPS:-} || ,$OPS, == *,gemm,* ]]; then
    timeout 120 "$B/bench/kernel_bench" --flush-l2 --reps "${REPS:-30}" --ops gemm \
      >"$log/kernel_bench_gemm_dirty.txt" 2>&1
    note "kernel_bench gemm, dirty flush" $?
  fi
  if [[ -x .device/base/kernel_bench ]]; then
    # Old and new in one run, one after the other, so clocks and
    # temperature are shared.
    timeout 300 .device/base/kernel_bench "${args[@]}" >"$log/kernel_bench_old.txt" 2>&1
    join -t, <(key_ratio "$log/kernel_bench_old.txt") <(key_ratio "$log/kernel_bench.txt") |
      awk -F, -v tol="${TOL:-0.02}" '
        BEGIN { printf "%-48s %7s %7s %7s\n", "op dtype shape impl", "old", "new", "diff"; bad = 0 }
        { d = $3 - $2; flag = (d > tol || d < -tol) ? "  <-- moved" : ""; if (flag != "") bad = 1
          printf "%-48s %7.2f %7.2f %+7.2f%s\n", $1, $2, $3, d, flag }
        END { exit bad }' >"$log/compare.txt"
    summary+=("$(printf '%-34s %s' "kernel_bench old vs new" "rc=$? (1: a ratio moved)")")
    echo "== kernel_bench old vs new (x copy, x cublas)"
    tail -80 "$log/compare.txt"
  else
    echo "== kernel_bench (L2 flushed clean)"
    grep -E "large|mid|decode|x4096|device" "$log/kernel_bench.txt" | head -150
  fi
}

part_peers() {
  local fi_args=()
  [[ -x .device/peers/flashinfer_peer ]] && fi_args=(--flashinfer .device/peers/flashinfer_peer)
  timeout 300 python3 "$here/peers.py" --kernel-bench "$B/bench/kernel_bench" "${fi_args[@]}" \
    --ops "${PEER_OPS:-rmsnorm,fused_add_rmsnorm,layernorm,softmax,scale,add,silu_and_mul}" \
    --shapes decode,mid,large \
    --extra-shapes "${PEER_SHAPES:-r1h2k=1x2048,r1h4k=1x4096,r1h8k=1x8192,r16h2k=16x2048,r16h8k=16x8192,r64h4k=64x4096,r64h8k=64x8192,v32k=16x32768,v128k=16x128256,v128k64=64x128256}" \
    --json "$log/peers.json" >"$log/peers.txt" 2>"$log/peers.err"
  note "peers" $?
  cat "$log/peers.txt"
  tail -3 "$log/peers.err"
}

# FlashInfer's Python package with no network: .whl/flashinfer's wheels
# with --no-deps in FI_SITE, and those of fallback/ only where the machine's
# python3 lacks the module (torch's filelock, jinja2, typing_extensions;
# packaging, tqdm, requests). Its JIT runs ninja from FI_SITE/bin and nvcc
# from CUDA_HOME.
FI_SITE=${FI_SITE:-/tmp/fisite}
fi_env() {
  local w mod probe want=()
  compgen -G ".whl/flashinfer/flashinfer_python-*.whl" >/dev/null ||
    { echo "no .whl/flashinfer (client/python/tests/gpu_wheels.sh makes it)"; return 1; }
  want=(.whl/flashinfer/*.whl)
  for w in .whl/flashinfer/fallback/*.whl; do
    [[ -e $w ]] || continue
    mod=$(basename "$w")
    mod=${mod%%-*}
    mod=${mod,,}
    probe="import $mod"
    # apache-tvm-ffi imports typing_extensions.get_annotations (4.13).
    [[ $mod == typing_extensions ]] && probe="from typing_extensions import get_annotations"
    env -u PYTHONPATH python3 -c "$probe" 2>/dev/null || want+=("$w")
  done
  rm -rf "$FI_SITE"
  echo "installing: ${want[*]##*/}" >"$log/install.txt"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$FI_SITE" \
    "${want[@]}" >>"$log/install.txt" 2>&1 || { tail -5 "$log/install.txt"; return 1; }
}

# fi_run CMD...: CMD with FI_SITE's modules and ninja, and FlashInfer's JIT
# restricted to the one architecture.
fi_run() {
  env PYTHONPATH="$FI_SITE" PATH="$FI_SITE/bin:$PATH" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" \
    FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0}" \
    FLASHINFER_WORKSPACE_BASE="${FLASHINFER_WORKSPACE_BASE:-/tmp/fiws}" "$@"
}

part_attention() {
  fi_env || { note "flashinfer install" 1; return; }
  { echo "ninja $(fi_run ninja --version)"; "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version | tail -1; } \
    >"$log/versions.txt" 2>&1
  fi_run python3 -c 'import torch, tvm_ffi, flashinfer; print("flashinfer", flashinfer.__version__, "tvm_ffi", tvm_ffi.__version__, "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count()); print("jit", flashinfer.jit.env.FLASHINFER_JIT_DIR)' \
    >>"$log/versions.txt" 2>&1
  note "import flashinfer" $?
  cat "$log/versions.txt"
  # With no FlashInfer the rows still come, torch's column only.
  fi_run timeout "${ATTENTION_TIMEOUT:-420}" python3 "$here/peers.py" --kernel-bench "$B/bench/kernel_bench" \
    --ops "${PEER_OPS:-batch_decode_paged,batch_prefill_paged,append_paged_kv_cache}" \
    ${PEER_SHAPES:+--shapes "$PEER_SHAPES"} --json "$log/peers_attention.json" \
    -- --dtypes "${PEER_DTYPES:-bfloat16}" >"$log/peers_attention.txt" 2>"$log/peers_attention.err"
  note "peers attention" $?
  cat "$log/peers_attention.txt"
  grep -E "^peers:|Error|error:" "$log/peers_attention.err" | sort | uniq -c | head -20
  python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))
n = sum("flashinfer_us" in r for r in rows)
print(f"flashinfer column on {n} of {len(rows)} rows")
sys.exit(n == 0)' "$log/peers_attention.json"
  note "flashinfer column" $?
  du -sh "${FLASHINFER_WORKSPACE_BASE:-/tmp/fiws}/.cache/flashinfer" 2>/dev/null
  # Through the service: a decode step over a cache resident in the daemon
  # (B 16, kv 8192, H 32 / 8, D 128, page 16, bfloat16), beside the same
  # kernels' rows above (b16kv8192, b16step).
  [[ ${DECODE_LOOP:-1} == 1 ]] || return 0
  python_env || { note "python environment" 1; return; }
  start_daemon
  # The unix socket: the client's two connections (grpcio for the buffers,
  # libkerneld_native for the calls) are then one principal, its uid.
  timeout 240 python3 examples/decode_loop.py --target "$U" --device cuda:0 --batch 16 \
    --prompt 8192 --steps "${DECODE_STEPS:-200}" --heads 32/8 --dtype bfloat16 \
    >"$log/decode_loop.txt" 2>&1
  note "decode loop through the service" $?
  stop_daemon
  cat "$log/decode_loop.txt"
}

# compare NAME [env...]: bench/perf_compare.sh over the bundle, with the
# part's windows; its summary table printed.
compare() {
  local name=$1
  shift
  env WINDOW_MS="$window_ms" MAX_WINDOWS="$max_windows" JSON_DIR="$log/$name" "$@" \
    timeout 400 "$here/perf_compare.sh" bundle >"$log/$name.txt" 2>&1
  note "perf_compare $name" $?
}

part_service() {
  compare small LEVELS="${LEVELS:-1,32}"
  echo "== kerneld / floor, scale on 16 float32 inline"
  sed -n '/^## kerneld \/ floor/,$p' "$log/small.txt"
  compare ipc LEVELS="${LEVELS:-1,32}" FLOOR_FLAGS=--kernel \
    REQUEST="--backend cuda --via ipc --dtype float16 --shape 4096"
  echo "== kerneld / floor --kernel, scale on 4096 float16 in a CUDA IPC buffer"
  sed -n '/^## kerneld \/ floor/,$p' "$log/ipc.txt"
  echo "== kerneld's stages at one client"
  awk '/^## /{h=$0; n=0; next} /server p50/ && n++ == 0 {sub(/^ +/, ""); print h " | " $0}' \
    "$log/ipc.txt" | cut -c1-230
  # Launch-to-done of the same kernel with no server: ways of waiting.
  timeout 90 "$B/bench/completion_bench" 150 3000 >"$log/completion_bench.txt" 2>&1
  note "completion_bench" $?
  echo "== completion_bench"
  cat "$log/completion_bench.txt"
}

part_goals() {
  local i=0 flags m ipc="--backend cuda --via ipc --dtype float16 --shape 4096"
  for flags in "" "--grpc_api=callback"; do
    i=$((i + 1))
    # The GPU request beside the floor that scales the same buffer; 2 MiB
    # inline on the GPU, unary over TCP, one client; 16 float32 inline,
    # wherever the scheduler puts it.
    compare "ipc-$i" KERNELD_FLAGS="$flags" LEVELS=1,32 FLOOR_FLAGS=--kernel REQUEST="$ipc"
    compare "big-$i" KERNELD_FLAGS="$flags" LEVELS=1 FLOOR_FLAGS=--kernel TRANSPORTS=tcp MODES=unary \
      REQUEST="--backend cuda --dtype float16 --shape 1048576"
    compare "small-$i" KERNELD_FLAGS="$flags" LEVELS=1,8,32
  done
  python3 "$here/service_goals_table.py" "$log"
  for m in stream unary; do
    echo "== handler work, $m, 32 clients (bench/host_ab.sh work)"
    MODE=$m ROUNDS=3 timeout 240 "$here/host_ab.sh" work bundle 2>"$log/work-$m.err" | tee "$log/work-$m.txt"
    note "work amplification $m" "${PIPESTATUS[0]}"
  done
}

part_latency() {
  local b
  for b in cuda cpu; do
    timeout 120 "$B/bench/service_latency_bench" 3000 "$b" >"$log/latency_$b.txt" 2>&1
    note "service_latency_bench $b" $?
    cat "$log/latency_$b.txt"
  done
}

# The wheels, the native library and the environment the Python parts use.
python_env() {
  compgen -G ".whl/*.whl" >/dev/null || { echo "no .whl/*.whl (client/python/tests/gpu_wheels.sh makes them)"; return 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site
  # rpc="native" (the default client) through the bundle's libkerneld_native.
  if [[ ${GPU_PASS_NATIVE:-1} == 1 ]]; then
    export KERNELD_NATIVE_LIB=$PWD/$B/lib/libkerneld_native.so
  else
    export KERNELD_NATIVE_LIB=0
  fi
  python3 -c 'import kerneld, grpc, google.protobuf as pb, torch, numpy, cupy; print("kerneld", kerneld.__version__, "grpcio", grpc.__version__, "protobuf", pb.__version__, "torch", torch.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__, "gpus", torch.cuda.device_count())' 2>&1 |
    tee "$log/versions.txt"
}

part_python() {
  python_env || { note "python environment" 1; return; }
  KERNELD_BIN=$PWD/$B/bin/kerneld timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider -rs \
    --junitxml="$log/gpu_pytest.xml" client/python/tests/test_gpu.py client/python/tests/test_lane_gpu.py \
    client/python/tests/test_graph.py client/python/tests/test_decode_cache.py \
    >"$log/gpu_pytest.log" 2>&1
  note "python gpu tests" $?
  grep -E "passed|failed|error" "$log/gpu_pytest.log" | tail -3
  start_daemon
  timeout 150 python3 client/python/bench/bench_scale.py --target "$T" --kernelctl "$kernelctl" \
    --repeat 3000 --json "$log/bench.json" >"$log/bench.txt" 2>&1
  note "python bench_scale" $?
  tail -25 "$log/bench.txt"
  if [[ ${SKIP_PROFILE:-0} != 1 ]]; then
    timeout 120 python3 client/python/bench/profile_ipc.py --target "$T" --calls 2000 \
      >"$log/profile_ipc.txt" 2>&1
    note "python profile_ipc" $?
    grep -E "^rpc=|^pieces" "$log/profile_ipc.txt"
  fi
  stop_daemon
}

part_breakdown() {
  python_env || { note "python environment" 1; return; }
  start_daemon
  if [[ -x $B/bench/native_call_probe ]]; then
    timeout 120 "$B/bench/native_call_probe" "$T" 2000 3 >"$log/native_call_probe.txt" 2>&1
    note "native_call_probe" $?
    cat "$log/native_call_probe.txt"
  fi
  timeout 300 python3 client/python/bench/call_breakdown.py --target "$T" --kernelctl "$kernelctl" \
    --calls 2000 --rounds "${ROUNDS:-3}" >"$log/breakdown.txt" 2>&1
  note "call_breakdown" $?
  cat "$log/breakdown.txt"
  timeout 120 python3 client/python/bench/gap_probe.py --target "$T" --calls 2000 >"$log/gap_probe.txt" 2>&1
  note "gap_probe" $?
  cat "$log/gap_probe.txt"
  stop_daemon
}

part_lane() {
  python_env || { note "python environment" 1; return; }
  timeout 300 python3 client/python/bench/lane_bench.py --kerneld "$kerneld" --kernelctl "$kernelctl" \
    --calls 2000 --rounds "${ROUNDS:-5}" --json "$log/lane_bench.json" >"$log/lane_bench.txt" 2>&1
  note "lane_bench" $?
  cat "$log/lane_bench.txt"
}

part_userkernels() {
  # Its OUT keeps the daemon's log and the bench's record beside the table.
  OUT=$log timeout 400 bench/user_kernel_bench.sh bundle >"$log/table.txt" 2>&1
  note "user_kernel_bench" $?
  cat "$log/table.txt"
}

part_tuning() {
  timeout 500 bench/tuning_bench.sh bundle >"$log/tuning_bench.txt" 2>&1
  note "tuning_bench" $?
  tail -40 "$log/tuning_bench.txt"
}

part_placement() {
  timeout 500 bench/placement_bench.sh bundle >"$log/placement_bench.txt" 2>&1
  note "placement_bench" $?
  tail -40 "$log/placement_bench.txt"
}

part_kserve() {
  python_env || { note "python environment" 1; return; }
  KERNELD_BIN=$PWD/$B/bin/kerneld timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rs \
    client/python/tests/test_kserve_gpu.py >"$log/kserve_pytest.log" 2>&1
  note "python kserve gpu test" $?
  grep -E "passed|failed|error|SKIP" "$log/kserve_pytest.log" | tail -3
  local pa=/tmp/site/perf_analyzer/bin/perf_analyzer
  chmod +x "$pa" 2>/dev/null
  PERF_ANALYZER=$pa BACKEND=cuda OUT=$log/records timeout 900 bench/kserve_perf.sh bundle \
    >"$log/kserve_perf.txt" 2>&1
  note "kserve_perf" $?
  tail -12 "$log/kserve_perf.txt"
}

part_labs() {
  if [[ ! -d .device/lab ]]; then
    echo "no .device/lab: the labs build only with -DKERNELD_LABS=ON (KERNELD_LABS=1 scripts/device_bundle)"
    note "labs" 1
    return
  fi
  if [[ -x .device/lab/gemm_decode_lab ]]; then
    timeout 200 .device/lab/gemm_decode_lab --reps "${REPS:-30}" --read-flush --cluster >"$log/gemm_decode_lab.txt" 2>&1
    note "gemm_decode_lab" $?
    tail -40 "$log/gemm_decode_lab.txt"
  fi
  if [[ -x .device/lab/softmax_floor_lab ]]; then
    timeout 200 .device/lab/softmax_floor_lab --reps "${REPS:-30}" >"$log/softmax_floor_lab.txt" 2>&1
    note "softmax_floor_lab" $?
    tail -15 "$log/softmax_floor_lab.txt"
  fi
  if [[ -x .device/lab/top_k_lab ]]; then
    timeout 200 .device/lab/top_k_lab "${REPS:-30}" >"$log/top_k_lab.txt" 2>&1
    note "top_k_lab" $?
    tail -40 "$log/top_k_lab.txt"
  fi
  if [[ -x .device/lab/decode_chunks_lab ]]; then
    timeout 200 .device/lab/decode_chunks_lab "${REPS:-50}" >"$log/decode_chunks_lab.txt" 2>&1
    note "decode_chunks_lab" $?
    cat "$log/decode_chunks_lab.txt"
  fi
}

bench_binaries bundle
bench_workdir device-pass
bench_gpu | tee "$OUT/gpu.txt"
"$kerneld" --help >/dev/null || { echo "kerneld does not start"; ldd "$kerneld"; exit 1; }
for part in $parts; do
  if ! declare -F "part_$part" >/dev/null; then
    echo "device_pass: unknown part '$part' (--help lists them)"
    failed=2
    continue
  fi
  log=$OUT/$part
  mkdir -p "$log"
  echo "===== $part"
  "part_$part"
done
echo "===== summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
# The logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt --exclude=gpu.txt ./* 2>/dev/null &&
  find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt ! -name gpu.txt -exec rm -rf {} +)
exit $failed
