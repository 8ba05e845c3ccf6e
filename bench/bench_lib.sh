# Sourced by the bench scripts (bash): helpers they share.

# The bundle scripts/device_bundle made, on the device machine: the carried
# .device/kerneld.tar.gz unpacked into $BUNDLE (default .device/kerneld),
# unless that very tarball's unpacking is already there. A warm machine keeps
# earlier calls' files, and measuring an older bundle's binaries would be
# wrong: the stamp holds the tarball's checksum (no clock involved). A folder
# with binaries and no stamp (carried unpacked, or a BUNDLE= of your own) is
# left alone. Sets B. Fails, saying why, when the tarball does not unpack.
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
  echo "$sum" >"$B/.unpacked"
}

# bench_unpack_bundle, then the environment the bench scripts read
# (KERNELD, KERNELCTL, ECHO_FLOOR, LD_LIBRARY_PATH). Sets B and OUT (default
# gpu-logs).
bench_use_bundle() {
  bench_unpack_bundle || return 1
  OUT=${OUT:-gpu-logs}
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export KERNELD=$B/bin/kerneld KERNELCTL=$B/bin/kernelctl ECHO_FLOOR=$B/bench/kerneld_echo_floor
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

# On exit (normal or not): stop the servers whose pids the caller appended
# to its `pids` array, wait for them, and remove its `dir`. Both are the
# caller's globals, set before this is called.
bench_stop_on_exit() {
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
        rm -rf "$dir"' EXIT
}
