"""Client(..., lane=True): call() through the same-host lane (docs/lane.md)
against a real daemon on the CPU backend: numpy inline and through shm, call
plans, the same errors as gRPC, deadlines, threads beyond the slots, a
daemon restarted under the client, and no silent fallback to gRPC.

The lane is spoken by libkerneld_native; without it these tests skip
(tests/run.sh runs the suite with and without the library).
"""
import os
import shutil
import tempfile

import numpy as np
import pytest

import kerneld
from kerneld import _lane, _native
from conftest import Daemon, run_in_threads

_lib = _native.load()[0]
needs_lane = pytest.mark.skipif(_lib is None or _lane.declare(_lib) is not None,
                                reason="libkerneld_native with the lane not found (%s)" %
                                (_native.load()[1] or (_lib is not None and _lane.declare(_lib))))


@pytest.fixture(scope="module")
def sockdir():
    # Unix socket paths are short (108 bytes): a folder of our own in /tmp.
    d = tempfile.mkdtemp(prefix="kl-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def lane_daemon(sockdir):
    d = Daemon("--enable_test_ops=true", "--lane_socket=" + os.path.join(sockdir, "lane"),
               "--lane_slots=4", "--metrics_listen=127.0.0.1:0")
    yield d
    d.stop()


@pytest.fixture(scope="module")
def lc(lane_daemon):
    c = kerneld.Client(lane_daemon.target, lane=True, timeout=60)
    yield c
    c.close()


def lane_requests(d):
    return d.metric("kerneld_lane_requests_total", 'transport="lane"')


@needs_lane
def test_calls_go_through_the_lane(lane_daemon, lc, sockdir):
    assert lc.transport == "lane" and lc.lane_error is None
    assert lc.info()["lane_socket"] == "unix:" + os.path.join(sockdir, "lane")
    before = lane_requests(lane_daemon)
    rng = np.random.default_rng(1)
    for dt in (np.float32, np.float16):
        for n in (1, 127, 4097):
            x = rng.standard_normal(n).astype(dt)
            y, info = lc.call("scale", x=x, factor=3.0, return_info=True)
            assert y.dtype == dt and y.shape == x.shape
            np.testing.assert_allclose(y.astype(np.float64), x.astype(np.float64) * 3.0,
                                       rtol=1e-3 if dt == np.float16 else 1e-6)
            assert info["backend"] == "cpu"
    assert lane_requests(lane_daemon) == before + 6
    # The request series say how each came (a `transport` label).
    lane_scale = 'op="scale"', 'code="OK"', 'transport="lane"'
    grpc_scale = 'op="scale"', 'code="OK"', 'transport="grpc"'
    n_lane = lane_daemon.metric("kerneld_requests_total", *lane_scale)
    n_grpc = lane_daemon.metric("kerneld_requests_total", *grpc_scale)
    with kerneld.Client(lane_daemon.target) as g:
        g.scale(x, factor=2.0)
    lc.scale(x, factor=2.0)
    lc.scale(x, factor=2.0)
    assert lane_daemon.metric("kerneld_requests_total", *lane_scale) == n_lane + 2
    assert lane_daemon.metric("kerneld_requests_total", *grpc_scale) == n_grpc + 1


@needs_lane
def test_shm_and_out(lane_daemon, sockdir):
    with kerneld.Client(lane_daemon.target, lane="unix:" + os.path.join(sockdir, "lane"),
                        shm=True) as c:
        assert c.transport == "lane"
        rng = np.random.default_rng(2)
        x = rng.standard_normal(4097).astype(np.float32)
        a, b = x.copy(), rng.standard_normal(4097).astype(np.float32)
        np.testing.assert_allclose(c.scale(x, factor=2.0), x * 2.0, rtol=1e-6)
        y = np.full_like(x, np.nan)
        assert c.scale(x, factor=-1.5, out=y) is y
        np.testing.assert_allclose(y, x * -1.5, rtol=1e-6)
        np.testing.assert_allclose(c.add(a, b), a + b, rtol=1e-6)
        # A registered host buffer: referenced on the lane, written by the daemon.
        with c.register(np.zeros(4097, np.float32)) as h:
            c.scale(x, factor=4.0, out=h)
            np.testing.assert_allclose(h.array, x * 4.0, rtol=1e-6)
        # Inline beside shm on the same client.
        np.testing.assert_allclose(c.scale(x, factor=5.0, via="inline"), x * 5.0, rtol=1e-6)


@needs_lane
def test_repeated_calls_use_plans(lc):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(256).astype(np.float32)
    lc.scale(x, factor=2.0)
    hits = lc._plans.hits
    for _ in range(5):
        x = rng.standard_normal(256).astype(np.float32)
        y = np.full_like(x, np.nan)
        lc.scale(x, factor=2.0, out=y)
        np.testing.assert_allclose(y, x * 2.0, rtol=1e-6)
        np.testing.assert_allclose(lc.scale(x, factor=2.0), x * 2.0, rtol=1e-6)
    assert lc._plans.hits > hits


@needs_lane
def test_errors_are_grpcs(lane_daemon, lc):
    g = kerneld.Client(lane_daemon.target)
    try:
        x = np.ones(8, np.float32)
        for bad in (dict(op="nosuchop", x=x), dict(op="scale", x=x, factor="two"),
                    dict(op="scale", x=np.ones(8, np.int32), factor=2.0),
                    dict(op="add", a=x, b=np.ones(9, np.float32))):
            errs = []
            for c in (lc, g):
                with pytest.raises(kerneld.KerneldError) as e:
                    c.call(**bad)
                errs.append((type(e.value), e.value.code, e.value.message))
            assert errs[0] == errs[1] and errs[0][2], errs
        # Another principal's (or an unknown) buffer id answers like gRPC: NOT_FOUND.
        from kerneld._proto import kerneld_pb2 as pb
        req = pb.ExecuteRequest(op="scale")
        req.inputs["x"].dtype = pb.DTYPE_FLOAT32
        req.inputs["x"].shape.append(4)
        req.inputs["x"].buffer.buffer_id = "shm-987654"
        req.attrs["factor"].f = 2.0
        with pytest.raises(kerneld.NotFound):
            lc._native.execute(req)
        # The lane still serves after errors.
        np.testing.assert_array_equal(lc.scale(x, factor=2.0), x * 2)
    finally:
        g.close()


@needs_lane
def test_a_request_larger_than_a_slot_says_so(new_daemon, sockdir):
    path = os.path.join(sockdir, "small")
    d = new_daemon("--lane_socket=" + path, "--lane_slot_kb=4")
    with kerneld.Client(d.target, lane=True) as c:
        with pytest.raises(kerneld.ResourceExhausted, match="larger than the lane's slots"):
            c.scale(np.ones(4096, np.float32), factor=2.0)
        # Through shm it is a reference, and fits.
        x = np.arange(4096, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0, via="shm"), x * 2)


@needs_lane
def test_deadline_then_the_slot_is_reused(lane_daemon):
    with kerneld.Client(lane_daemon.target, lane=True) as c:
        x = np.ones(4, np.float32)
        with pytest.raises(kerneld.DeadlineExceeded):
            c.call("_test_sleep", x=x, ms=600.0, timeout=0.1)
        # Every slot keeps working (the abandoned one once its answer came).
        for _ in range(3 * c._native.slots()):
            np.testing.assert_array_equal(c.call("_test_sleep", x=x, ms=0.0), x)


@needs_lane
def test_more_threads_than_slots(lc):
    assert lc._native.slots() == 4

    def work(t):
        rng = np.random.default_rng(100 + t)
        for _ in range(50):
            x = rng.standard_normal(int(rng.integers(1, 2000))).astype(np.float32)
            f = float(rng.integers(1, 9))
            np.testing.assert_allclose(lc.scale(x, factor=f), x * f, rtol=1e-6)
    run_in_threads(work, 12)


@needs_lane
def test_no_lane_is_an_error_not_a_fallback(daemon, sockdir):
    # The session daemon runs without --lane_socket.
    with pytest.raises(kerneld.Unavailable, match="serves no lane"):
        kerneld.Client(daemon.target, lane=True)
    with pytest.raises(kerneld.Unavailable, match="no kerneld lane at"):
        kerneld.Client(daemon.target, lane=os.path.join(sockdir, "nothing-here"))
    with pytest.raises(kerneld.InvalidArgument, match="lane=3"):
        kerneld.Client(daemon.target, lane=3)
    # gRPC on TCP is another principal than the lane's uid: said at once.
    with pytest.raises(kerneld.InvalidArgument, match="unix socket"):
        kerneld.Client(daemon.tcp, lane=True)


@needs_lane
def test_fallback_is_explicit(daemon):
    with kerneld.Client(daemon.target, lane=True, lane_fallback=True) as c:
        assert c.transport == "grpc"
        assert isinstance(c.lane_error, kerneld.Unavailable)
        assert "serves no lane" in c.lane_error.message
        x = np.arange(5, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
    with kerneld.Client(daemon.target) as c:
        assert c.transport == "grpc" and c.lane_error is None


@needs_lane
def test_a_restarted_daemon_gets_the_next_call(sockdir):
    """A daemon that went away: the call finds its lane gone and, the request
    never taken, sends it on a new lane to the daemon now there."""
    path = os.path.join(sockdir, "restart")
    d = Daemon("--lane_socket=" + path)
    try:
        c = kerneld.Client(d.target, lane=path)
        x = np.arange(7, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        d.stop()
        d = Daemon("--lane_socket=" + path)
        np.testing.assert_array_equal(c.scale(x, factor=3.0), x * 3)
        d.stop()
        with pytest.raises(kerneld.Unavailable):
            c.scale(x, factor=2.0)  # nobody there: no new lane either
        d = Daemon("--lane_socket=" + path)
        np.testing.assert_array_equal(c.scale(x, factor=4.0), x * 4)
        c.close()
        with pytest.raises(kerneld.Cancelled):
            c.scale(x, factor=2.0)
    finally:
        d.stop()


@needs_lane
def test_token_principal(new_daemon, sockdir):
    tokens = os.path.join(sockdir, "tokens")
    with open(tokens, "w") as f:
        f.write("lane-token-0123456789abcdef alice user\n")
    path = os.path.join(sockdir, "tok")
    d = new_daemon("--lane_socket=" + path, "--auth_tokens=" + tokens)
    with kerneld.Client(d.tcp, token="lane-token-0123456789abcdef", lane=path) as c:
        x = np.arange(3, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
    with pytest.raises(kerneld.Unauthenticated):
        kerneld.Client(d.target, token="wrong-token-0123456789abcdef", lane=path)


def test_no_library_is_an_error_unless_fallback(daemon, monkeypatch):
    """Runs with and without the library: the lane needs it, and says so."""
    monkeypatch.setenv("KERNELD_NATIVE_LIB", "off")
    with pytest.raises(kerneld.InvalidArgument, match="needs libkerneld_native"):
        kerneld.Client(daemon.target, lane=True)
    with kerneld.Client(daemon.target, lane=True, lane_fallback=True) as c:
        assert c.transport == "grpc" and isinstance(c.lane_error, kerneld.InvalidArgument)
        x = np.arange(4, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
