#!/usr/bin/env bash
# The container image's HEALTHCHECK command (Dockerfile, both runtime stages)
# against real daemons started the ways docs/deploy.md starts the image:
#   unix   --listen=unix:/run/kerneld/kerneld.sock (the zero-copy setup;
#          issue 26: the old check asked 127.0.0.1:50051 and failed there)
#   tcp    --listen=0.0.0.0:PORT --allow_insecure_remote (the image's CMD,
#          port moved off 50051)
#   ready  --listen 127.0.0.1:0 --ready_file F (port 0, flag and value apart)
# Each must pass while kerneld serves and fail once it has stopped. The
# daemon runs here, not in a container: deploy/docker and the build's
# kernelctl are on PATH as /opt/kerneld/bin is in the image, and KERNELD_PID
# names the daemon (in the image it is PID 1).
#   tests/deploy/healthcheck_test.sh KERNELD KERNELCTL
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
KERNELD=$(realpath "$1") KERNELCTL=$(realpath "$2")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kerneld-health.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/bin"
ln -s "$KERNELCTL" "$tmp/bin/kernelctl"

health=$(python3 - Dockerfile <<'PY'
import json, re, sys
text = open(sys.argv[1]).read().replace("\\\n", " ")
cmds = [json.loads(l[l.index(" CMD ") + 5:]) for l in text.splitlines() if l.startswith("HEALTHCHECK ")]
assert len(cmds) == 2 and cmds[0] == cmds[1], "the two runtime stages' HEALTHCHECKs differ: %r" % cmds
copies = re.findall(r"^COPY (\S+) /opt/kerneld/bin/(\S+)$", text, re.M)
print(" ".join(cmds[0]))
for src, name in copies:
    print("copy %s %s" % (src, name))
PY
) || { echo "FAIL: cannot read HEALTHCHECK from the Dockerfile"; exit 1; }
cmd=$(head -n 1 <<<"$health")
# What the image copies into /opt/kerneld/bin goes onto PATH here too.
while read -r _ src name; do ln -sf "$PWD/$src" "$tmp/bin/$name"; done < <(tail -n +2 <<<"$health")
echo "HEALTHCHECK: $cmd"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
failed=0
check() {  # NAME DIRECT_TARGET FLAGS...
  local name=$1 direct=$2; shift 2
  "$KERNELD" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$!
  pids+=("$pid")
  local up=0
  for _ in $(seq 200); do  # until it serves (asked directly) or exits
    [[ -z "$direct" || "$direct" == ready ]] && direct=$(awk '$1 == "grpc" {print $2; exit}' "$tmp/ready" 2>/dev/null)
    [[ -n "$direct" ]] && "$KERNELCTL" --target "$direct" health >/dev/null 2>&1 && { up=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ((!up)); then
    echo "FAIL $name: kerneld did not serve: $(tail -3 "$tmp/$name.err")"; failed=1; return
  fi
  # shellcheck disable=SC2086  # the Dockerfile's word list
  if out=$(env PATH="$tmp/bin:$PATH" KERNELD_PID="$pid" $cmd 2>&1); then
    echo "ok   $name: HEALTHCHECK passes while serving ($out)"
  else
    echo "FAIL $name: HEALTHCHECK failed against a serving kerneld: $out"; failed=1
  fi
  kill -TERM "$pid"; wait "$pid"
  # shellcheck disable=SC2086
  if out=$(env PATH="$tmp/bin:$PATH" KERNELD_PID="$pid" $cmd 2>&1); then
    echo "FAIL $name: HEALTHCHECK passes with kerneld stopped"; failed=1
  else
    echo "ok   $name: HEALTHCHECK fails once kerneld stopped"
  fi
}

mp=$(free_port) gp=$(free_port)
check unix "unix:$tmp/kerneld.sock" --listen="unix:$tmp/kerneld.sock" --metrics_listen="0.0.0.0:$mp"
check tcp "127.0.0.1:$gp" --listen="0.0.0.0:$gp" --allow_insecure_remote --metrics_listen=off
rm -f "$tmp/ready"
check ready ready --listen 127.0.0.1:0 --metrics_listen=off --ready_file "$tmp/ready"

if ((failed)); then echo "healthcheck_test: FAILED"; exit 1; fi
echo "healthcheck_test: OK"
