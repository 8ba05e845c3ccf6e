#!/usr/bin/env bash
# Fills ./.whl (git-ignored, at the repository root) with what
# bench/device_pass.sh's python part installs on the GPU machine, which has
# python3 3.12, torch, cupy, numpy, ml_dtypes and pytest but no network:
# the kerneld wheel built here (stubs generated from proto/ by this
# machine's grpcio-tools), and the protobuf and grpcio wheels it was
# built and tested with (the generated stubs need a protobuf at least as new
# as the protoc that wrote them); and for the kserve part, tritonclient,
# its dependencies the GPU machine lacks, and perf_analyzer; and for the
# attention part, FlashInfer's Python package in .whl/flashinfer (below).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || grep -qx '/.whl/' .gitignore || echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"
rm -rf .whl && mkdir -p .whl
VENV=$(mktemp -d /tmp/kerneld-wheels.XXXXXX)
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip build
"$VENV/bin/python" -m build -q --wheel --outdir .whl client/python >/dev/null
# The protobuf version the stubs need: the wheel's Requires-Dist.
PB=$(unzip -p .whl/kerneld-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: protobuf.*>=\([0-9.]*\).*/\1/p')
"$VENV/bin/python" -m pip install -q "grpcio" "protobuf>=$PB"
PBV=$("$VENV/bin/python" -c 'import google.protobuf as p; print(p.__version__)')
GV=$("$VENV/bin/python" -c 'import grpc; print(grpc.__version__)')
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
"$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" -d .whl "protobuf==$PBV" "grpcio==$GV"
# bench/device_pass.sh's kserve part: tritonclient with its gRPC and CUDA
# shared-memory extras, and perf_analyzer (its binary needs glibc >= 2.38,
# which the GPU machine has). numpy and ml_dtypes stay the GPU machine's own.
"$VENV/bin/python" -m pip download -q --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" --platform manylinux_2_38_x86_64 --platform any -d "$VENV/kserve" \
  "tritonclient[grpc,cuda]" perf-analyzer
find "$VENV/kserve" -name '*.whl' ! -name 'numpy-*' ! -name 'ml_dtypes-*' ! -name 'grpcio-*' \
  ! -name 'protobuf-*' -exec mv {} .whl/ \;
# bench/device_pass.sh's attention part, in .whl/flashinfer (its own folder:
# the python part installs .whl/*.whl): FlashInfer's Python package for
# bench/bench_attention.py, installed with --no-deps. Of its Requires-Dist
# only what `import flashinfer` and the decode / prefill / append / merge
# paths import: apache-tvm-ffi (the range its metadata allows; its JIT
# modules load through it), ninja (the binary its JIT runs) and
# nvidia-ml-py (pynvml, imported by flashinfer.utils). cuda-python,
# cuda-tile, nccl4py, nvidia-cudnn-frontend, nvidia-cutlass-dsl, einops,
# click and tabulate are only imported by other ops or its CLI. The pure
# Python modules in fallback/ are installed only where the GPU machine lacks
# them: torch's own (filelock, jinja2 with markupsafe, typing_extensions,
# which apache-tvm-ffi wants at 4.13 or newer) and what flashinfer imports
# (packaging, tqdm, requests with urllib3, idna, certifi and
# charset_normalizer).
FI=${FLASHINFER_PY_VERSION:-0.6.18.post1}
mkdir -p .whl/flashinfer/fallback
fi_get() {
  "$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" --platform any "$@"
}
fi_get -d .whl/flashinfer "flashinfer-python==$FI"
TVM=$(unzip -p .whl/flashinfer/flashinfer_python-*.whl '*/METADATA' |
  sed -n 's/^Requires-Dist: apache-tvm-ffi\([^;]*\)$/\1/p' | tr -d ' ')
fi_get -d .whl/flashinfer "apache-tvm-ffi$TVM" ninja nvidia-ml-py
fi_get -d .whl/flashinfer/fallback filelock jinja2 markupsafe "typing_extensions>=4.13" packaging tqdm \
  requests urllib3 idna certifi charset_normalizer
rm -rf "$VENV"
ls -la .whl .whl/flashinfer .whl/flashinfer/fallback
du -sh .whl
