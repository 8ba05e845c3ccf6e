"""GPU tests of Client(..., lane=True) (marker gpu): torch and cupy tensors over
CUDA IPC through the same-host lane, with out= and without, bit for bit
against the same calls over gRPC on the same daemon.

Skipped where torch sees no GPU, the daemon has no cuda backend, or
libkerneld_native (which speaks the lane) is not found.
"""
import os
import shutil
import tempfile

import numpy as np
import pytest

import kerneld
from kerneld import _lane, _native
from conftest import Daemon

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no GPU", allow_module_level=True)
_lib = _native.load()[0]
if _lib is None or _lane.declare(_lib) is not None:
    pytest.skip("libkerneld_native with the lane not found", allow_module_level=True)

TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def gpu_lane():
    d0 = tempfile.mkdtemp(prefix="kl-")
    d = Daemon("--lane_socket=" + os.path.join(d0, "lane"), "--metrics_listen=127.0.0.1:0")
    lane = kerneld.Client(d.target, lane=True, timeout=120)
    grpc = kerneld.Client(d.target, timeout=120)
    try:
        if "cuda" not in grpc.info()["backends"]:
            pytest.skip("the daemon has no cuda backend: %s" % grpc.info()["cuda_status"])
        yield d, lane, grpc
    finally:
        lane.close()
        grpc.close()
        d.stop()
        shutil.rmtree(d0, ignore_errors=True)


@pytest.mark.parametrize("n", [1, 127, 4096, 4097])
@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_torch_ipc_out_on_the_lane(gpu_lane, dt, n):
    d, lane, grpc = gpu_lane
    assert lane.transport == "lane"
    before = d.metric("kerneld_lane_requests_total", 'transport="lane"', 'code="OK"')
    x = torch.randn(n, device="cuda").to(TORCH_DT[dt])
    y = torch.full_like(x, float("nan"))
    want = torch.full_like(x, float("nan"))
    hits = lane._plans.hits
    for rep in range(3):  # the third is a plan's (_plan.py)
        x.copy_(torch.randn(n, device="cuda").to(TORCH_DT[dt]))
        r, info = lane.call("scale", x=x, factor=2.5, out=y, return_info=True)
        assert r is y and info["device"].startswith("cuda"), info
        grpc.scale(x, factor=2.5, out=want)
        torch.cuda.synchronize()
        assert torch.equal(y, want), (dt, n, rep)
        np.testing.assert_allclose(y.float().cpu().numpy(), (x.double() * 2.5).cpu().numpy(),
                                   rtol=1e-2 if dt == "bfloat16" else 1e-3)
    assert lane._plans.hits > hits, "the repeated call did not use its plan"
    # Outputs the client allocates, in place, and an op with two inputs.
    z = lane.scale(x, factor=-1.0)
    assert z.is_cuda and torch.equal(z, -x)
    b = torch.randn(n, device="cuda").to(TORCH_DT[dt])
    assert torch.equal(lane.add(x, b), grpc.add(x, b))
    after = d.metric("kerneld_lane_requests_total", 'transport="lane"', 'code="OK"')
    assert after >= before + 5


def test_cupy_ipc_on_the_lane(gpu_lane):
    cp = pytest.importorskip("cupy")
    _, lane, grpc = gpu_lane
    x = cp.random.standard_normal(4097, dtype=cp.float32)
    y = cp.full_like(x, cp.nan)
    assert lane.scale(x, factor=3.0, out=y) is y
    want = grpc.scale(x, factor=3.0)
    assert bool((y == want).all())


def test_a_registered_handle_on_the_lane(gpu_lane):
    _, lane, grpc = gpu_lane
    x = torch.randn(4096, device="cuda").half()
    with lane.register(torch.zeros(4096, device="cuda").half()) as h:
        lane.scale(x, factor=2.0, out=h)
        torch.cuda.synchronize()
        assert torch.equal(h.tensor, grpc.scale(x, factor=2.0))
