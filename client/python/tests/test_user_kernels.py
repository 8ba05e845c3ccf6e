"""User kernels from Python (docs/user-kernels.md) against a CPU daemon with
--allow_user_kernels: register_kernel returns an op method like a built-in's,
list_user_kernels and unregister_kernel, the daemon's refusals as the
package's exception types, and the no-GPU answers of calling the kernel and
of evaluate_kernel; then the same through kerneld.aio.Client. NVRTC compiles
without a GPU; where libnvrtc is missing the tests that compile skip."""
import asyncio
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


# ---- kerneld.aio.Client: the same four methods, as coroutines ----

async def aregister_or_skip(c, *args, **kw):
    try:
        return await c.register_kernel(*args, **kw)
    except kerneld.FailedPrecondition as e:
        if "nvrtc" in e.message.lower():
            pytest.skip("libnvrtc not found on this host: " + e.message)
        raise


@pytest.fixture
def uk_daemon(new_daemon, tmp_path):
    return new_daemon("--allow_user_kernels", "--jit_cache_dir=%s" % (tmp_path / "jit"))


def test_aio_register_call_list_evaluate_unregister(uk_daemon):
    x = np.arange(1000, dtype=np.float32)

    async def main():
        async with kerneld.aio.Client(uk_daemon.target, timeout=120) as c:
            op = await aregister_or_skip(c, SCALE, "my_scale", SPEC)
            assert asyncio.iscoroutinefunction(op) and op.__name__ == "my_scale"
            reg = op.registration
            assert reg["name"] == "my_scale" and reg["owner"]
            assert any(r["function"] == "my_scale" and r["spill_store_bytes"] == 0
                       for r in reg["resources"]), reg
            assert "my_scale" in await c.ops()
            assert c.my_scale.__doc__ and "factor" in str(c.my_scale.__signature__)
            assert (await c.describe("my_scale"))["implementations"][0]["backend"] == "nvrtc"

            # Validated like a built-in; a valid call says why it cannot run here.
            with pytest.raises(kerneld.InvalidArgument, match="factor"):
                await op(x)
            with pytest.raises(kerneld.FailedPrecondition, match="my_scale: no eligible backend"):
                await op(x, factor=2.0)
            with pytest.raises(kerneld.FailedPrecondition, match="my_scale: no eligible backend"):
                await c.my_scale(x, factor=2.0)

            ks = await c.list_user_kernels()
            assert [k["kernel"]["name"] for k in ks] == ["my_scale"]
            assert ks[0]["entry"] == "my_scale" and ks[0]["launch"] == SPEC["launch"]
            assert len(ks[0]["source_sha256"]) == 64

            # One shape (the built-in's first input, looked up) or {input: shape}.
            with pytest.raises(kerneld.FailedPrecondition, match="has none"):
                await c.evaluate_kernel("my_scale", "scale", (4096,), attrs={"factor": 2.0},
                                        iterations=5)
            with pytest.raises(kerneld.FailedPrecondition,
                               match="my_scale runs on a GPU, and this daemon has none"):
                await c.evaluate_kernel("my_scale", "scale", {"x": (4096,)}, attrs={"factor": 2.0})
            with pytest.raises(kerneld.NotFound, match="no_such_op"):
                await c.evaluate_kernel("my_scale", "no_such_op", {"x": (8,)}, attrs={"factor": 2.0})
            with pytest.raises(kerneld.InvalidArgument, match="the inputs differ"):
                await c.evaluate_kernel("my_scale", "rmsnorm", {"x": (8, 8)}, attrs={"factor": 2.0})
            with pytest.raises(kerneld.InvalidArgument, match="not a tuple of ints"):
                await c.evaluate_kernel("my_scale", "scale", {"x": "big"})

            await c.unregister_kernel("my_scale")
            assert "my_scale" not in await c.ops()
            assert await c.list_user_kernels() == []
            with pytest.raises(AttributeError):
                c.my_scale
            with pytest.raises(kerneld.NotFound):
                await c.unregister_kernel("my_scale")
            with pytest.raises(kerneld.NotFound, match="my_scale"):
                await op(x=x, factor=2.0)

            # Registered again after it went: a new method, served again.
            again = await c.register_kernel(SCALE, "my_scale", SPEC)
            assert again.registration["cache_hit"] is True
            with pytest.raises(kerneld.FailedPrecondition, match="no eligible backend"):
                await again(x, factor=2.0)
    asyncio.run(main())


def test_aio_refusals_and_compile_error(uk_daemon):
    spec = (EXAMPLE / "my_silu_and_mul.json").read_text()
    source = (EXAMPLE / "my_silu_and_mul.cu").read_text()

    async def main():
        async with kerneld.aio.Client(uk_daemon.target, timeout=120) as c:
            op = await aregister_or_skip(c, source, None, spec)  # JSON text; entry from the spec
            assert {r["function"] for r in op.registration["resources"]} >= {
                "my_silu_and_mul<float>", "my_silu_and_mul<__half>"}
            with pytest.raises(kerneld.AlreadyExists):
                await c.register_kernel(source, None, spec)
            again = await c.register_kernel(source, None, spec, replace=True)
            assert again.registration["cache_hit"] is True
            with pytest.raises(kerneld.AlreadyExists, match="silu_and_mul"):
                await c.register_kernel(source, "my_silu_and_mul<T>", spec, name="silu_and_mul")
            # The built-in is still the built-in.
            assert (await c.describe("silu_and_mul"))["implementations"][0]["backend"] != "nvrtc"

            broken = source.replace("__expf(-gate)", "__expf(-gate) +* 2")
            with pytest.raises(kerneld.InvalidArgument, match="NVRTC") as e:
                await c.register_kernel(broken, None, spec, name="broken_k")
            assert "user_kernel.cu(" in e.value.message
            assert "broken_k" not in await c.ops()

            with pytest.raises(kerneld.InvalidArgument):
                await c.register_kernel(SCALE, "my_scale", dict(SPEC, launch="grid = ceil(n / 0)"))
            with pytest.raises(kerneld.InvalidArgument, match="spec"):
                await c.register_kernel(SCALE, "my_scale", dict(SPEC, nmae="x"))
            with pytest.raises(kerneld.InvalidArgument, match="not JSON"):
                await c.register_kernel(SCALE, "my_scale", "{name:")
            with pytest.raises(kerneld.InvalidArgument, match="source"):
                await c.register_kernel("", "my_scale", SPEC)
            assert [k["kernel"]["name"] for k in await c.list_user_kernels()] == ["my_silu_and_mul"]
    asyncio.run(main())


def test_aio_off_by_default(daemon):
    async def main():
        async with kerneld.aio.Client(daemon.target, timeout=120) as c:
            with pytest.raises(kerneld.FailedPrecondition, match="--allow_user_kernels"):
                await c.register_kernel(SCALE, "my_scale", SPEC)
            assert await c.list_user_kernels() == []
            assert "my_scale" not in await c.ops()
    asyncio.run(main())


def test_aio_roles_and_visibility_per_principal(new_daemon, tmp_path):
    """Bare --allow_user_kernels: admins only, a `user` token is refused; with
    the default visibility (own) each admin sees only its own kernels, two may
    hold the same name, and all_principals lists everyone's."""
    toks = {"alice": "uk-alice-0123456789abcdef", "adm1": "uk-adm1-0123456789abcdef",
            "adm2": "uk-adm2-0123456789abcdef"}
    f = tmp_path / "tokens"
    f.write_text("%s alice user\n%s adm1 admin\n%s adm2 admin\n" %
                 (toks["alice"], toks["adm1"], toks["adm2"]))
    d = new_daemon("--allow_user_kernels", "--auth_tokens=%s" % f,
                   "--jit_cache_dir=%s" % (tmp_path / "jit"))

    async def main():
        c = {n: kerneld.aio.Client(d.tcp, timeout=120, token=t) for n, t in toks.items()}
        try:
            with pytest.raises(kerneld.PermissionDenied):
                await c["alice"].register_kernel(SCALE, "my_scale", SPEC)
            one = await aregister_or_skip(c["adm1"], SCALE, "my_scale", SPEC)
            assert one.registration["owner"] == "token:adm1"
            assert await c["adm2"].list_user_kernels() == []
            assert "my_scale" not in await c["adm2"].ops()
            assert "my_scale" not in await c["alice"].ops()
            with pytest.raises(kerneld.NotFound):
                await c["adm2"].unregister_kernel("my_scale")
            two = await c["adm2"].register_kernel(SCALE, "my_scale", dict(SPEC, doc="adm2's"))
            assert two.registration["owner"] == "token:adm2"
            mine = await c["adm1"].list_user_kernels()
            assert [(k["kernel"]["name"], k["owner"]) for k in mine] == [("my_scale", "token:adm1")]
            every = await c["adm1"].list_user_kernels(all_principals=True)
            assert sorted(k["owner"] for k in every) == ["token:adm1", "token:adm2"]
            await c["adm2"].unregister_kernel("my_scale")
            assert "my_scale" in await c["adm1"].ops(refresh=True)
            assert [k["owner"] for k in await c["adm1"].list_user_kernels()] == ["token:adm1"]
        finally:
            for x in c.values():
                await x.close()
    asyncio.run(main())
