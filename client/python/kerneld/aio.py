"""kerneld.aio.Client: the same API as kerneld.Client, as coroutines on grpc.aio.

    async with kerneld.aio.Client("127.0.0.1:50051") as c:
        y = await c.scale(x, factor=2.0)
        async with c.stream() as s:
            futs = [s.submit("scale", x=x, factor=2.0) for x in xs]
        ys = [f.result() for f in futs]
        async with c.graph() as g:       # many kernels in one call (docs/graphs.md)
            y = g.silu_and_mul(g.rmsnorm(x, w))
            out = await g.run()

Registering a buffer (the first GPU tensor of an allocation, the first shm
call) is a short blocking RPC on a second, synchronous channel.
"""
import asyncio
import itertools

import grpc

from ._proto import kerneld_pb2 as pb
from . import _channel
from ._client import _Base, _methods, _msg_dict
from ._core import Prepared
from ._errors import from_rpc_error, error_for
from . import _user_kernels

__all__ = ["Client", "Stream"]


class Client(_Base):
    """Takes the arguments of kerneld.Client; create it inside the running event loop."""

    def __init__(self, target="127.0.0.1:50051", timeout=None, shm=False, token=None, tls=False,
                 tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None, lb=None,
                 options=None, lease_seconds=60):
        self._setup(target, timeout, shm, token, tls, tls_ca, tls_cert, tls_key, tls_server_name,
                    lb, options, lease_seconds)
        self._channel = _channel.make_channel(target, self._creds, self._opts, aio=True)
        self._m = _methods(self._channel)

    async def _arpc(self, name, req, timeout=None):
        try:
            return await self._m[name](req, timeout=timeout if timeout is not None else self.timeout,
                                       metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def _aload(self):
        if self._schemas is None:
            self._set_schemas(await self._arpc("ListKernels", pb.ListKernelsRequest()))

    def _load_schemas(self):
        # Reached only when a call prepares before ops() loaded them; call() loads first.
        self._set_schemas(self._rpc("ListKernels", pb.ListKernelsRequest()))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._schemas is None:
            raise AttributeError("kerneld.aio.Client: op methods exist once the schemas are loaded: "
                                 "`await c.ops()` first (or use `await c.call('%s', ...)`)" % name)
        if name not in self._schemas:
            raise AttributeError("kerneld.aio.Client has no attribute or op '%s'; ops: %s" %
                                 (name, ", ".join(sorted(self._schemas))))
        m = self._op_method(name, coroutine=True)
        object.__setattr__(self, name, m)
        return m

    async def info(self):
        return _msg_dict(await self._arpc("GetServerInfo", pb.GetServerInfoRequest()))

    async def ops(self, refresh=False):
        if refresh:
            self._schemas = None
        await self._aload()
        return sorted(self._schemas)

    async def describe(self, op):
        return _msg_dict((await self._arpc("ListKernels", pb.ListKernelsRequest(name=op))).kernels[0])

    async def health(self, service=""):
        try:
            raw = await self._m["Health"](_channel.health_request(service),
                                          timeout=self.timeout or 10, metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return False
            raise from_rpc_error(e) from None
        return _channel.health_status(raw) == 1

    async def call(self, op, *args, **kwargs):
        await self._aload()
        p = Prepared(self, op, args, kwargs)
        try:
            resp = await self._m["Execute"](p.req, timeout=p.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            p.release()
            raise from_rpc_error(e) from None
        except BaseException:
            p.release()
            raise
        return p.complete(resp)

    # ---- user kernels (docs/user-kernels.md): kerneld.Client's, as coroutines ----
    async def register_kernel(self, source, entry=None, spec=None, name=None, replace=False,
                              arch=None, compile_options=None, timeout=None):
        """kerneld.Client.register_kernel: returns the op's coroutine method
        (`await op(x, ...)`, also `await c.<name>(...)`); .registration is the answer."""
        req = _user_kernels.register_request(source, entry, spec if spec is not None else {},
                                             name, replace, arch, compile_options)
        resp = await self._arpc("RegisterKernel", req, timeout)
        _user_kernels.forget(self, req.name)
        await self._aload()
        return _user_kernels.op_method(self, req, resp, coroutine=True)

    async def unregister_kernel(self, name, timeout=None):
        """Removes your user kernel `name` (NotFound when you have none)."""
        await self._arpc("UnregisterKernel", _user_kernels.unregister_request(name), timeout)
        _user_kernels.forget(self, name)

    async def list_user_kernels(self, all_principals=False, timeout=None):
        """kerneld.Client.list_user_kernels: your user kernels as dicts."""
        return _user_kernels.kernel_list(
            await self._arpc("ListUserKernels", _user_kernels.list_request(all_principals), timeout))

    async def evaluate_kernel(self, name, against, shapes, dtype="float32", attrs=None,
                              iterations=0, seed=0, device="", timeout=None):
        """kerneld.Client.evaluate_kernel: user kernel `name` against built-in
        `against` on the same random inputs (on a GPU); the same dict."""
        first = None
        if _user_kernels.wants_first_input(shapes):
            first = (await self.describe(against))["inputs"][0]["name"]
        req = _user_kernels.evaluate_request(name, against, shapes, lambda: first, dtype, attrs,
                                             iterations, seed, device)
        return _msg_dict(await self._arpc("EvaluateKernel", req, timeout))

    async def buffers(self, all=False):
        return _Base.buffers(self, all)

    async def register(self, obj):
        return self._make_handle(obj)

    def graph(self, device=""):
        """An AioGraph: steps recorded as g.<op>(...), run as one ExecuteGraph
        by `await g.run()` (kerneld/_graph.py)."""
        from ._graph import AioGraph
        return AioGraph(self, device)

    def stream(self):
        return Stream(self)

    async def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self._close_buffers()
        finally:
            await self._channel.close()

    async def __aenter__(self):
        await self._aload()
        return self

    async def __aexit__(self, *exc):
        await self.close()


class Stream:
    """ExecuteStream on grpc.aio: submit() returns an asyncio.Future at once."""

    def __init__(self, client):
        self._c = client
        self._pending = {}
        self._ids = itertools.count(1)
        self._call = None
        self._reader = None
        self._closed = False

    async def __aenter__(self):
        await self._c._aload()
        self._call = self._c._m["ExecuteStream"](metadata=self._c._metadata)
        self._q = asyncio.Queue()
        self._writer = asyncio.ensure_future(self._write())
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def _write(self):
        # One write in flight at a time (grpc.aio's rule), in submit order.
        while True:
            req = await self._q.get()
            if req is None:
                await self._call.done_writing()
                return
            await self._call.write(req)

    def submit(self, op, *args, **kwargs):
        if self._call is None or self._closed:
            raise RuntimeError("kerneld: submit() outside `async with c.stream() as s`")
        rid = "py-%d" % next(self._ids)
        kwargs.pop("timeout", None)
        p = Prepared(self._c, op, args, kwargs, request_id=rid)
        f = asyncio.get_running_loop().create_future()
        self._pending[rid] = (p, f)
        self._q.put_nowait(p.req)
        return f

    def submit_graph(self, graph, return_info=False):
        """Sends `graph` (from c.graph()) as one message of this stream; an
        asyncio.Future of what `await graph.run()` returns (docs/graphs.md)."""
        if self._call is None or self._closed:
            raise RuntimeError("kerneld: submit_graph() outside `async with c.stream() as s`")
        rid = "py-%d" % next(self._ids)
        req, answer = graph._stream_message(rid, return_info)
        f = asyncio.get_running_loop().create_future()
        self._pending[rid] = (answer, f)
        self._q.put_nowait(req)
        return f

    async def _read(self):
        err = None
        try:
            async for resp in self._call:
                p, f = self._pending.pop(resp.request_id, (None, None))
                if f is not None:
                    p.settle(resp, f)
        except grpc.RpcError as e:
            err = from_rpc_error(e)
        left, self._pending = list(self._pending.values()), {}
        for p, f in left:
            p.release()
            if not f.done():
                f.set_exception(err or error_for(grpc.StatusCode.UNAVAILABLE,
                                                 "the stream ended before this request's response"))

    async def __aexit__(self, *exc):
        self._closed = True
        self._q.put_nowait(None)
        try:
            await self._writer
        except grpc.RpcError:
            pass  # the stream broke: the reader fails what is pending
        await self._reader
