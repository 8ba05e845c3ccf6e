"""User kernels from Python (docs/user-kernels.md) against a CPU daemon with
--allow_user_kernels: register_kernel returns an op method like a built-in's,
list_user_kernels and unregister_kernel, the daemon's refusals as the
package's exception types, and the no-GPU answers of calling the kernel and
of evaluate_kernel. NVRTC compiles without a GPU; where libnvrtc is missing
the tests that compile skip."""
from pathlib import Path

import numpy as np
import pytest

import kerneld

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "user_kernels"

SCALE = r'''
extern "C" __global__ void my_scale(const float* __restrict__ x, float* __restrict__ y,
                                    long long n, float factor) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * factor;
}
'''
SPEC = {
    "name": "my_scale",
    "inputs": [{"name": "x", "dtypes": ["float32"], "shape": "[n]"}],
    "outputs": [{"name": "y", "shape": "same as 'x'"}],
    "attrs": [{"name": "factor", "type": "float", "required": True}],
    "launch": "grid = ceil(n / 256), block = 256",
    "doc": "y = x * factor (a user kernel)",
}


@pytest.fixture
def uk(new_daemon, tmp_path):
    d = new_daemon("--allow_user_kernels", "--jit_cache_dir=%s" % (tmp_path / "jit"))
    c = kerneld.Client(d.target, timeout=120)
    yield c
    c.close()


def register_or_skip(c, *args, **kw):
    try:
        return c.register_kernel(*args, **kw)
    except kerneld.FailedPrecondition as e:
        if "nvrtc" in e.message.lower():
            pytest.skip("libnvrtc not found on this host: " + e.message)
        raise


def test_register_call_list_evaluate_unregister(uk):
    op = register_or_skip(uk, SCALE, "my_scale", SPEC)
    assert op.__name__ == "my_scale"
    reg = op.registration
    assert reg["name"] == "my_scale" and reg["owner"]
    assert any(r["function"] == "my_scale" and r["spill_store_bytes"] == 0
               for r in reg["resources"]), reg
    assert "my_scale" in uk.ops()
    assert uk.my_scale.__doc__ and "factor" in str(uk.my_scale.__signature__)
    assert uk.describe("my_scale")["implementations"][0]["backend"] == "nvrtc"

    # The schema is checked like a built-in's; a valid call says why it cannot run here.
    x = np.arange(1000, dtype=np.float32)
    with pytest.raises(kerneld.InvalidArgument, match="factor"):
        op(x)
    with pytest.raises(kerneld.FailedPrecondition, match="my_scale: no eligible backend"):
        op(x, factor=2.0)

    ks = uk.list_user_kernels()
    assert [k["kernel"]["name"] for k in ks] == ["my_scale"]
    assert ks[0]["entry"] == "my_scale" and ks[0]["launch"] == SPEC["launch"]
    assert len(ks[0]["source_sha256"]) == 64

    # evaluate_kernel: checked on the host, then FailedPrecondition without a GPU.
    with pytest.raises(kerneld.FailedPrecondition, match="my_scale runs on a GPU, and this daemon has none"):
        uk.evaluate_kernel("my_scale", "scale", {"x": (4096,)}, attrs={"factor": 2.0})
    with pytest.raises(kerneld.FailedPrecondition, match="has none"):
        uk.evaluate_kernel("my_scale", "scale", (4096,), attrs={"factor": 2.0}, iterations=5)
    with pytest.raises(kerneld.NotFound, match="no_such_op"):
        uk.evaluate_kernel("my_scale", "no_such_op", {"x": (8,)}, attrs={"factor": 2.0})
    with pytest.raises(kerneld.InvalidArgument, match="the inputs differ"):
        uk.evaluate_kernel("my_scale", "rmsnorm", {"x": (8, 8)}, attrs={"factor": 2.0})
    with pytest.raises(kerneld.InvalidArgument, match="not a tuple of ints"):
        uk.evaluate_kernel("my_scale", "scale", {"x": "big"})
    with pytest.raises(kerneld.NotFound):
        uk.evaluate_kernel("nope", "scale", {"x": (8,)})

    uk.unregister_kernel("my_scale")
    assert "my_scale" not in uk.ops()
    assert uk.list_user_kernels() == []
    with pytest.raises(AttributeError):
        uk.my_scale
    with pytest.raises(kerneld.NotFound):
        uk.unregister_kernel("my_scale")
    with pytest.raises(kerneld.NotFound, match="my_scale"):  # by name: no schema to place x
        op(x=x, factor=2.0)


def test_example_spec_and_refusals(uk):
    spec = (EXAMPLE / "my_silu_and_mul.json").read_text()
    source = (EXAMPLE / "my_silu_and_mul.cu").read_text()
    op = register_or_skip(uk, source, None, spec)  # JSON text; entry from the spec
    assert {r["function"] for r in op.registration["resources"]} >= {
        "my_silu_and_mul<float>", "my_silu_and_mul<__half>", "my_silu_and_mul<__nv_bfloat16>"}

    # Taken names: your own without replace=, and a built-in's.
    with pytest.raises(kerneld.AlreadyExists):
        uk.register_kernel(source, None, spec)
    again = uk.register_kernel(source, None, spec, replace=True)
    assert again.registration["cache_hit"] is True
    with pytest.raises(kerneld.AlreadyExists, match="silu_and_mul"):
        uk.register_kernel(source, "my_silu_and_mul<T>", spec, name="silu_and_mul")

    # A compile error carries NVRTC's log.
    broken = source.replace("__expf(-gate)", "__expf(-gate) +* 2")
    with pytest.raises(kerneld.InvalidArgument, match="NVRTC") as e:
        uk.register_kernel(broken, None, spec, name="broken_k")
    assert "user_kernel.cu(" in e.value.message
    assert isinstance(e.value, ValueError)
    # A bad spec: the daemon's field name, or the client's parse.
    bad = dict(SPEC, launch="grid = ceil(n / 0)")
    with pytest.raises(kerneld.InvalidArgument):
        uk.register_kernel(SCALE, "my_scale", bad)
    with pytest.raises(kerneld.InvalidArgument, match="spec"):
        uk.register_kernel(SCALE, "my_scale", dict(SPEC, nmae="x"))
    with pytest.raises(kerneld.InvalidArgument, match="not JSON"):
        uk.register_kernel(SCALE, "my_scale", "{name:")
    with pytest.raises(kerneld.InvalidArgument, match="source"):
        uk.register_kernel("", "my_scale", SPEC)
    assert [k["kernel"]["name"] for k in uk.list_user_kernels()] == ["my_silu_and_mul"]


def test_off_by_default(client):
    with pytest.raises(kerneld.FailedPrecondition, match="--allow_user_kernels"):
        client.register_kernel(SCALE, "my_scale", SPEC)
    assert client.list_user_kernels() == []
