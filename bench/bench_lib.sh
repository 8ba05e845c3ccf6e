# shellcheck shell=bash
# Sourced by the bench scripts (bash): the preamble and helpers they share.

# The bundle scripts/device_bundle made, on the GPU machine: the tarball
# .device/kerneld.tar.gz unpacked into $BUNDLE (default .device/kerneld),
# unless that very tarball's unpacking is already there. A machine that
# stays up between runs keeps earlier runs' files, and measuring an older
# bundle's binaries would be wrong: the stamp holds the tarball's checksum (no
# clock involved). A folder with binaries and no stamp (copied unpacked, or a
# BUNDLE= of your own) is left alone. Sets B. Fails, saying why, when the
# tarball does not unpack.
bench_unpack_bundle() {
  B=${BUNDLE:-.device/kerneld}
  local tarball=.device/kerneld.tar.gz sum
  [[ -f $tarball ]] || return 0
  [[ -x $B/bin/kerneld && ! -f $B/.unpacked ]] && return 0
  sum=$(cksum <"$tarball")
  [[ -f $B/.unpacked && $(cat "$B/.unpacked") == "$sum" ]] && return 0
  if ! { rm -rf "$B" && mkdir -p "$B" && tar xzf "$tarball" -C "$B" --strip-components=1; }; then
    echo "$(basename "$0"): cannot unpack $tarball into $B" >&2
    return 1
  fi
  [[ ! -f .device/kerneld.commit ]] || cp .device/kerneld.commit "$B/COMMIT"
  echo "$sum" >"$B/.unpacked"
}

# The commit the measured binaries were built from, for a figure's stamp: the
# bundle's COMMIT (scripts/device_bundle writes it) when the binaries are the
# bundle's, else this checkout's HEAD. The GPU machine's copy of the
# repository can carry an older .git than the bundle it runs.
bench_commit() {
  if [[ -n ${B:-} && -f $B/COMMIT && ${KERNELD:-} == "$B"/* ]]; then
    cat "$B/COMMIT"
    return
  fi
  git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --short HEAD 2>/dev/null || echo "?"
}

# bench_unpack_bundle, then the environment the bench scripts read
# (KERNELD, KERNELCTL, ECHO_FLOOR, KERNELD_BINARY for the gpu tests,
# LD_LIBRARY_PATH). Sets B.
bench_use_bundle() {
  bench_unpack_bundle || return 1
  [[ -x $B/bin/kerneld ]] || {
    echo "$(basename "$0"): no $B/bin/kerneld (scripts/device_bundle makes .device/kerneld and .device/kerneld.tar.gz)" >&2
    return 1
  }
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export KERNELD=$B/bin/kerneld KERNELCTL=$B/bin/kernelctl ECHO_FLOOR=$B/bench/kerneld_echo_floor
  export KERNELD_BINARY=$PWD/$B/bin/kerneld
}

# bench_binaries [BUILD [NAME...]]: the binaries a service bench drives:
# KERNELD, KERNELCTL and ECHO_FLOOR when set, else those of the build tree
# BUILD (default build), or of the bundle when BUILD is "bundle". Sets
# kerneld, kernelctl and floor; exits 2 when one the bench needs is missing.
# NAME: the ones it needs, of kerneld, kernelctl and floor (default all
# three: a bench that starts no echo floor runs without one).
bench_binaries() {
  if [[ ${1:-} == bundle ]]; then bench_use_bundle || exit 2; fi
  local build=${1:-build}
  kerneld=${KERNELD:-$build/server/kerneld}
  # shellcheck disable=SC2034  # the caller's, checked below by name
  kernelctl=${KERNELCTL:-$build/client/kernelctl}
  floor=${ECHO_FLOOR:-$build/bench/kerneld_echo_floor}
  local need=("${@:2}")
  ((${#need[@]} > 0)) || need=(kerneld kernelctl floor)
  # Each one's build target and variable, for the message.
  local -A make_target=([kerneld]=kerneld [kernelctl]=kernelctl [floor]=kerneld_echo_floor)
  local -A env_var=([kerneld]=KERNELD [kernelctl]=KERNELCTL [floor]=ECHO_FLOOR)
  local name targets="" vars=""
  for name in "${need[@]}"; do
    targets+=" ${make_target[$name]}"
    vars+="${vars:+, }${env_var[$name]}"
  done
  for name in "${need[@]}"; do
    [[ -x ${!name} ]] || {
      echo "$(basename "$0"): no ${!name} (build$targets, or set $vars)" >&2
      exit 2
    }
  done
}

# bench_stamp [GPU]: the line a bench's figures are stamped with: the GPU
# (default bench_gpu's line), the commit of the binaries measured
# (bench_commit) and the date.
# shellcheck disable=SC2120  # GPU is optional
bench_stamp() {
  echo "${1:-$(bench_gpu)}; $(bench_commit); $(date -u +%F)"
}

# A scratch folder in `dir` (/tmp/NAME-XXXXXX), empty `pids` and
# `server_env` arrays, and
# bench_stop_on_exit: the servers started with bench_start_* stop, and the
# folder goes, however the script ends.
bench_workdir() {
  dir=$(mktemp -d "/tmp/$1-XXXXXX")
  pids=()
  server_env=()
  bench_stop_on_exit
}

# On exit (normal or not): stop the servers whose pids the caller appended
# to its `pids` array, wait for them, and remove its `dir`. Both are the
# caller's globals, set before this is called.
# A script that fails first prints the end of each server's log, which the
# folder takes with it: a server that died says why.
bench_stop_on_exit() {
  # shellcheck disable=SC2154  # p and rc are the trap's own variables
  trap 'rc=$?
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
        if [[ $rc != 0 ]]; then
          for p in "$dir"/*.log; do
            [[ -f $p ]] && { echo "== the end of $(basename "$p"):"; tail -20 "$p"; } >&2
          done
        fi
        rm -rf "$dir"' EXIT
}

# bench_start_kerneld NAME [flags...]: kerneld on loopback TCP (and whatever
# the flags add), its ready file $dir/NAME.ready and log $dir/NAME.log, with
# the caller's server_env array (VAR=value words) in its environment; sets
# spid and appends it to pids. Prints nothing; ready_tcp waits for it.
bench_start_kerneld() {
  local name=$1
  shift
  rm -f "$dir/$name.ready"
  env "${server_env[@]}" "$kerneld" --listen=127.0.0.1:0 --metrics_listen=off --ready_file="$dir/$name.ready" "$@" \
    >"$dir/$name.log" 2>&1 &
  spid=$!
  pids+=("$spid")
}

# bench_start_floor NAME [flags...]: the echo floor, the same way.
bench_start_floor() {
  local name=$1
  shift
  rm -f "$dir/$name.ready"
  env "${server_env[@]}" "$floor" --listen 127.0.0.1:0 --ready_file "$dir/$name.ready" "$@" >"$dir/$name.log" 2>&1 &
  spid=$!
  pids+=("$spid")
}

# bench_stop PID: stops one server started above and waits for it.
bench_stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# Waits for a ready file's "grpc ADDR" lines (kerneld's and
# kerneld_echo_floor's --ready_file); prints the first TCP address.
ready_tcp() {
  local _
  for _ in $(seq 300); do
    if [[ -s $1 ]] && grep -q '^grpc 127' "$1"; then
      awk '$1 == "grpc" && $2 !~ /^unix:/ { print $2; exit }' "$1"
      return
    fi
    sleep 0.1
  done
  echo "$(basename "$0"): $1 never appeared" >&2
  exit 1
}

# The GPU's name and driver, or "no GPU".
bench_gpu() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU"
}
