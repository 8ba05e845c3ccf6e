"""Errors, streams, asyncio, threads, buffers, generated methods, channel options."""
import asyncio
import glob
import inspect
import os
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest

import kerneld
from conftest import daemon_help, run_in_threads, wait_until

# ---- ValueError before anything is sent ----

class _NoSend:
    def __init__(self):
        self.calls = 0

    def __call__(self, *a, **k):
        self.calls += 1
        raise AssertionError("sent")


@pytest.fixture
def nosend(daemon):
    c = kerneld.Client(daemon.target)
    c.ops()
    spy = _NoSend()
    c._m = dict(c._m, Execute=spy, ExecuteStream=spy)
    yield c
    assert spy.calls == 0
    c.close()


def test_non_contiguous_is_value_error(nosend):
    x = np.zeros((8, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"scale: 'x' is not contiguous .*np.ascontiguousarray\(x\)"):
        nosend.scale(x, factor=2.0)
    with pytest.raises(ValueError, match="'out y' is not contiguous"):
        nosend.scale(np.zeros(4, np.float32), factor=2.0, out=np.zeros(8, np.float32)[::2])


def test_wrong_dtype_is_value_error(nosend):
    with pytest.raises(ValueError, match=r"scale: 'x' dtype float64 not in \{float16, bfloat16, float32\}"):
        nosend.scale(np.zeros(4), factor=2.0)
    with pytest.raises(ValueError, match=r"rope: 'positions' dtype float32 not in \{int32, int64\}"):
        nosend.rope(np.zeros((1, 1, 4), np.float32), np.zeros((1, 1, 4), np.float32),
                    np.zeros(1, np.float32), np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="does not know"):
        nosend.scale(np.zeros(4, np.complex64), factor=2.0)
    with pytest.raises(TypeError, match="scale takes 1 positional inputs"):
        nosend.scale(np.zeros(4, np.float32), np.zeros(4, np.float32), factor=1.0)
    with pytest.raises(ValueError, match="in place of input 'x'"):
        nosend.fused_add_rmsnorm(np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32),
                                 np.zeros(4, np.float32), out=np.zeros((1, 4), np.float32))

# ---- every error class, with the server's message ----

def test_invalid_argument(client):
    with pytest.raises(kerneld.InvalidArgument) as e:
        client.scale(np.ones(4, np.float32))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == "scale: missing required attr 'factor' (float)"
    with pytest.raises(kerneld.InvalidArgument, match="attr 'factor' must be float, got bool"):
        client.scale(np.ones(4, np.float32), factor=True)
    with pytest.raises(kerneld.InvalidArgument, match="weight"):
        client.rmsnorm(np.ones((2, 8), np.float32), np.ones(7, np.float32), eps=1e-6)
    with pytest.raises(kerneld.InvalidArgument, match=r"output 'y' .*float16.*float32|output 'y' dtype"):
        client.scale(np.ones(4, np.float32), factor=1.0, out=np.ones(4, np.float16))
    assert isinstance(e.value, kerneld.KerneldError)


def test_not_found(client):
    with pytest.raises(kerneld.NotFound) as e:
        client.call("nope", x=np.ones(2, np.float32))
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert e.value.message.startswith("unknown op 'nope'; this server has {")
    with pytest.raises(kerneld.NotFound, match="device 'cuda:7' not found"):
        client.scale(np.ones(2, np.float32), factor=1.0, device="cuda:7")
    with pytest.raises(AttributeError, match="no attribute or op 'nope'"):
        client.nope


def test_failed_precondition(client):
    if "cuda" in client.info()["backends"]:
        pytest.skip("this daemon has a GPU: backend='cuda' is eligible")
    with pytest.raises(kerneld.FailedPrecondition) as e:
        client.scale(np.ones(2, np.float32), factor=1.0, backend="cuda")
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert ("scale: no eligible backend" in e.value.message or
            "scale has no 'cuda' implementation" in e.value.message), e.value.message


def test_resource_exhausted(new_daemon):
    d = new_daemon("--max_message_mb=1")
    c = kerneld.Client(d.target)
    with pytest.raises(kerneld.ResourceExhausted) as e:
        c.scale(np.ones(1 << 19, np.float32), factor=2.0)  # 2 MiB inline
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.value.message
    c.close()


def test_unavailable_no_daemon():
    c = kerneld.Client("127.0.0.1:1", timeout=5)
    with pytest.raises(kerneld.Unavailable) as e:
        c.info()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.message
    assert c.health() is False
    c.close()


def test_unavailable_draining(new_daemon):
    d = new_daemon("--enable_test_ops=true", "--drain_timeout_s=10", "--metrics_listen=127.0.0.1:0")
    c = kerneld.Client(d.target, timeout=20)
    c.ops()
    t = threading.Thread(target=lambda: c.call("_test_sleep", x=np.ones(1, np.float32), ms=3000.0))
    t.start()
    d.wait_running(1)  # the drain waits for it
    d.terminate()
    refused = []

    def draining():  # calls succeed until the daemon has begun to drain
        try:
            c.scale(np.ones(2, np.float32), factor=1.0)
            return False
        except kerneld.Unavailable as e:
            refused.append(e)
            return True
    wait_until(draining, 20, "the daemon to refuse calls while it drains")
    assert "shutting down" in refused[0].message
    t.join()
    c.close()


def test_deadline_exceeded(client):
    with pytest.raises(kerneld.DeadlineExceeded) as e:
        client.call("_test_sleep", x=np.ones(1, np.float32), ms=1000.0, timeout=0.1)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_permission_denied(new_daemon):
    flags = ["--allow_insecure_remote"] if "--allow_insecure_remote" in daemon_help() else []
    d = new_daemon(*flags, listen="0.0.0.0:0")
    c = kerneld.Client(d.tcp)  # a TCP listener open to other hosts
    with pytest.raises(kerneld.PermissionDenied) as e:
        c.scale(np.ones(4, np.float32), factor=2.0, via="shm")
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "--allow_client_buffers" in e.value.message
    c.close()

# ---- token and TLS (a Python gRPC server checks what arrives) ----

def _fake_server(creds=None, token=None):
    """A gRPC server that answers GetServerInfo and checks the bearer token."""
    from concurrent import futures
    from kerneld._proto import kerneld_pb2 as pb
    seen = {}

    def info(req, ctx):
        md = dict(ctx.invocation_metadata())
        seen["authorization"] = md.get("authorization")
        if token and md.get("authorization") != "Bearer " + token:
            ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid bearer token (fake server)")
        return pb.GetServerInfoResponse(version="fake")
    h = grpc.method_handlers_generic_handler("kerneld.v1.KernelService", {
        "GetServerInfo": grpc.unary_unary_rpc_method_handler(
            info, request_deserializer=pb.GetServerInfoRequest.FromString,
            response_serializer=pb.GetServerInfoResponse.SerializeToString)})
    s = grpc.server(futures.ThreadPoolExecutor(2))
    s.add_generic_rpc_handlers((h,))
    port = s.add_secure_port("127.0.0.1:0", creds) if creds else s.add_insecure_port("127.0.0.1:0")
    s.start()
    return s, port, seen


def test_token_metadata_and_unauthenticated():
    tok = "tok-0123456789abcdef"
    s, port, seen = _fake_server(token=tok)
    try:
        c = kerneld.Client("127.0.0.1:%d" % port, token=tok)
        assert c.info()["version"] == "fake"
        assert seen["authorization"] == "Bearer " + tok
        bad = kerneld.Client("127.0.0.1:%d" % port, token="wrong-token-xxxxxxxx")
        with pytest.raises(kerneld.Unauthenticated) as e:
            bad.info()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.message == "no valid bearer token (fake server)"
        c.close()
        bad.close()

        async def aio():
            a = kerneld.aio.Client("127.0.0.1:%d" % port, token=tok)
            assert (await a.info())["version"] == "fake"
            await a.close()
            b = kerneld.aio.Client("127.0.0.1:%d" % port)
            with pytest.raises(kerneld.Unauthenticated):
                await b.info()
            await b.close()
        seen.clear()
        asyncio.run(aio())
        assert seen["authorization"] is None  # the last call: no token, no header
    finally:
        s.stop(0)


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def test_tls_and_client_certificate(tmp_path):
    if subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("openssl not installed")
    d = str(tmp_path)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "1", "-subj", "/CN=test-ca", cwd=d)
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
                 "-subj", "/CN=" + ("localhost" if name == "server" else "py-client"), cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", name + ".pem", "-days", "1", "-extfile", name + ".ext", cwd=d)
    rd = lambda n: open(os.path.join(d, n), "rb").read()
    creds = grpc.ssl_server_credentials([(rd("server.key"), rd("server.pem"))],
                                        root_certificates=rd("ca.pem"), require_client_auth=True)
    s, port, seen = _fake_server(creds=creds)
    try:
        c = kerneld.Client("localhost:%d" % port, tls_ca=os.path.join(d, "ca.pem"),
                           tls_cert=os.path.join(d, "client.pem"), tls_key=os.path.join(d, "client.key"),
                           timeout=10)
        assert c.info()["version"] == "fake"
        c.close()
        no_cert = kerneld.Client("localhost:%d" % port, tls_ca=rd("ca.pem"), timeout=10)
        with pytest.raises(kerneld.Unavailable):
            no_cert.info()
        no_cert.close()
        plain = kerneld.Client("localhost:%d" % port, timeout=5)
        with pytest.raises(kerneld.Unavailable):
            plain.info()
        plain.close()
    finally:
        s.stop(0)
    with pytest.raises(ValueError, match="tls_cert= and tls_key= go together"):
        kerneld.Client("localhost:1", tls_cert=b"x")


def test_dns_round_robin(daemon):
    port = daemon.tcp.rsplit(":", 1)[1]
    c = kerneld.Client("dns:///localhost:%s" % port, lb="round_robin", timeout=20)
    assert ("grpc.lb_policy_name", "round_robin") in c._opts
    assert (c.scale(np.ones(3, np.float32), factor=2.0) == 2).all()
    c.close()


def _counts(a, b, total):
    # A daemon counts a request as it answers it, a moment after the client
    # has the answer: wait (up to 5 s) for the counts to add up.
    for _ in range(250):
        n = (a.requests_ok("scale"), b.requests_ok("scale"))
        if sum(n) >= total:
            break
        time.sleep(0.02)
    return n


def test_round_robin_spreads_calls_over_two_daemons(new_daemon):
    a = new_daemon("--metrics_listen=127.0.0.1:0")
    b = new_daemon("--metrics_listen=127.0.0.1:0")
    assert a.metrics_port and b.metrics_port
    target = "ipv4:%s,%s" % (a.tcp, b.tcp)  # gRPC's static resolver: two addresses
    x = np.arange(5, dtype=np.float32)
    c = kerneld.Client(target, lb="round_robin", timeout=20)
    assert c.rpc in ("unary", "native_unary")  # one RPC per call: a stream would stay on one daemon
    for _ in range(100):
        assert (c.scale(x, factor=2.0) == 2 * x).all()
    c.close()
    na, nb = _counts(a, b, 100)
    assert na + nb == 100
    assert na >= 10 and nb >= 10, (na, nb)

    # pick_first (gRPC's default) keeps every call on one daemon, and a
    # client without lb= keeps its one ExecuteStream (or native channel).
    c = kerneld.Client(target, timeout=20)
    assert c.rpc in ("stream", "native")
    for _ in range(50):
        c.scale(x, factor=2.0)
    c.close()
    na2, nb2 = _counts(a, b, 150)
    assert sorted([na2 - na, nb2 - nb]) == [0, 50]


def test_unix_socket(daemon):
    c = kerneld.Client(daemon.unix)
    assert c.health() and (c.scale(np.ones(3, np.float32), factor=4.0) == 4).all()
    c.close()


@pytest.mark.skipif("--auth_tokens" not in daemon_help(), reason="this kerneld has no --auth_tokens yet")
def test_token_with_the_daemon(new_daemon, tmp_path):
    f = tmp_path / "tokens"
    f.write_text("py-token-0123456789abcdef alice user\n")
    d = new_daemon("--auth_tokens=%s" % f)
    good = kerneld.Client(d.target, token="py-token-0123456789abcdef")
    assert (good.scale(np.ones(2, np.float32), factor=2.0) == 2).all()
    bad = kerneld.Client(d.target, token="not-a-token-0123456789")
    with pytest.raises(kerneld.Unauthenticated):
        bad.scale(np.ones(2, np.float32), factor=2.0)
    good.close()
    bad.close()

# ---- info, ops, describe, health, generated methods ----

def test_info_ops_describe_health(client):
    info = client.info()
    assert info["version"] and "cpu" in info["backends"]
    assert any(d["id"] == "cpu" for d in info["devices"])
    ops = client.ops()
    assert "scale" in ops and "rmsnorm" in ops and ops == sorted(ops)
    d = client.describe("rmsnorm")
    assert [i["name"] for i in d["inputs"]] == ["x", "weight"]
    assert {a["name"] for a in d["attrs"]} >= {"eps"}
    assert d["implementations"][0]["backend"]
    assert client.health() is True and client.health("kerneld.device/cpu") is True
    with pytest.raises(kerneld.NotFound):
        client.describe("nope")


def test_generated_methods_match_list_kernels(client):
    from kerneld._proto import kerneld_pb2 as pb
    kernels = client._m["ListKernels"](pb.ListKernelsRequest()).kernels
    assert sorted(k.name for k in kernels) == client.ops()
    for k in kernels:
        if not k.name.isidentifier() or k.name.startswith("_"):
            continue  # test ops (_test_*) are reached through call()
        m = getattr(client, k.name)
        assert k.name in dir(client)
        assert m.__doc__.startswith(k.doc)
        sig = inspect.signature(m)
        params = list(sig.parameters)
        assert params[:len(k.inputs)] == [t.name for t in k.inputs]
        for a in k.attrs:
            assert sig.parameters[a.name].kind == inspect.Parameter.KEYWORD_ONLY
        for kw in ("out", "backend", "device", "via", "timeout", "return_info"):
            assert kw in sig.parameters
        for t in k.inputs:
            assert t.name in m.__doc__

# ---- streams ----

def test_stream(client):
    xs = [np.full(n, n, np.float32) for n in range(1, 200)]
    with client.stream() as s:
        futs = [s.submit("scale", x=x, factor=2.0) for x in xs]
        bad = s.submit("scale", x=xs[0])  # missing factor: fails alone
        more = [s.submit("scale", x=x, factor=3.0, via="shm") for x in xs[:20]]
    for x, f in zip(xs, futs):
        np.testing.assert_array_equal(f.result(), x * 2)
    with pytest.raises(kerneld.InvalidArgument, match="missing required attr 'factor'"):
        bad.result()
    for x, f in zip(xs, more):
        np.testing.assert_array_equal(f.result(), x * 3)


def test_stream_in_place_and_info(client):
    x = np.ones((2, 8), np.float32)
    r = np.ones((2, 8), np.float32)
    w = np.ones(8, np.float32)
    with client.stream() as s:
        f = s.submit("fused_add_rmsnorm", x, r, w, eps=1e-6)
        g = s.submit("scale", np.ones(4, np.float16), factor=2.0, return_info=True)
    xo, ro = f.result()
    assert xo is x and (r == 2).all() and np.allclose(x, 1.0, atol=1e-5)
    y, info = g.result()
    assert (y == 2).all() and info["backend"] == "cpu"

# ---- asyncio ----

def test_aio(daemon):
    async def main():
        async with kerneld.aio.Client(daemon.target) as c:
            assert "scale" in await c.ops()
            assert (await c.info())["version"]
            assert await c.health()
            x = np.arange(5, dtype=np.float32)
            np.testing.assert_array_equal(await c.scale(x, factor=2.0), x * 2)
            np.testing.assert_array_equal(await c.call("scale", x=x, factor=3.0, via="shm"), x * 3)
            ys = await asyncio.gather(*[c.scale(np.full(9, i, np.float32), factor=2.0) for i in range(50)])
            for i, y in enumerate(ys):
                assert (y == 2 * i).all()
            with pytest.raises(kerneld.InvalidArgument, match="missing required attr"):
                await c.scale(x)
            async with c.stream() as s:
                futs = [s.submit("scale", x=np.full(3, i, np.float32), factor=2.0) for i in range(30)]
                bad = s.submit("nope", x=x)
            for i, f in enumerate(futs):
                assert (f.result() == 2 * i).all()
            with pytest.raises(kerneld.NotFound):
                bad.result()
            assert "scale" in (await c.describe("scale"))["name"]
            assert inspect.iscoroutinefunction(c.rmsnorm)
    asyncio.run(main())

# ---- threads ----

def test_many_threads_share_one_client(client):
    def work(t):
        rng = np.random.default_rng(t)
        for i in range(40):
            n = int(rng.integers(1, 5000))
            x = rng.standard_normal(n).astype(np.float32)
            via = "shm" if (i + t) % 2 else "inline"
            y = client.scale(x, factor=float(t + 1), via=via)
            np.testing.assert_allclose(y, x * (t + 1), rtol=1e-6)
            out = np.empty_like(x)
            client.call("add", a=x, b=x, out=out, via=via)
            np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
    run_in_threads(work)

# ---- buffers: shm pool, register, leases, cleanup ----

def _shm_names(pid):
    return glob.glob("/dev/shm/kerneld-py-%d-*" % pid)


def test_shm_pool_is_reused_and_released(daemon):
    c = kerneld.Client(daemon.target, shm=True)
    for _ in range(20):
        assert (c.scale(np.ones(1000, np.float32), factor=2.0) == 2).all()
    mine = c.buffers()
    assert len(mine) == 1 and mine[0]["kind"] == "shared_memory"  # registered once, reused
    names = ["/dev/shm" + s.name for s in c._shm_pool.segments()]
    assert len(names) == 1 and os.path.exists(names[0])
    ids = {b["buffer_id"] for b in mine}
    c.close()
    assert not os.path.exists(names[0])
    other = kerneld.Client(daemon.target)
    assert not ids & {b["buffer_id"] for b in other.buffers(all=True)}
    other.close()


def test_cleanup_at_exit(daemon):
    code = ("import kerneld, numpy as np, os; c = kerneld.Client(%r, shm=True); "
            "c.scale(np.ones(8, np.float32), factor=2.0); print(os.getpid())" % daemon.target)
    pid = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True).stdout)
    assert not _shm_names(pid)
    c = kerneld.Client(daemon.target)
    assert not [b for b in c.buffers(all=True) if b["name"] == "python pid %d" % pid]
    c.close()


def test_register_handle(client):
    x = np.arange(16, dtype=np.float32)
    with client.register(x) as h:
        assert isinstance(h, kerneld.Handle)
        np.testing.assert_array_equal(h.array, x)
        assert h.buffer_id in {b["buffer_id"] for b in client.buffers()}
        y = client.scale(h, factor=2.0)
        np.testing.assert_array_equal(y, x * 2)
        assert client.scale(h, factor=2.0, out=h) is h.array  # in place, in shared memory
        np.testing.assert_array_equal(h.array, x * 2)
        bid = h.buffer_id
    assert bid not in {b["buffer_id"] for b in client.buffers(all=True)}


def test_leases_are_renewed(daemon):
    c = kerneld.Client(daemon.target, lease_seconds=1)
    with c.register(np.ones(8, np.float32)) as h:
        time.sleep(2.5)  # past the lease: renewed in the background
        assert (c.scale(h, factor=2.0) == 2).all()
        b = [b for b in c.buffers() if b["buffer_id"] == h.buffer_id][0]
        assert b["lease_seconds"] == 1 and b["expires_in_ms"] > 0
    c.close()


def test_cleanup_when_collected(daemon):
    import gc
    c = kerneld.Client(daemon.target, shm=True)
    c.scale(np.ones(8, np.float32), factor=2.0)
    c.rmsnorm  # a generated method (a reference cycle through the client)
    names = ["/dev/shm" + s.name for s in c._shm_pool.segments()]
    ids = set(c._buffer_ids())
    assert names and all(os.path.exists(n) for n in names)
    del c
    gc.collect()
    assert not any(os.path.exists(n) for n in names)
    other = kerneld.Client(daemon.target)
    assert not ids & {b["buffer_id"] for b in other.buffers(all=True)}
    other.close()
