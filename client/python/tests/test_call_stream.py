"""call() over the client's persistent ExecuteStream (rpc="stream", the default)
against rpc="unary": threads, errors mid-stream, a daemon restart, deadlines."""
import socket
import threading
import time

import grpc
import numpy as np
import pytest

import kerneld
from conftest import Daemon, run_in_threads


def _conn(c):
    return c._calls._conn


def test_default_is_native_else_stream_and_unary_is_an_option(daemon):
    with kerneld.Client(daemon.target) as c:
        # native where libkerneld_native loads (KERNELD_NATIVE_LIB; run.sh runs
        # the suite both ways), the stream otherwise
        assert c.rpc == ("native" if kerneld._native.load()[0] is not None else "stream")
    with kerneld.Client(daemon.target, rpc="stream") as c:
        x = np.arange(16, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        assert _conn(c) is not None and not _conn(c).dead
    with kerneld.Client(daemon.target, rpc="unary") as u:
        assert u._calls is None
        np.testing.assert_array_equal(u.scale(x, factor=2.0), x * 2)
    with pytest.raises(ValueError, match="rpc='bidi'"):
        kerneld.Client(daemon.target, rpc="bidi")


def test_threads_share_one_stream(daemon):
    c = kerneld.Client(daemon.target, timeout=60, rpc="stream")
    c.ops()
    c.scale(np.ones(4, np.float32), factor=1.0)
    first = _conn(c)

    def work(t):
        rng = np.random.default_rng(t)
        for i in range(60):
            x = rng.standard_normal(int(rng.integers(1, 3000))).astype(np.float32)
            via = "shm" if i % 3 == 0 else "inline"
            y = c.scale(x, factor=float(t + 1), via=via)
            np.testing.assert_allclose(y, x * (t + 1), rtol=1e-6)
    run_in_threads(work)
    assert _conn(c) is first and not first.pending  # every response matched, one stream
    c.close()


@pytest.mark.parametrize("rpc", ["stream", "unary"])
def test_error_mid_stream_same_as_unary(daemon, rpc):
    c = kerneld.Client(daemon.target, rpc=rpc, timeout=60)
    x = np.ones(8, np.float32)
    np.testing.assert_array_equal(c.scale(x, factor=3.0), x * 3)
    conn = _conn(c) if rpc == "stream" else None
    with pytest.raises(kerneld.InvalidArgument) as e:
        c.scale(x)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == "scale: missing required attr 'factor' (float)"
    with pytest.raises(kerneld.NotFound) as e:
        c.call("nope", x=x)
    assert e.value.message.startswith("unknown op 'nope'; this server has {")
    with pytest.raises(kerneld.InvalidArgument, match="output 'y'"):
        c.scale(x, factor=1.0, out=np.ones(8, np.float16), via="shm")
    # the stream goes on
    np.testing.assert_array_equal(c.scale(x, factor=2.0, via="shm"), x * 2)
    if rpc == "stream":
        assert _conn(c) is conn
    c.close()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_daemon_restart_reopens_the_stream():
    port = _free_port()
    d = Daemon("--enable_test_ops=true", "--metrics_listen=127.0.0.1:0",
               listen="127.0.0.1:%d" % port)
    c = kerneld.Client("127.0.0.1:%d" % port, timeout=30, rpc="stream")
    x = np.arange(32, dtype=np.float32)
    try:
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        before = _conn(c)
        # a call in flight when the daemon dies fails with the stream's status
        got = []

        def sleeper():
            try:
                c.call("_test_sleep", x=np.ones(1, np.float32), ms=3000.0)
                got.append(None)
            except kerneld.KerneldError as e:
                got.append(e)
        t = threading.Thread(target=sleeper)
        t.start()
        d.wait_running(1)  # in flight when the daemon dies
        d.stop()
        t.join(10)
        assert got and isinstance(got[0], kerneld.Unavailable), got
        assert before.dead
        with pytest.raises(kerneld.Unavailable):
            c.scale(x, factor=2.0)  # nobody there
        d = Daemon("--enable_test_ops=true", listen="127.0.0.1:%d" % port)
        deadline = time.time() + 20
        while True:
            try:
                y = c.scale(x, factor=4.0)
                break
            except kerneld.Unavailable:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        np.testing.assert_array_equal(y, x * 4)
        assert _conn(c) is not before and not _conn(c).dead
    finally:
        c.close()
        d.stop()


def test_deadline_exceeded_on_the_stream(daemon):
    c = kerneld.Client(daemon.target, rpc="stream")
    c.ops()
    x = np.ones(4, np.float32)
    c.scale(x, factor=1.0)
    conn = _conn(c)
    t0 = time.monotonic()
    with pytest.raises(kerneld.DeadlineExceeded) as e:
        c.call("_test_sleep", x=x, ms=800.0, timeout=0.1)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - t0 < 0.6
    # the stream survives; the abandoned request finishes in the daemon
    np.testing.assert_array_equal(c.scale(x, factor=5.0, timeout=30), x * 5)
    assert _conn(c) is conn
    # a client-wide timeout= applies the same way
    c2 = kerneld.Client(daemon.target, timeout=0.1, rpc="stream")
    with pytest.raises(kerneld.DeadlineExceeded):
        c2.call("_test_sleep", x=x, ms=800.0)
    c2.close()
    c.close()


def test_abandoned_shm_segment_returns_after_its_response(daemon):
    c = kerneld.Client(daemon.target, shm=True, rpc="stream")
    c.ops()
    x = np.ones(1024, np.float32)
    np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
    pool = c._shm_pool
    assert len(pool._free) == 1
    with pytest.raises(kerneld.DeadlineExceeded):
        c.call("_test_sleep", x=x, ms=700.0, timeout=0.1)
    assert len(pool._free) == 0  # the daemon may still write into it
    y = c.scale(x, factor=3.0)  # takes a second segment
    np.testing.assert_array_equal(y, x * 3)
    assert len(pool.segments()) == 2
    deadline = time.time() + 10
    while len(pool._free) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(pool._free) == 2
    c.close()


def test_close_fails_nothing_pending_and_refuses_later_calls(daemon):
    c = kerneld.Client(daemon.target)
    c.scale(np.ones(2, np.float32), factor=1.0)
    c.close()
    with pytest.raises((kerneld.KerneldError, RuntimeError)):
        c.scale(np.ones(2, np.float32), factor=1.0)
