"""call() through libkerneld_native (rpc="native"): the same results and
errors as grpcio's paths, deadlines and Ctrl-C cancel the call, threads,
close, TLS and tokens against the real daemon, and finding the library.

tests/run.sh points KERNELD_NATIVE_LIB at the build's library and runs the
suite a second time with it off; without the library these tests skip.
"""
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import grpc
import numpy as np
import pytest

import kerneld
from kerneld import _native
from conftest import Daemon, run_in_threads

native = pytest.mark.skipif(_native.load()[0] is None,
                            reason="libkerneld_native not found (%s)" % _native.load()[1])


NATIVE = ["native", "native_unary"]


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_results_and_errors_match_the_stream(daemon, rpc):
    n = kerneld.Client(daemon.target, rpc=rpc)
    s = kerneld.Client(daemon.target, rpc="stream")
    try:
        assert n.rpc == rpc
        rng = np.random.default_rng(1)
        for size in (1, 127, 4097):
            x = rng.standard_normal(size).astype(np.float32)
            np.testing.assert_array_equal(n.scale(x, factor=3.0), s.scale(x, factor=3.0))
            y = np.full_like(x, np.nan)
            n.scale(x, factor=3.0, out=y, via="shm")
            np.testing.assert_allclose(y, x.astype(np.float64) * 3.0, rtol=1e-6)
        y, info = n.call("scale", x=x, factor=2.0, return_info=True)
        assert info["backend"] == "cpu" and info["total_ns"] > 0
        for bad in (dict(op="nosuchop", x=x), dict(op="scale", x=x, factor="two")):
            errs = []
            for c in (n, s):
                with pytest.raises(kerneld.KerneldError) as e:
                    c.call(**bad)
                errs.append((type(e.value), e.value.code, e.value.message))
            assert errs[0] == errs[1] and errs[0][2], errs
    finally:
        n.close()
        s.close()


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_deadline_cancels_in_the_daemon(new_daemon, rpc):
    d = new_daemon("--enable_test_ops=true")
    c = kerneld.Client(d.target, rpc=rpc)
    x = np.ones(4, np.float32)
    t0 = time.monotonic()
    with pytest.raises(kerneld.DeadlineExceeded) as e:
        c.call("_test_sleep", x=x, ms=2000.0, timeout=0.1)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - t0 < 1.0
    np.testing.assert_array_equal(c.scale(x, factor=5.0, timeout=30), x * 5)
    c2 = kerneld.Client(d.target, timeout=0.1, rpc=rpc)  # client-wide timeout=
    with pytest.raises(kerneld.DeadlineExceeded):
        c2.call("_test_sleep", x=x, ms=800.0)
    c2.close()
    c.close()


@pytest.mark.parametrize("rpc", ["unary"] + NATIVE)
def test_abandoned_unary_shm_segment_is_retired(new_daemon, rpc):
    """A unary call given up on (deadline) may still run in the daemon, which
    would then write into its shared-memory segment: the segment must never be
    handed to another call. The old client gave it back to the pool."""
    if rpc.startswith("native") and _native.load()[0] is None:
        pytest.skip("libkerneld_native not found")
    d = new_daemon("--enable_test_ops=true")
    c = kerneld.Client(d.target, shm=True, rpc=rpc)
    c.ops()
    x = np.ones(1024, np.float32)
    np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
    pool = c._shm_pool
    (first,) = pool.segments()
    with pytest.raises(kerneld.DeadlineExceeded):
        c.call("_test_sleep", x=x, ms=700.0, timeout=0.1)
    assert first not in pool.segments() and first not in pool._free  # retired, not reused
    assert first.buffer_id not in [b["buffer_id"] for b in c.buffers()] or \
        any(b["buffer_id"] == first.buffer_id and b.get("deferred") for b in c.buffers())
    y = c.scale(x, factor=3.0)  # a fresh segment
    np.testing.assert_array_equal(y, x * 3)
    assert len(pool.segments()) == 1 and pool.segments()[0] is not first
    c.close()


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_threads_share_one_native_client(daemon, rpc):
    c = kerneld.Client(daemon.target, timeout=60, rpc=rpc)

    def work(t):
        rng = np.random.default_rng(t)
        for i in range(60):
            x = rng.standard_normal(int(rng.integers(1, 3000))).astype(np.float32)
            y = c.scale(x, factor=float(t + 1), via="shm" if i % 3 == 0 else "inline")
            np.testing.assert_allclose(y, x * (t + 1), rtol=1e-6)
    run_in_threads(work)
    if rpc == "native":  # one stream per thread that called, ended threads' streams pruned
        assert len(c._native._streams) <= 8
        c.scale(np.ones(2, np.float32), factor=1.0)
        assert list(c._native._streams) == [threading.get_ident()]
    c.close()


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_buffers_over_anonymous_tcp_go_over_their_connection(new_daemon, rpc):
    """Over plaintext TCP without a token each connection is a principal of
    its own: a buffer registered over the client's grpcio channel is found
    only there. A call that references one goes over grpcio (it answered
    NotFound over the native library's connection); inline calls stay native."""
    from kerneld._graph import ServerBuffer
    from kerneld._proto import kerneld_pb2 as pb
    d = new_daemon()
    # Over anonymous TCP the daemon opens only shared memory every user may
    # read and write (docs/security.md).
    name = "/kerneld-pytest-split-%d" % os.getpid()
    fd = os.open("/dev/shm" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
    c = kerneld.Client(d.tcp, rpc=rpc, timeout=30)
    try:
        os.fchmod(fd, 0o666)
        os.ftruncate(fd, 4096)
        assert c.info()["principal_is_connection"] is True
        bid = c._rpc("RegisterSharedMemory", pb.RegisterSharedMemoryRequest(
            shm_name=name, byte_size=4096)).buffer_id
        x = np.linspace(-2, 2, 512, dtype=np.float32)
        os.pwrite(fd, x.tobytes(), 0)
        xb = ServerBuffer(c, bid, "float32", (512,), owner=False)
        yb = ServerBuffer(c, bid, "float32", (512,), offset=2048, owner=False)
        os.pwrite(fd, np.full(512, np.nan, np.float32).tobytes(), 2048)
        c.scale(xb, factor=3.0, out=yb)  # NotFound when sent natively
        y = np.frombuffer(os.pread(fd, 2048, 2048), np.float32)
        np.testing.assert_allclose(y, x.astype(np.float64) * 3.0, rtol=1e-6)
        np.testing.assert_allclose(c.scale(xb, factor=2.0), x.astype(np.float64) * 2.0, rtol=1e-6)
        # Inline calls still go natively (and their plans are kept).
        for _ in range(3):
            np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        assert c._plans.hits >= 1
    finally:
        c.close()
        os.close(fd)
        os.unlink("/dev/shm" + name)
    # On the unix socket the principal is the uid, shared by both connections.
    u = kerneld.Client(d.target, rpc=rpc, timeout=30)
    try:
        info = u.info()
        assert info["principal"] == "uid:%d" % os.getuid()
        assert not info.get("principal_is_connection", False)
        assert u._buffers_split is False  # never asked
    finally:
        u.close()


@native
def test_native_stream_survives_a_daemon_restart():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    d = Daemon(listen="127.0.0.1:%d" % port)
    c = kerneld.Client("127.0.0.1:%d" % port, rpc="native", timeout=30)
    x = np.arange(8, dtype=np.float32)
    try:
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        d.stop()
        d = Daemon(listen="127.0.0.1:%d" % port)
        try:  # a request that never left reaches the new daemon on a new stream
            np.testing.assert_array_equal(c.scale(x, factor=3.0), x * 3)
        except kerneld.Unavailable:
            pass  # it had gone out on the old stream: its loss is reported, never silent
        np.testing.assert_array_equal(c.scale(x, factor=4.0), x * 4)
    finally:
        c.close()
        d.stop()


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_close_waits_for_calls_in_flight_then_refuses(new_daemon, rpc):
    d = new_daemon("--enable_test_ops=true", "--metrics_listen=127.0.0.1:0")
    c = kerneld.Client(d.target, rpc=rpc, timeout=30)
    x = np.ones(4, np.float32)
    got = []
    t = threading.Thread(target=lambda: got.append(c.call("_test_sleep", x=x, ms=1500.0)))
    t.start()
    d.wait_running(1)
    c.close()  # the channel stays until the call in flight ends
    t.join()
    np.testing.assert_array_equal(got[0], x)
    with pytest.raises(kerneld.KerneldError) as e:
        c.scale(x, factor=1.0)
    assert e.value.code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE) or \
        isinstance(e.value, kerneld.KerneldError)


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_ctrl_c_interrupts_and_cancels_the_call(new_daemon, rpc):
    d = new_daemon("--enable_test_ops=true", "--metrics_listen=127.0.0.1:0")
    child = textwrap.dedent("""
        import faulthandler, signal, sys, time, numpy as np, kerneld
        faulthandler.enable()  # a crash says where
        # A background job of a shell starts with SIGINT ignored, and Python
        # then sets no KeyboardInterrupt handler: set it, as at a terminal.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        c = kerneld.Client(sys.argv[1], rpc=sys.argv[2])
        c.ops()
        print("ready", flush=True)
        try:
            c.call("_test_sleep", x=np.ones(4, np.float32), ms=8000.0)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        print("after", c.scale(np.ones(2, np.float32), factor=2.0).tolist(), flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", child, d.target, rpc], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ))
    try:
        assert p.stdout.readline().strip() == "ready"
        d.wait_running(1)  # the call is in the daemon: the child waits on it
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline().strip()
        waited = time.monotonic() - t0
        assert line == "interrupted", line + p.stdout.read()
        assert waited < 4.0, waited  # well before the 8 s sleep ends: not waited out
        # not communicate(timeout=): it reads the pipe itself and would miss
        # what readline() above already buffered ("after" may come with it)
        p.wait(timeout=30)
        out = p.stdout.read()
        assert "after [2.0, 2.0]" in out and p.returncode == 0, (p.returncode, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_finding_the_library(daemon, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELD_NATIVE_LIB", "0")
    with kerneld.Client(daemon.target) as c:
        assert c.rpc == "stream"  # turned off: grpcio's stream
    with pytest.raises(ValueError, match="KERNELD_NATIVE_LIB=0 turns it off"):
        kerneld.Client(daemon.target, rpc="native_unary")
    with pytest.raises(ValueError, match="KERNELD_NATIVE_LIB=0 turns it off"):
        kerneld.Client(daemon.target, rpc="native")
    missing = str(tmp_path / "libkerneld_native.so")
    monkeypatch.setenv("KERNELD_NATIVE_LIB", missing)
    with pytest.raises(ValueError, match="no such file"):
        kerneld.Client(daemon.target, rpc="native")
    notalib = tmp_path / "not.so"
    notalib.write_bytes(b"not an ELF file")
    monkeypatch.setenv("KERNELD_NATIVE_LIB", str(notalib))
    with kerneld.Client(daemon.target) as c:  # unusable: the client falls back
        assert c.rpc == "stream"
        assert (c.scale(np.ones(2, np.float32), factor=2.0) == 2).all()


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_tls_client_certificate_and_token_with_the_daemon(tmp_path, rpc):
    import shutil
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = str(tmp_path)

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "1", "-subj", "/CN=test-ca")
    for name in ("server", "client"):
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
             "-subj", "/CN=" + ("localhost" if name == "server" else "py-native"))
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        ossl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", name + ".pem", "-days", "1", "-extfile", name + ".ext")
    tokens = tmp_path / "tokens"
    tokens.write_text("native-token-0123456789abcdef alice user\n")
    p = lambda n: os.path.join(d, n)
    dm = Daemon("--tls_listen=127.0.0.1:0", "--tls_cert=" + p("server.pem"),
                "--tls_key=" + p("server.key"), "--tls_client_ca=" + p("ca.pem"),
                "--auth_tokens=%s" % tokens)
    try:
        ready = open(os.path.join(dm.dir, "ready")).read().split()
        tls_addr = [v for k, v in zip(ready[::2], ready[1::2]) if k == "grpc_tls"]
        if not tls_addr:
            pytest.skip("this kerneld reports no tls address in --ready_file")
        port = tls_addr[0].rsplit(":", 1)[1]
        target = "localhost:%s" % port
        x = np.arange(5, dtype=np.float32)
        c = kerneld.Client(target, rpc=rpc, tls_ca=p("ca.pem"), tls_cert=p("client.pem"),
                           tls_key=p("client.key"), timeout=20)
        np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
        c.close()
        no_cert = kerneld.Client(target, rpc=rpc, tls_ca=open(p("ca.pem"), "rb").read(),
                                 timeout=10)
        with pytest.raises(kerneld.Unavailable):
            no_cert.scale(x, factor=2.0)
        no_cert.close()
        # plaintext with a token on the plain port: the token travels
        good = kerneld.Client(dm.target, rpc=rpc, token="native-token-0123456789abcdef")
        np.testing.assert_array_equal(good.scale(x, factor=2.0), x * 2)
        bad = kerneld.Client(dm.target, rpc=rpc, token="wrong-token-0123456789abcdef")
        with pytest.raises(kerneld.Unauthenticated):
            bad.scale(x, factor=2.0)
        good.close()
        bad.close()
    finally:
        dm.stop()


@native
def test_spin_choices(daemon):
    x = np.arange(7, dtype=np.float32)
    for spin in (None, 0, 50, 1e6):
        with kerneld.Client(daemon.target, rpc="native", spin_us=spin) as c:
            for _ in range(3):
                np.testing.assert_array_equal(c.scale(x, factor=2.0), x * 2)
            if spin is None:  # the adaptive spin learned the calls' latency
                assert c._native._ewma is not None and c._native._ewma > 0
    for bad in (-1, "fast"):
        with pytest.raises(ValueError, match="spin_us="):
            kerneld.Client(daemon.target, rpc="native", spin_us=bad)


@native
@pytest.mark.parametrize("rpc", NATIVE)
def test_no_daemon_is_unavailable_at_once(rpc):
    import socket
    with socket.socket() as so:  # a port nobody listens on
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    c = kerneld.Client("127.0.0.1:%d" % port, rpc=rpc, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(kerneld.Unavailable):
        c._native.execute(__import__("kerneld._proto.kerneld_pb2", fromlist=["x"]).ExecuteRequest(
            op="scale"), timeout=5)
    assert time.monotonic() - t0 < 4
    c.close()


_PROVOKE_GOAWAY = textwrap.dedent("""
    import os, sys, threading, numpy as np, kerneld
    # keepalive pings as often as gRPC allows: within seconds the daemon sends
    # GOAWAY too_many_pings, which gRPC core logs at INFO ("I1126 ... Got
    # goaway ...") and at ERROR ("E1126 ... ENHANCE_YOUR_CALM ..."). Calls go
    # on until the test has seen the ERROR line and closes stdin.
    opts = [("grpc.keepalive_time_ms", 200), ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0)]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with kerneld.Client(sys.argv[1], rpc="native", options=opts, timeout=30) as c:
        while not stop.is_set():
            c.call("_test_sleep", x=np.ones(4, np.float32), ms=100.0)
        print(c.rpc, os.environ.get("GRPC_VERBOSITY"), flush=True)
""")


@native
def test_grpc_core_logging_is_quiet_unless_asked_for(new_daemon):
    d = new_daemon("--enable_test_ops=true")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GRPC_VERBOSITY", "GRPC_TRACE", "KERNELD_GRPC_VERBOSITY")}

    def run(**extra):
        p = subprocess.Popen([sys.executable, "-c", _PROVOKE_GOAWAY, d.tcp], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(env, **extra))
        try:
            err = []
            for line in p.stderr:  # until the goaway's ERROR line (the INFO one comes first)
                err.append(line)
                if "ENHANCE_YOUR_CALM" in line:
                    break
            out, rest = p.communicate("", timeout=60)  # closes stdin: the child stops
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = "".join(err) + rest
        assert p.returncode == 0 and "ENHANCE_YOUR_CALM" in err, err
        return out.split(), err
    out, err = run()
    assert out == ["native", "None"]  # the process's environment is as it was
    assert "Got goaway" not in err and not re.search(r"^[IWD]\d{4} ", err, re.M), err
    # asked for: the same run logs the goaway at INFO
    out, err = run(KERNELD_GRPC_VERBOSITY="INFO")
    assert "Got goaway" in err, err
