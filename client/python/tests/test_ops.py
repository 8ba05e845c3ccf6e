"""Every op against its float64 reference, inline and through shm, plain, with out= and in place."""
import numpy as np
import pytest

from reference import CASES, REFS, TOL, FLOAT32_ONLY, f64, np_dtype, SUPPORT

SIZES = [1, 127, 4097]
DTYPES = ["float32", "float16", "bfloat16"]
OPS = sorted(CASES)


def check(op, got, want, dtype_name):
    rtol, atol = TOL.get(dtype_name, (0, 0))
    g = f64(got)
    assert g.shape == want.shape, "%s: shape %s, expected %s" % (op, g.shape, want.shape)
    np.testing.assert_allclose(g, want, rtol=rtol, atol=atol, err_msg=op)


def run(client, op, n, dt, via, mode, seed=0):
    rng = np.random.default_rng(seed + n)
    inputs, attrs, out_dtypes = CASES[op](n, dt, rng)
    schema = client.describe(op)
    outs = [o["name"] for o in schema["outputs"]]
    in_place = {o["name"]: o["in_place_of"] for o in schema["outputs"] if o["in_place_of"]}
    alias = {o["name"]: o["may_alias"] for o in schema["outputs"] if o["may_alias"]}
    originals = {k: v.copy() for k, v in inputs.items()}
    kw = dict(inputs, **attrs)
    if op in SUPPORT:
        got = client.call(op, via=via, **kw)
        allowed = SUPPORT[op](f64(inputs["probs"]), attrs)
        assert got.dtype == np.int32 and got.shape == (3,)
        for b, s in enumerate(got):
            assert int(s) in allowed[b], "row %d sampled %d outside %s" % (b, s, sorted(allowed[b])[:10])
        again = client.call(op, via=via, **kw)
        np.testing.assert_array_equal(got, again)  # same seed, same samples
        return
    want = REFS[op]({k: f64(v) for k, v in originals.items()}, attrs)
    if mode == "out":
        if in_place:
            pytest.skip("%s writes in place; out= does not apply" % op)
        out = tuple(np.full(want[o].shape, np.nan, np_dtype(out_dtypes[o])) for o in outs)
        res = client.call(op, out=out if len(out) > 1 else out[0], via=via, **kw)
        res = res if isinstance(res, tuple) else (res,)
        for o, r, buf in zip(outs, res, out):
            assert r is buf, "%s: out= is what comes back" % op
    elif mode == "inplace":
        if in_place:
            res = client.call(op, via=via, **kw)
            res = res if isinstance(res, tuple) else (res,)
            for o, r in zip(outs, res):
                assert r is inputs[in_place[o]], "%s: output '%s' is the input array" % (op, o)
        elif alias:
            o, src = next(iter(alias.items()))
            r = client.call(op, out=inputs[src], via=via, **kw)
            assert r is inputs[src]
            res = (r,)
        else:
            pytest.skip("%s has no output that may alias an input" % op)
    else:
        res = client.call(op, via=via, **kw)
        res = res if isinstance(res, tuple) else (res,)
        if in_place:
            for o, r in zip(outs, res):
                assert r is inputs[in_place[o]]
    for o, r in zip(outs, res):
        assert r.dtype == np_dtype(out_dtypes[o]), "%s: output '%s' dtype %s" % (op, o, r.dtype)
        check(op, r, want[o], out_dtypes[o])


@pytest.mark.parametrize("mode", ["plain", "out", "inplace"])
@pytest.mark.parametrize("via", ["inline", "shm"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_op(client, op, dt, n, via, mode):
    if op in FLOAT32_ONLY and dt != "float32":
        pytest.skip("%s takes float32 only" % op)
    run(client, op, n, dt, via, mode)


def test_every_op_has_a_reference(client):
    # Ops without a case here are checked from their schemas against the
    # CPU backend (test_every_op.py); every case names an op served.
    served = {o for o in client.ops() if not o.startswith("_")}
    stale = set(CASES) - served
    assert not stale, "cases in reference.py for ops not served: %s" % sorted(stale)


def test_rmsnorm_positional_and_by_name(client):
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    w = np.ones(64, np.float32)
    a = client.rmsnorm(x, w, eps=1e-6)
    b = client.call("rmsnorm", x=x, weight=w, eps=1e-6)
    np.testing.assert_array_equal(a, b)


def test_return_info(client):
    x = np.ones(16, np.float16)
    y, info = client.call("scale", x=x, factor=2.0, return_info=True)
    assert (y == 2).all()
    assert info["backend"] == "cpu" and info["device"] == "cpu"
    assert info["total_ns"] >= info["execute_ns"] > 0


def test_backend_and_device(client):
    x = np.ones(8, np.float32)
    y, info = client.call("scale", x=x, factor=3.0, backend="cpu", device="cpu", return_info=True)
    assert (y == 3).all() and info["backend"] == "cpu"


def test_torch_cpu_in_torch_out(client):
    torch = pytest.importorskip("torch")
    x = torch.randn(33, dtype=torch.bfloat16)
    y = client.scale(x, factor=2.0)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16
    assert torch.equal(y, x * 2)


def test_zero_size(client):
    y = client.scale(np.zeros((0, 4), np.float32), factor=2.0)
    assert y.shape == (0, 4)
    y = client.scale(np.zeros((0, 4), np.float32), factor=2.0, via="shm")
    assert y.shape == (0, 4)


@pytest.mark.parametrize("via", ["inline", "shm"])
def test_64_mib(client, via):
    n = (64 << 20) // 4
    x = np.arange(n, dtype=np.float32)
    y = client.scale(x, factor=2.0, via=via)
    assert y.nbytes == 64 << 20
    assert y[0] == 0 and y[-1] == 2.0 * (n - 1) and y[n // 2] == n
    out = np.empty_like(x)
    assert client.scale(x, factor=0.5, out=out, via=via) is out
    assert out[-1] == 0.5 * (n - 1)
