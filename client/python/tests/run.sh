#!/usr/bin/env bash
# The Python client's CI stage (scripts/test runs it): a fresh venv, a real
# `pip install ./client/python[test]` (grpcio, protobuf, numpy and the stubs
# generated from proto/ at build time), then pytest against real daemons on
# loopback (CPU backend where there is no GPU; the `gpu` tests are left to
# tests/gpu_pass.sh). First, a second venv with the oldest protobuf the
# package allows, installed from a read-only copy of the source.
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
# libkerneld_native (rpc="native", the default where it is found) is built
# beside the daemon: <build>/client/ in a build tree, <prefix>/lib installed.
# The suite runs twice: with it (the default client is native), then without
# (the default client is grpcio's stream), so both paths stay covered.
TOP=$(cd "$(dirname "$BIN")/.." && pwd)
NATIVE=
for cand in "$TOP/client/libkerneld_native.so" "$TOP/lib/libkerneld_native.so"; do
  [[ -f $cand ]] && { NATIVE=$cand; break; }
done
if [[ -z $NATIVE ]]; then
  echo "python tests: no libkerneld_native.so beside $BIN (the build makes client/libkerneld_native.so)" >&2
  exit 2
fi
# Run from the tests folder's parent's parent so that the source tree's
# kerneld/ never shadows the installed package.
cd "$ROOT"

# The oldest protobuf pyproject.toml allows, installed from a read-only copy
# of the source (pip must write nothing there) into a second fresh venv; its
# error and native tests then run against a real daemon.
LOW=$(sed -n 's/.*"protobuf>=\([0-9.]*\).*/\1/p' "$ROOT/client/python/pyproject.toml")
[[ -n $LOW ]] || { echo "python tests: no protobuf>= in pyproject.toml" >&2; exit 2; }
RO=$(mktemp -d)
trap 'chmod -R u+w "$RO"; rm -rf "$RO"' EXIT
mkdir -p "$RO/client"
cp -r "$ROOT/proto" "$RO/proto"
cp -r "$ROOT/client/python" "$RO/client/python"
rm -rf "$RO/client/python/build" "$RO/client/python/"*.egg-info "$RO/client/python/kerneld/_proto"
touch "$RO/copied"
chmod -R a-w "$RO"
rm -rf "$VENV-lowest"
python3 -m venv "$VENV-lowest"
"$VENV-lowest/bin/python" -m pip install -q "$RO/client/python[test]" "protobuf==$LOW"
if [[ -n $(find "$RO" -newer "$RO/copied" -print -quit) ]]; then
  echo "python tests: pip install wrote into the read-only source:" >&2
  find "$RO" -newer "$RO/copied" >&2
  exit 1
fi
"$VENV-lowest/bin/python" -c 'import google.protobuf as p, sys; v = p.__version__; print("python tests: read-only install with protobuf", v); sys.exit(v != sys.argv[1] + ".0")' "$LOW"
KERNELD_BIN=$BIN KERNELD_NATIVE_LIB=$NATIVE "$VENV-lowest/bin/pytest" -q -m "not gpu" -p no:cacheprovider \
  client/python/tests/test_errors.py client/python/tests/test_native.py "$@"
rm -rf "$VENV-lowest"

# The KServe v2 front end (test_kserve.py) through a real tritonclient[grpc]
# from PyPI, in a fresh venv of its own: tritonclient caps protobuf below the
# newest the kerneld package allows, which the main venv keeps testing (there
# test_kserve.py skips itself).
rm -rf "$VENV-kserve"
python3 -m venv "$VENV-kserve"
"$VENV-kserve/bin/python" -m pip install -q --upgrade pip
"$VENV-kserve/bin/python" -m pip install -q --no-cache-dir "$ROOT/client/python[test,kserve]"
"$VENV-kserve/bin/python" -c 'import tritonclient.grpc, importlib.metadata as m; print("python tests: tritonclient", m.version("tritonclient"))'
KERNELD_BIN=$BIN KERNELD_NATIVE_LIB=$NATIVE "$VENV-kserve/bin/pytest" -q -m "not gpu" -p no:cacheprovider \
  client/python/tests/test_kserve.py "$@"
rm -rf "$VENV-kserve"

echo "python tests: with libkerneld_native ($NATIVE)"
KERNELD_BIN=$BIN KERNELD_NATIVE_LIB=$NATIVE "$VENV/bin/pytest" -q -m "not gpu" -p no:cacheprovider client/python/tests "$@"
echo "python tests: without it (KERNELD_NATIVE_LIB=0)"
KERNELD_BIN=$BIN KERNELD_NATIVE_LIB=0 exec "$VENV/bin/pytest" -q -m "not gpu" -p no:cacheprovider client/python/tests "$@"
