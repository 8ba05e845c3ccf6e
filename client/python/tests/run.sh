#!/usr/bin/env bash
# The Python client's CI stage (scripts/test runs it): a fresh venv, a real
# `pip install ./client/python[test]` (grpcio, protobuf, numpy and the stubs
# generated from proto/ at build time), then pytest against real daemons on
# loopback (CPU backend where there is no GPU; the `gpu` tests are left to
# tests/gpu_pass.sh).
# Usage: client/python/tests/run.sh [KERNELD_BIN] [pytest args...]
#   KERNELD_BIN defaults to build/server/kerneld; the venv is build/pyvenv
#   ($KERNELD_PY_VENV), made anew each run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BIN=${1:-$ROOT/build/server/kerneld}
shift || true
VENV=${KERNELD_PY_VENV:-$ROOT/build/pyvenv}
if [[ ! -x $BIN ]]; then
  echo "python tests: no kerneld at $BIN (scripts/build makes it)" >&2
  exit 2
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# --no-cache-dir: a real install from PyPI each time, like a fresh machine.
"$VENV/bin/python" -m pip install -q --no-cache-dir "$ROOT/client/python[test]"
"$VENV/bin/python" -c 'import kerneld, google.protobuf, grpc, numpy; print("python tests: kerneld", kerneld.__version__, "| protobuf", google.protobuf.__version__, "| grpcio", grpc.__version__, "| numpy", numpy.__version__)'
# Run from the tests folder's parent's parent so that the source tree's
# kerneld/ never shadows the installed package.
cd "$ROOT"
KERNELD_BIN=$BIN exec "$VENV/bin/pytest" -q -m "not gpu" -p no:cacheprovider client/python/tests "$@"
