"""The exception hierarchy: every mistake the client catches before sending is
a kerneld.InvalidArgument (and still the ValueError or TypeError it was), a
timeout is a TimeoutError, a connection failure a ConnectionError; against a
real daemon, over every rpc= path."""
import asyncio
import pickle
import socket

import grpc
import numpy as np
import pytest

import kerneld
from kerneld import _native


def test_hierarchy():
    assert issubclass(kerneld.InvalidArgument, kerneld.KerneldError)
    assert issubclass(kerneld.InvalidArgument, ValueError)
    assert issubclass(kerneld.DeadlineExceeded, kerneld.KerneldError)
    assert issubclass(kerneld.DeadlineExceeded, TimeoutError)
    assert issubclass(kerneld.Unavailable, kerneld.KerneldError)
    assert issubclass(kerneld.Unavailable, ConnectionError)
    for cls, code in ((kerneld.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
                      (kerneld.Unavailable, grpc.StatusCode.UNAVAILABLE),
                      (kerneld.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT)):
        e = cls(code, "what went wrong", "debug")
        assert str(e) == "%s: what went wrong" % code.name
        back = pickle.loads(pickle.dumps(e))  # multiprocessing, concurrent.futures
        assert type(back) is cls and (back.code, back.message, back.details) == \
            (code, "what went wrong", "debug")


def _rpcs():
    out = ["stream", "unary"]
    if _native.load()[0] is not None:
        out += ["native", "native_unary"]
    return out


def _mistakes(c):
    """(what, callable) for mistakes the client refuses before sending."""
    f32 = np.zeros(4, np.float32)
    return [
        ("dtype outside the schema", lambda: c.scale(np.zeros(4), factor=2.0)),
        ("dtype kerneld does not know", lambda: c.scale(np.zeros(4, np.complex64), factor=2.0)),
        ("big-endian", lambda: c.scale(np.zeros(4, ">f4"), factor=2.0)),
        ("not contiguous", lambda: c.scale(np.zeros((8, 8), np.float32)[:, ::2], factor=2.0)),
        ("not a tensor", lambda: c.call("scale", x=[object()], factor=2.0)),
        ("attr of no attr type", lambda: c.scale(f32, factor=[2.0])),
        ("via=", lambda: c.scale(f32, factor=2.0, via="carrier pigeon")),
        ("out= count", lambda: c.fused_add_rmsnorm(np.zeros((1, 4), np.float32),
                                                   np.zeros((1, 4), np.float32),
                                                   np.zeros(4, np.float32),
                                                   out=np.zeros((1, 4), np.float32))),
        ("out= names", lambda: c.scale(f32, factor=2.0, out={"nope": f32.copy()})),
    ]


@pytest.mark.parametrize("rpc", _rpcs())
def test_client_side_mistakes_are_invalid_argument(daemon, rpc):
    with kerneld.Client(daemon.target, rpc=rpc, timeout=30) as c:
        np.testing.assert_array_equal(c.scale(np.ones(4, np.float32), factor=2.0), 2)
        for planned in (False, True):  # the second round goes through the call plans
            for what, call in _mistakes(c):
                with pytest.raises(kerneld.InvalidArgument) as e:
                    call()
                assert isinstance(e.value, ValueError), what
                assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, what
                assert e.value.message and not e.value.message.startswith("INVALID_ARGUMENT"), \
                    (what, e.value.message)
            np.testing.assert_array_equal(c.scale(np.ones(4, np.float32), factor=3.0), 3)
        # a miscounted call is an InvalidArgument that stays a TypeError
        with pytest.raises(kerneld.InvalidArgument) as e:
            c.scale(np.zeros(4, np.float32), np.zeros(4, np.float32), factor=1.0)
        assert isinstance(e.value, TypeError)
        with pytest.raises(TypeError, match="given twice"):
            c.call("scale", np.zeros(4, np.float32), x=np.zeros(4, np.float32), factor=1.0)
        # the daemon's refusal is the same class
        with pytest.raises(kerneld.InvalidArgument):
            c.scale(np.ones(4, np.float32), factor="two")


def test_constructor_mistakes_are_invalid_argument(daemon, tmp_path):
    with pytest.raises(kerneld.InvalidArgument, match="rpc="):
        kerneld.Client(daemon.target, rpc="carrier pigeon")
    pem = tmp_path / "c.pem"
    pem.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(kerneld.InvalidArgument, match="tls_cert= and tls_key= go together"):
        kerneld.Client(daemon.target, tls_cert=str(pem))
    if _native.load()[0] is not None:
        with pytest.raises(kerneld.InvalidArgument, match="spin_us="):
            kerneld.Client(daemon.target, rpc="native", spin_us=-1)


def test_aio_mistakes_are_invalid_argument(daemon):
    async def main():
        async with kerneld.aio.Client(daemon.target) as c:
            with pytest.raises(kerneld.InvalidArgument):
                await c.scale(np.zeros(4), factor=2.0)
            with pytest.raises(kerneld.InvalidArgument):
                await c.scale(np.zeros(4, np.float32), factor=[2.0])
    asyncio.run(main())


@pytest.mark.parametrize("rpc", _rpcs())
def test_python_builtin_handlers_catch_timeouts_and_lost_connections(new_daemon, rpc):
    d = new_daemon("--enable_test_ops=true")
    x = np.ones(4, np.float32)
    with kerneld.Client(d.target, rpc=rpc) as c:
        with pytest.raises(TimeoutError):
            c.call("_test_sleep", x=x, ms=2000.0, timeout=0.1)
    with socket.socket() as so:  # a port nobody listens on
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    with kerneld.Client("127.0.0.1:%d" % port, rpc=rpc, timeout=5) as c:
        with pytest.raises(ConnectionError):
            c.call("scale", x=x, factor=2.0)
