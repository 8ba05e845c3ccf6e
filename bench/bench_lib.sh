# Sourced by the bench scripts (bash): helpers they share.

# The bundle scripts/device_bundle made, on the device machine: unpacked
# from the carried .device/kerneld.tar.gz into $BUNDLE (default
# .device/kerneld) unless an unpacking of that very tarball is already there
# (a warm machine keeps the previous call's files, and reusing an older
# bundle's binaries would measure the wrong build); then the environment
# the bench scripts read (KERNELD, KERNELCTL, ECHO_FLOOR, LD_LIBRARY_PATH).
# Sets B (the bundle) and OUT (default gpu-logs).
bench_use_bundle() {
  B=${BUNDLE:-.device/kerneld}
  OUT=${OUT:-gpu-logs}
  local tarball=.device/kerneld.tar.gz
  if [[ -f $tarball ]] && [[ ! -x $B/bin/kerneld || ! -f $B/.unpacked || $tarball -nt $B/.unpacked ]]; then
    rm -rf "$B" && mkdir -p "$B" && tar xzf "$tarball" -C "$B" --strip-components=1 && touch "$B/.unpacked"
  fi
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
