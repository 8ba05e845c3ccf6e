#!/usr/bin/env bash
# The Python client on the GPU machine: bench/device_pass.sh's python part
# (the wheels in .whl from tests/gpu_wheels.sh, the `gpu` tests against the
# bundle's CUDA daemon, bench_scale.py and profile_ipc.py; its --help says
# more). Needs the bundle (scripts/device_bundle). Logs under $OUT.
cd "$(dirname "$0")/../../.." || exit 2
exec bench/device_pass.sh python
