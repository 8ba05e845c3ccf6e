#!/usr/bin/env bash
# The Python client against kernelctl (C++) on one CPU daemon, one run:
# scale on 16 and 4096 float32 inline and 4096 through shared memory,
# concurrency 1; prints each p50 and the difference (issue 14's goal: <= 30 us).
# Usage: bench/python_vs_kernelctl.sh [BUILD_DIR] [python_vs_kernelctl.py args...]
#   BUILD_DIR defaults to build-cpu (then build); $PYTHON (default build/pyvenv/bin/python,
#   made by client/python/tests/run.sh) must import kerneld.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-}
[[ $# -gt 0 ]] && shift
if [[ -z $BUILD ]]; then
  BUILD=$ROOT/build-cpu
  [[ -x $BUILD/server/kerneld ]] || BUILD=$ROOT/build
fi
PY=${PYTHON:-$ROOT/build/pyvenv/bin/python}
[[ -x $PY ]] || PY=python3
for args in "--shape 16" "--shape 4096" "--shape 4096 --via shm"; do
  # shellcheck disable=SC2086
  "$PY" "$ROOT/client/python/bench/python_vs_kernelctl.py" --kerneld "$BUILD/server/kerneld" \
    --kernelctl "$BUILD/client/kernelctl" --dtype float32 $args "$@"
  echo
done
