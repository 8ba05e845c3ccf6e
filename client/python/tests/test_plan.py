"""Call plans (kerneld/_plan.py): a repeated native call sends the bytes of an
earlier one. Every op, at tail sizes, gives its float64 reference on the
plan's path; the plan's request is the generic path's; anything that changes
the request (an attr value, a dtype, contiguity, the schemas) makes a new
plan or takes the generic path; errors and deadlines are the same.
Against the real daemon; skipped without libkerneld_native."""

import numpy as np
import pytest

import kerneld
from kerneld import _native, _plan
from kerneld._core import Prepared
from kerneld._proto import kerneld_pb2 as pb
from reference import CASES, FLOAT32_ONLY
from test_ops import run, DTYPES
from conftest import run_in_threads

pytestmark = pytest.mark.skipif(_native.load()[0] is None,
                                reason="libkerneld_native not found (%s)" % _native.load()[1])

NATIVE = ["native", "native_unary"]


@pytest.fixture(scope="module", params=NATIVE)
def pclient(daemon, request):
    c = kerneld.Client(daemon.target, timeout=120, rpc=request.param)
    yield c
    c.close()


@pytest.mark.parametrize("mode", ["plain", "out", "inplace"])
@pytest.mark.parametrize("n", [1, 127, 4097])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_every_op_again_on_its_plan(pclient, op, dt, n, mode):
    """The second call of a shape, with new data in new arrays, is served by
    the first's plan and still matches the float64 reference (run() checks
    it; poisoned out= arrays; in-place ops write the caller's arrays)."""
    if op in FLOAT32_ONLY and dt != "float32":
        pytest.skip("%s takes float32 only" % op)
    run(pclient, op, n, dt, "inline", mode, seed=0)
    hits = pclient._plans.hits
    run(pclient, op, n, dt, "inline", mode, seed=1000)
    assert pclient._plans.hits > hits, "the repeated call did not use its plan"


@pytest.mark.parametrize("op", sorted(CASES))
def test_plan_request_is_the_generic_request(pclient, op):
    rng = np.random.default_rng(7)
    inputs, attrs, _ = CASES[op](127, "float32", rng)
    kw = dict(inputs, **attrs)
    pclient.call(op, **dict(kw))
    k, objs, _, _ = _plan.key(pclient, op, (), dict(kw))
    plan = pclient._plans.get(k, pclient._schemas[op])
    assert isinstance(plan, _plan.Plan)
    inputs2, _, _ = CASES[op](127, "float32", np.random.default_rng(8))
    kw2 = dict(inputs2, **attrs)
    k2, objs2, _, _ = _plan.key(pclient, op, (), dict(kw2))
    assert k2 == k
    want = Prepared(pclient, op, (), dict(kw2)).req
    got = pb.ExecuteRequest.FromString(plan.request_bytes(objs2))
    assert got == want


def test_an_attr_value_or_dtype_makes_a_new_plan(pclient):
    x = np.arange(1, 130, dtype=np.float32)
    for f in (2.0, 3.0, 2.0, 3.0, 0.5):
        np.testing.assert_array_equal(pclient.scale(x, factor=f), x * np.float32(f))
    np.testing.assert_array_equal(pclient.scale(x, factor=2), x * 2)  # an int attr: its own key
    h = x.astype(np.float16)
    np.testing.assert_array_equal(pclient.scale(h, factor=2.0), h * np.float16(2))
    assert pclient.scale(h, factor=2.0).dtype == np.float16


def test_signed_zero_and_nan_attrs_have_keys_of_their_own(pclient):
    """-0.0 == 0.0 as values: a plan made with factor=0.0 must not serve
    factor=-0.0 (the zeros' signs differ); NaN != NaN: a NaN attr must not
    make a new plan on every call."""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for f in (0.0, -0.0, 0.0, -0.0):
        y = pclient.scale(x, factor=f)
        np.testing.assert_array_equal(np.signbit(y), np.signbit(x * np.float32(f)))
    n = len(pclient._plans)
    for _ in range(5):
        assert np.isnan(pclient.scale(x, factor=float("nan"))).all()
    assert len(pclient._plans) <= n + 1


def test_a_plan_does_not_pass_a_tensor_the_generic_path_refuses(pclient):
    x = np.ones((8, 8), np.float32)
    pclient.scale(x, factor=2.0)
    pclient.scale(x, factor=2.0)  # planned
    with pytest.raises(ValueError, match="not contiguous"):
        pclient.scale(x.T, factor=2.0)
    with pytest.raises(ValueError, match="dtype float64 not in"):
        pclient.scale(x.astype(np.float64), factor=2.0)
    with pytest.raises(TypeError, match="given twice"):
        pclient.call("scale", x, x=x, factor=2.0)


def test_return_info_and_timeout_on_a_plan(pclient):
    x = np.ones(64, np.float32)
    for _ in range(3):
        y, info = pclient.scale(x, factor=4.0, return_info=True, timeout=30)
        np.testing.assert_array_equal(y, x * 4)
        assert info["backend"] and info["total_ns"] > 0
    for _ in range(2):
        assert isinstance(pclient.scale(x, factor=4.0), np.ndarray)  # no info: another key


@pytest.mark.parametrize("rpc", NATIVE)
def test_errors_and_deadlines_on_a_plan(new_daemon, rpc):
    d = new_daemon("--enable_test_ops=true")
    c = kerneld.Client(d.target, timeout=30, rpc=rpc)
    x = np.ones(4, np.float32)
    c.call("_test_sleep", x=x, ms=800.0)
    c.call("_test_sleep", x=x, ms=800.0)  # planned
    hits = c._plans.hits
    c.timeout = 0.1  # a plan reads the client's timeout when it runs
    with pytest.raises(kerneld.DeadlineExceeded):
        c.call("_test_sleep", x=x, ms=800.0)
    assert c._plans.hits == hits  # raised: not counted, but it was the plan's call
    c.timeout = 30
    for _ in range(2):
        np.testing.assert_array_equal(c.scale(x, factor=5.0), x * 5)  # the client still works
    hits = c._plans.hits
    d.stop()  # a planned call to a daemon that is gone raises, as the generic one does
    with pytest.raises(kerneld.Unavailable):
        c.scale(x, factor=5.0)
    c.close()


def test_reloaded_schemas_make_plans_again(pclient):
    x = np.ones(16, np.float32)
    pclient.scale(x, factor=2.0)
    pclient.scale(x, factor=2.0)
    hits = pclient._plans.hits
    pclient.ops(refresh=True)
    np.testing.assert_array_equal(pclient.scale(x, factor=2.0), x * 2)
    assert pclient._plans.hits == hits  # the old schema's plan was not used
    pclient.scale(x, factor=2.0)
    assert pclient._plans.hits == hits + 1


def test_plans_are_bounded(daemon):
    c = kerneld.Client(daemon.target, rpc="native")
    x = np.ones(4, np.float32)
    for i in range(_plan.MAX_PLANS + 40):
        np.testing.assert_array_equal(c.scale(x, factor=float(i)), x * i)
    assert len(c._plans) == _plan.MAX_PLANS
    c.close()


def test_kinds_a_plan_does_not_take_go_the_generic_way(daemon):
    c = kerneld.Client(daemon.target, rpc="native")
    x = np.arange(32, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(c.scale(list(x), factor=2.0), x * 2)  # a list
        np.testing.assert_array_equal(c.scale(x, factor=2.0, via="shm"), x * 2)
        with c.register(x.copy()) as h:
            np.testing.assert_array_equal(c.scale(h, factor=2.0), x * 2)
    assert c._plans.hits == 0
    c.close()
    s = kerneld.Client(daemon.target, rpc="native", shm=True)
    for _ in range(2):
        np.testing.assert_array_equal(s.scale(x, factor=2.0), x * 2)
    assert s._plans.hits == 0
    s.close()


def test_threads_share_plans(daemon):
    c = kerneld.Client(daemon.target, rpc="native")

    def work(t):
        rng = np.random.default_rng(t)
        for i in range(150):
            x = rng.standard_normal(257).astype(np.float32)
            f = float(i % 3 + 1)
            np.testing.assert_array_equal(c.scale(x, factor=f), x * np.float32(f))
    run_in_threads(work)
    assert c._plans.hits > 8 * 140
    c.close()


def test_wire_encoding_of_an_inline_entry():
    """inline_prefix + data is what protobuf writes, at lengths that need one,
    two and three varint bytes."""
    for n in (0, 1, 127, 128, 300, 20000):
        data = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
        want = pb.ExecuteRequest()
        t = want.inputs["x" * (n % 200 + 1)]
        t.dtype, t.inline_data = pb.DTYPE_UINT8, data
        t.shape.extend([n])
        got = _plan.inline_prefix(2, "x" * (n % 200 + 1), pb.DTYPE_UINT8, (n,), n) + data
        assert pb.ExecuteRequest.FromString(got) == want
