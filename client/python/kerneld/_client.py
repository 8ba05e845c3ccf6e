"""kerneld.Client: the synchronous client."""
import concurrent.futures
import itertools
import os
import queue
import threading
import weakref

import grpc

from ._proto import kerneld_pb2 as pb
from . import _channel
from ._core import Prepared
from ._errors import KerneldError, from_rpc_error, error_for, invalid_argument
from ._ipc import IpcRegistry
from ._messages import msg_dict as _msg_dict
from ._schema import OpSchema
from ._shm import ShmPool, Segment, align
from ._transport import CallStream
from . import _lane
from . import _native
from . import _plan
from . import _user_kernels
from ._tensors import NAMES, to_arg

_KS = "/kerneld.v1.KernelService/"
_BS = "/kerneld.v1.BufferService/"


def _methods(channel):
    def uu(path, req, resp):
        try:  # grpcio >= 1.62: a registered method skips a per-call lookup
            return channel.unary_unary(path, request_serializer=req.SerializeToString,
                                       response_deserializer=resp.FromString, _registered_method=True)
        except TypeError:
            return channel.unary_unary(path, request_serializer=req.SerializeToString,
                                       response_deserializer=resp.FromString)
    return {
        "Execute": uu(_KS + "Execute", pb.ExecuteRequest, pb.ExecuteResponse),
        "ExecuteStream": channel.stream_stream(_KS + "ExecuteStream",
                                               request_serializer=pb.ExecuteRequest.SerializeToString,
                                               response_deserializer=pb.ExecuteResponse.FromString),
        "ListKernels": uu(_KS + "ListKernels", pb.ListKernelsRequest, pb.ListKernelsResponse),
        "GetServerInfo": uu(_KS + "GetServerInfo", pb.GetServerInfoRequest, pb.GetServerInfoResponse),
        "ExecuteGraph": uu(_KS + "ExecuteGraph", pb.ExecuteGraphRequest, pb.ExecuteGraphResponse),
        "RegisterCudaIpcBuffer": uu(_BS + "RegisterCudaIpcBuffer", pb.RegisterCudaIpcBufferRequest,
                                    pb.RegisterCudaIpcBufferResponse),
        "RegisterSharedMemory": uu(_BS + "RegisterSharedMemory", pb.RegisterSharedMemoryRequest,
                                   pb.RegisterSharedMemoryResponse),
        "UnregisterBuffer": uu(_BS + "UnregisterBuffer", pb.UnregisterBufferRequest,
                               pb.UnregisterBufferResponse),
        "RenewLease": uu(_BS + "RenewLease", pb.RenewLeaseRequest, pb.RenewLeaseResponse),
        "ListBuffers": uu(_BS + "ListBuffers", pb.ListBuffersRequest, pb.ListBuffersResponse),
        "Health": channel.unary_unary("/grpc.health.v1.Health/Check"),
        **_user_kernels.methods(channel, uu),
    }


def _references_buffers(req):
    """True when an ExecuteRequest's inputs or outputs name a registered buffer."""
    for m in (req.inputs, req.outputs):
        for t in m.values():
            if t.HasField("buffer"):
                return True
    return False


class Handle:
    """A registered tensor or array (Client.register): pass it wherever a tensor goes.

    .obj is the tensor (GPU) or the shared-memory numpy array (host) that the
    daemon reads and writes: write inputs into it, read outputs from it.
    Unregistered by close() or at the end of a `with` block.
    """

    def __init__(self, client, obj, arg, buffer_id, offset, seg=None):
        self._client, self.obj, self._arg = client, obj, arg
        self.buffer_id, self.offset, self._seg = buffer_id, offset, seg
        self.closed = False

    @property
    def array(self):
        return self.obj

    tensor = array

    def close(self):
        if self.closed:
            return
        self.closed = True
        self._client.release_handle(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<kerneld.Handle %s %s %s at %s+%d>" % (
            NAMES.get(self._arg.dtype), list(self._arg.shape), self._arg.kind, self.buffer_id, self.offset)


class _Buffers:
    """A client's buffers and the synchronous channel their RPCs use.

    It holds no reference to the client, so weakref.finalize can release
    everything when the client is collected or at interpreter exit:
    unregister, unlink the shared memory, stop the lease renewer.
    """

    def __init__(self, target, creds, opts, metadata, timeout, lease_seconds):
        self.target, self.creds, self.opts = target, creds, opts
        self.metadata, self.timeout, self.lease_seconds = metadata, timeout, lease_seconds
        self.channel = None
        self.m = None
        self.ipc_reg = None
        self.pool_ = None
        self.handles = set()
        self.lock = threading.Lock()
        self.renewer = None
        self.closed = False
        self.call_stream = None
        self.prewarm = None

    def methods(self):
        if self.m is None:
            with self.lock:
                if self.m is None:
                    self.channel = _channel.make_channel(self.target, self.creds, self.opts)
                    self.m = _methods(self.channel)
        return self.m

    def rpc(self, name, req, timeout=None):
        try:
            return self.methods()[name](req, timeout=timeout if timeout is not None else self.timeout,
                                        metadata=self.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def ipc(self):
        if self.ipc_reg is None:
            with self.lock:
                if self.ipc_reg is None:
                    self.ipc_reg = IpcRegistry(self.register_ipc, self.unregister)
            self.start_renewer()
        return self.ipc_reg

    def prewarm_shm(self):
        """Client(shm=True): the pool's first segment is created and registered in
        the background, so the first call does not wait for RegisterSharedMemory."""
        def run():
            try:
                p = self.make_pool()
                p.give_back(p.checkout(1))
            except Exception:
                pass  # e.g. client buffers not allowed: the first shm call says so
        self.prewarm = threading.Thread(target=run, name="kerneld-shm-prewarm", daemon=True)
        self.prewarm.start()

    def pool(self):
        t = self.prewarm
        if t is not None:
            t.join()
            self.prewarm = None
        return self.make_pool()

    def make_pool(self):
        if self.pool_ is None:
            with self.lock:
                if self.pool_ is None:
                    self.pool_ = ShmPool(self.register_shm, self.unregister)
            self.start_renewer()
        return self.pool_

    def register_ipc(self, handle, uuid, size, name):
        return self.rpc("RegisterCudaIpcBuffer", pb.RegisterCudaIpcBufferRequest(
            ipc_handle=handle, device_uuid=uuid, byte_size=size, name=name,
            lease_seconds=self.lease_seconds)).buffer_id

    def register_shm(self, seg):
        return self.rpc("RegisterSharedMemory", pb.RegisterSharedMemoryRequest(
            shm_name=seg.name, offset=0, byte_size=seg.size,
            name="python pid %d" % os.getpid(), lease_seconds=self.lease_seconds)).buffer_id

    def unregister(self, buffer_id):
        # Bounded: at exit a daemon that went away must not hang the interpreter.
        return self.rpc("UnregisterBuffer", pb.UnregisterBufferRequest(buffer_id=buffer_id),
                        timeout=5).deferred

    def buffer_ids(self):
        ids = []
        if self.ipc_reg is not None:
            ids += self.ipc_reg.buffer_ids()
        if self.pool_ is not None:
            ids += [s.buffer_id for s in self.pool_.segments()]
        with self.lock:
            ids += [h.buffer_id for h in self.handles]
        return ids

    def start_renewer(self):
        if self.lease_seconds <= 0:
            return
        with self.lock:
            if self.renewer is not None:
                return
            stop = threading.Event()
            self.renewer = stop
        ref = weakref.ref(self)
        period = max(self.lease_seconds / 3.0, 0.05)

        def loop():
            while not stop.wait(period):
                b = ref()
                if b is None or b.closed:
                    return
                for bid in b.buffer_ids():
                    try:
                        b.rpc("RenewLease", pb.RenewLeaseRequest(buffer_id=bid), timeout=10)
                    except Exception:
                        pass  # gone or daemon away: the next request says so
                del b
        threading.Thread(target=loop, name="kerneld-lease-renewer", daemon=True).start()

    def release_handle(self, h):
        with self.lock:
            self.handles.discard(h)
        if h._seg is not None:
            try:
                self.unregister(h.buffer_id)
            finally:
                h._seg.close()
        elif self.ipc_reg is not None:
            self.ipc_reg.release(h.buffer_id)

    def close(self):
        if self.closed:
            return
        if self.prewarm is not None:  # before the pool closes: it may be registering
            self.prewarm.join(10)
        self.closed = True
        if self.renewer is not None:
            self.renewer.set()
        with self.lock:
            hs, self.handles = list(self.handles), set()
        for h in hs:
            h.closed = True
            try:
                self.release_handle(h)
            except Exception:
                pass
        if self.pool_ is not None:
            self.pool_.close()
        if self.ipc_reg is not None:
            self.ipc_reg.close()
        if self.call_stream is not None:
            self.call_stream.close()
        if self.channel is not None:
            self.channel.close()


class _Base:
    """What the sync and asyncio clients share: options, schemas, buffers."""

    def _setup(self, target, timeout, shm, token, tls, tls_ca, tls_cert, tls_key, tls_server_name,
               lb, options, lease_seconds):
        self.target = target
        self.timeout = timeout
        self.use_shm = bool(shm)
        self.token = token
        self.lease_seconds = int(lease_seconds or 0)
        self._metadata = _channel.metadata(token)
        self._creds = _channel.credentials(tls, tls_ca, tls_cert, tls_key)
        self._opts = _channel.channel_options(lb, options, tls_server_name)
        self._schemas = None
        self._schema_lock = threading.Lock()
        self._learned = {}
        self._closed = False
        self._b = _Buffers(target, self._creds, self._opts, self._metadata, timeout, self.lease_seconds)
        if self.use_shm:
            self._b.prewarm_shm()
        # Runs on close(), when the client is collected, or at exit: whichever is first.
        self._finalizer = weakref.finalize(self, self._b.close)

    def _rpc(self, name, req, timeout=None):
        return self._b.rpc(name, req, timeout)

    def _ipc(self):
        return self._b.ipc()

    def _pool(self):
        return self._b.pool()

    @property
    def _ipc_reg(self):
        return self._b.ipc_reg

    @property
    def _shm_pool(self):
        return self._b.pool_

    def _buffer_ids(self):
        return self._b.buffer_ids()

    # ---- schemas ----
    def _set_schemas(self, resp):
        self._schemas = {k.name: OpSchema(k) for k in resp.kernels}

    def _schema_or_none(self, op):
        if self._schemas is None:
            self._load_schemas()
        return self._schemas.get(op)

    # ---- user buffers ----
    def _make_handle(self, obj):
        arg = to_arg("register", "tensor", obj)
        if arg.kind == "cuda":
            arg.synchronize()
            bid, off = self._ipc().resolve(arg, pinned=True)
            h = Handle(self._b, obj, arg, bid, off)
        else:
            seg = Segment(max(align(arg.nbytes), 64))
            try:
                seg.buffer_id = self._b.register_shm(seg)
            except BaseException:
                seg.close()
                raise
            self._b.start_renewer()
            if arg.nbytes:
                seg.buf[:arg.nbytes] = arg.flat
            view = seg.buf[:arg.nbytes]
            if arg.framework == "torch":
                import torch
                t = torch.from_numpy(view)
                arr = t.view(obj.dtype).reshape(obj.shape) if arg.nbytes else torch.empty(obj.shape, dtype=obj.dtype)
            else:
                arr = view.view(arg.arr.dtype).reshape(arg.shape)
            arg2 = to_arg("register", "tensor", arr)
            h = Handle(self._b, arr, arg2, seg.buffer_id, 0, seg)
        with self._b.lock:
            self._b.handles.add(h)
        return h

    def _close_buffers(self):
        self._finalizer()

    def _op_method(self, name, coroutine=False):
        s = self._schemas[name]
        call = self.call

        if coroutine:
            async def method(*args, **kwargs):
                return await call(name, *args, **kwargs)
        else:
            def method(*args, **kwargs):
                return call(name, *args, **kwargs)
        method.__name__ = method.__qualname__ = name
        method.__doc__ = s.docstring()
        method.__signature__ = s.signature()
        return method

    def __dir__(self):
        names = set(super().__dir__())
        if self._schemas:
            names.update(n for n in self._schemas if n.isidentifier())
        return sorted(names)

    def buffers(self, all=False):
        """This client's registered buffers (ListBuffers); all=True: every buffer of the principal."""
        r = self._rpc("ListBuffers", pb.ListBuffersRequest())
        mine = set(self._buffer_ids())
        return [_msg_dict(b) for b in r.buffers if all or b.buffer_id in mine]

    def register(self, obj):
        """Registers a tensor's memory once; returns a Handle usable as an input or out=.

        GPU tensors: their allocation over CUDA IPC (zero copy). Host arrays:
        a new shared-memory region holding a copy (Handle.array is that memory).
        """
        return self._make_handle(obj)


class Client(_Base):
    """A connection to kerneld.

    Client(target="127.0.0.1:50051", timeout=None, shm=False, token=None,
           tls=False, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None,
           lb=None, options=None, lease_seconds=60, rpc=None, spin_us=None)

    target: "host:port", "unix:/path", "dns:///host:port" (with lb="round_robin"
    to spread calls over every address). token: sent as `authorization: Bearer
    TOKEN`. tls_ca / tls_cert / tls_key: PEM paths or bytes (a TLS channel;
    tls=True alone uses the system's roots). shm=True: numpy arrays go through
    a shared-memory pool instead of inline. timeout: seconds per call (each
    call also takes timeout=). Every op is a method (see ops()).
    rpc: how call() reaches the daemon.
      "native" (the default where libkerneld_native is found, see
        docs/python.md): gRPC C++ on the calling thread (no grpcio thread
        hops), each calling thread on an ExecuteStream of its own;
      "native_unary": the same library, one Execute RPC per call (the
        default with lb=);
      "stream" (the default without the library, and without lb=): grpcio,
        every call of this client on one persistent ExecuteStream (reopened
        after a failure), about half the latency of "unary";
      "unary": grpcio, one Execute RPC per call.
    They differ in a call abandoned by its caller (timeout,
    KeyboardInterrupt): the native ones and unary cancel it in the daemon,
    stream leaves it to finish (docs/python.md). With lb= set (other than
    "pick_first") the default is one RPC per call: a stream stays on the one
    daemon it was opened on, so only one RPC per call lets the policy spread
    calls.
    spin_us (the native ones): how long a call busy-polls for its response
    before it sleeps; None (the default) adapts to recent calls (up to
    twice their latency, none once they take over 250 us), 0 never spins.
    A wake-up after sleeping is what a fast call mostly pays on a virtual
    machine; nothing spins while no call is in flight.
    lane: call() through the same-host lane instead of gRPC (docs/lane.md;
      needs libkerneld_native). True: the lane the daemon at `target` serves
      (its --lane_socket, from GetServerInfo); "unix:/path" or "/path": the
      lane at that socket. target must then be the daemon's unix socket (or
      a token be given), so that the buffers registered over gRPC belong to
      the lane's principal. Everything else (ops(), register(), graphs,
      stream(), buffers) still goes over gRPC. spin_us sets the least a
      lane call polls before it sleeps (it adapts upwards).
    lane_fallback: what happens when the lane cannot be had (no lane, the
      library missing, refused): False (the default) raises that error
      (kerneld.Unavailable, ...); True uses gRPC as rpc= says instead, and
      .lane_error keeps why. .transport says which is used: "lane" or "grpc".
    """

    def __init__(self, target="127.0.0.1:50051", timeout=None, shm=False, token=None, tls=False,
                 tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None, lb=None,
                 options=None, lease_seconds=60, rpc=None, spin_us=None, lane=False,
                 lane_fallback=False):
        if not (lane is None or isinstance(lane, bool) or (isinstance(lane, str) and lane)):
            raise invalid_argument("kerneld.Client: lane=%r; True (the daemon's own lane) or its "
                                   "socket, 'unix:/path'" % (lane,))
        lib, why = (None, None)
        if rpc in (None, "native", "native_unary") or lane:
            lib, why = _native.load()
        spread = bool(lb) and lb != "pick_first"
        if rpc is None:
            if lib is not None:
                rpc = "native_unary" if spread else "native"
            else:
                rpc = "unary" if spread else "stream"
        if rpc not in ("native", "native_unary", "stream", "unary"):
            raise invalid_argument("kerneld.Client: rpc=%r; 'native' (libkerneld_native: an "
                             "ExecuteStream per calling thread), 'native_unary' (libkerneld_native: "
                             "one Execute RPC per call), 'stream' (grpcio: one ExecuteStream for "
                             "every call) or 'unary' (grpcio: one Execute RPC per call)" % (rpc,))
        if rpc.startswith("native") and lib is None and not lane:
            raise invalid_argument("kerneld.Client: rpc=%r needs libkerneld_native: %s. Set "
                             "KERNELD_NATIVE_LIB to its path (it is built and installed with the "
                             "daemon, <prefix>/lib), or use rpc='stream'" % (rpc, why))
        self._setup(target, timeout, shm, token, tls, tls_ca, tls_cert, tls_key, tls_server_name,
                    lb, options, lease_seconds)
        self.rpc = rpc
        self._m = self._b.methods()  # one channel serves calls and buffers
        self._ids = itertools.count(1)
        self._calls = None
        self._native = None
        self._buffers_split = False  # True: calls with buffers go over grpcio
        self._plans = _plan.Plans()
        self.transport = "grpc"
        self.lane_error = None
        if lane:
            try:
                self._native = self._open_lane(lane, lib, why, token, spin_us)
            except BaseException as e:
                if not (lane_fallback and isinstance(e, KerneldError)):
                    self.close()
                    raise
                self.lane_error = e
        if self._native is not None:
            self.transport = "lane"
            self._b.call_stream = self._native  # closed with the client's buffers
        elif rpc.startswith("native") and lib is None:
            self.close()
            raise invalid_argument("kerneld.Client: rpc=%r needs libkerneld_native: %s. Set "
                             "KERNELD_NATIVE_LIB to its path (it is built and installed with the "
                             "daemon, <prefix>/lib), or use rpc='stream'" % (rpc, why))
        elif rpc.startswith("native"):
            self._native = _native.NativeCalls(lib, target, self._metadata, tls, tls_ca, tls_cert,
                                               tls_key, tls_server_name, self._opts, spin_us,
                                               stream=(rpc == "native"))
            self._b.call_stream = self._native  # closed with the client's buffers
            # Over TCP without a token or client certificate the daemon may
            # know each connection as its own principal: then the buffers
            # this client registers (over grpcio) are not found over the
            # native library's connection (_grpcio_owns_buffers).
            if not target.startswith("unix") and not self._metadata and not tls_cert:
                self._buffers_split = None  # not asked yet
        elif rpc == "stream":
            # Looked up in self._m when (re)opened, through a weak reference:
            # _Buffers (which closes it) must not keep the client alive.
            ref = weakref.ref(self)
            self._calls = CallStream(lambda it, metadata: ref()._m["ExecuteStream"](it, metadata=metadata),
                                     self._metadata)
            self._b.call_stream = self._calls

    def _open_lane(self, lane, lib, why, token, spin_us):
        """LaneCalls on the lane `lane` names (Client's docstring), or the
        KerneldError that says why there is none."""
        if lib is None:
            raise invalid_argument("kerneld.Client: lane=%r needs libkerneld_native: %s. Set "
                                   "KERNELD_NATIVE_LIB to its path (it is built and installed "
                                   "with the daemon, <prefix>/lib)" % (lane, why))
        missing = _lane.declare(lib)
        if missing:
            raise invalid_argument("kerneld.Client: lane=%r: %s" % (lane, missing))
        if spin_us is not None and (not isinstance(spin_us, (int, float)) or spin_us < 0):
            raise invalid_argument("kerneld.Client: spin_us=%r; None (adapts), 0 or a number of "
                                   "microseconds" % (spin_us,))
        if not self.target.startswith("unix") and not token:
            raise invalid_argument(
                "kerneld.Client: lane=%r with target %s: the lane's principal is this process's "
                "uid, gRPC's on a TCP target is anonymous, so buffers registered there are not "
                "the lane's; give the daemon's unix socket as target (or a token)" %
                (lane, self.target))
        if lane is True:
            path = self._rpc("GetServerInfo", pb.GetServerInfoRequest()).lane_socket
            if not path:
                raise error_for(grpc.StatusCode.UNAVAILABLE,
                                "kerneld: the daemon at %s serves no lane (it runs without "
                                "--lane_socket=PATH; docs/lane.md)" % self.target)
        else:
            path = lane
        return _lane.LaneCalls(lib, path, token, spin_us)

    def _load_schemas(self):
        with self._schema_lock:
            if self._schemas is None:
                self._set_schemas(self._rpc("ListKernels", pb.ListKernelsRequest()))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._schemas is None:
            self._load_schemas()
        if name not in self._schemas:
            raise AttributeError("kerneld.Client has no attribute or op '%s'; ops: %s" %
                                 (name, ", ".join(sorted(self._schemas))))
        m = self._op_method(name)
        object.__setattr__(self, name, m)
        return m

    # ---- the service ----
    def info(self):
        """GetServerInfo as a dict: version, devices, backends, cuda_status, ..."""
        return _msg_dict(self._rpc("GetServerInfo", pb.GetServerInfoRequest()))

    def ops(self, refresh=False):
        """The names of the ops this daemon serves (ListKernels)."""
        if refresh or self._schemas is None:
            self._schemas = None
            self._load_schemas()
        return sorted(self._schemas)

    def describe(self, op):
        """One op's schema (ListKernels): doc, inputs, outputs, attrs, implementations."""
        return _msg_dict(self._rpc("ListKernels", pb.ListKernelsRequest(name=op)).kernels[0])

    def health(self, service=""):
        """True when the daemon (or `service`, e.g. "kerneld.device/cuda:0") is SERVING."""
        try:
            raw = self._m["Health"](_channel.health_request(service), timeout=self.timeout or 10,
                                    metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return False
            raise from_rpc_error(e) from None
        return _channel.health_status(raw) == 1

    def call(self, op, *args, **kwargs):
        """Runs `op`: inputs positionally (schema order) or by name, attrs by name.

        Keywords: out= (a tensor, or a tuple/dict for several outputs),
        backend=, device=, via="inline"|"shm", timeout=, return_info=True
        (returns (result, info)).
        """
        pk = None
        if self._native is not None:
            # A call like an earlier one sends that one's request bytes (_plan.py).
            pk = _plan.key(self, op, args, kwargs)
            if pk is not None:
                plan = self._plans.get(pk[0], pk[3])
                if plan is _plan.NO_PLAN:
                    pk = None
                elif plan is not None:
                    r = plan.run(self, self._native, pk[1])
                    if r is not _plan.MISS:
                        self._plans.hits += 1
                        return r
        if pk is not None:  # Prepared takes the call keywords out of kwargs
            given = (kwargs.get("timeout", _plan.UNSET), bool(kwargs.get("return_info", False)))
        p = Prepared(self, op, args, kwargs, keep_parts=pk is not None)
        native = self._native
        if native is not None and self._buffers_split is not False and _references_buffers(p.req) \
                and self._grpcio_owns_buffers():
            native = pk = None  # over the connection that registered the buffers
        try:
            if native is not None:
                resp = pb.ExecuteResponse.FromString(native.execute(p.req, p.timeout))
            elif self._calls is not None:
                resp = self._calls.execute(p.req, p.timeout, p.detach)
            else:
                resp = self._m["Execute"](p.req, timeout=p.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            err = from_rpc_error(e)
            p.failed(err.code)
            raise err from None
        except KerneldError as e:  # the native ones
            p.failed(e.code)
            raise
        except BaseException:  # KeyboardInterrupt: the call was cancelled, maybe mid-run
            p.retire()
            raise
        result = p.complete(resp)
        if pk is not None:
            plan = _plan.make(p, pk[2], *given)
            if plan is not None:
                self._plans.put(pk[0], plan)
        return result

    def _grpcio_owns_buffers(self):
        """True when the daemon knows grpcio's connection as a principal of
        its own (GetServerInfo.principal_is_connection: plaintext TCP
        without a token), so that the buffers registered over it are found
        over no other connection; asked once."""
        if self._buffers_split is None:
            try:
                info = self._rpc("GetServerInfo", pb.GetServerInfoRequest())
                # A daemon that does not say who the caller is: assume so.
                split = info.principal_is_connection or not info.principal
            except KerneldError:
                split = True  # the call itself will say what is wrong
            self._buffers_split = split
        return self._buffers_split

    # ---- user kernels (docs/user-kernels.md) ----
    def register_kernel(self, source, entry=None, spec=None, name=None, replace=False, arch=None,
                        compile_options=None, timeout=None):
        """Registers CUDA `source` as an op and returns its method, called like a built-in's.

        spec: a dict (or its JSON) of RegisterKernelRequest's fields: name,
        inputs, outputs, attrs, launch, options, doc (dtypes by name,
        "float32"), as kernelctl's spec files; entry (or the spec's "entry",
        else the name) is the __global__ function. The daemon compiles it
        with NVRTC: a compile error is InvalidArgument carrying the log; a
        built-in's name, or your own without replace=True, AlreadyExists.
        The method's .registration is the answer as a dict (owner,
        compile_log, resources per arch, cache_hit, compile_seconds).
        """
        req = _user_kernels.register_request(source, entry, spec if spec is not None else {},
                                             name, replace, arch, compile_options)
        resp = self._rpc("RegisterKernel", req, timeout)
        _user_kernels.forget(self, req.name)
        self._load_schemas()
        return _user_kernels.op_method(self, req, resp)

    def unregister_kernel(self, name, timeout=None):
        """Removes your user kernel `name` (NotFound when you have none)."""
        self._rpc("UnregisterKernel", _user_kernels.unregister_request(name), timeout)
        _user_kernels.forget(self, name)

    def list_user_kernels(self, all_principals=False, timeout=None):
        """Your user kernels as dicts (kernel: the schema, owner, entry, launch, resources,
        source_sha256, calls, faults); all_principals=True: everyone's (admins)."""
        return _user_kernels.kernel_list(
            self._rpc("ListUserKernels", _user_kernels.list_request(all_principals), timeout))

    def evaluate_kernel(self, name, against, shapes, dtype="float32", attrs=None, iterations=0,
                        seed=0, device="", timeout=None):
        """Runs user kernel `name` and built-in op `against` on the same random inputs (on a GPU).

        shapes: {input: shape}, or one shape for the op's first input. Returns
        a dict: errors (per output: max_abs_error, max_rel_error against the
        float64 reference, and the built-in's own), user_us, builtin_us and
        copy_us (median of `iterations` runs, L2 read-flushed, as
        kernel_bench times), builtin_backend, device, iterations. A daemon
        without a GPU raises FailedPrecondition once the request checks out.
        """
        req = _user_kernels.evaluate_request(
            name, against, shapes, lambda: self.describe(against)["inputs"][0]["name"], dtype,
            attrs, iterations, seed, device)
        return _msg_dict(self._rpc("EvaluateKernel", req, timeout))

    def graph(self, device=""):
        """A Graph: steps recorded as g.<op>(...), run as one ExecuteGraph by g.run() (_graph.py)."""
        from ._graph import Graph
        return Graph(self, device)

    def stream(self):
        """A Stream on one ExecuteStream: submit() pipelines requests; use as a context manager."""
        return Stream(self)

    def close(self):
        """Unregisters this client's buffers, unlinks its shared memory, closes the channel."""
        if self._closed:
            return
        self._closed = True
        self._close_buffers()  # closes the channel too

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<kerneld.Client %s>" % self.target


_END = object()


class Stream:
    """Requests pipelined on one ExecuteStream; responses arrive in completion order.

    with c.stream() as s:
        futs = [s.submit("scale", x=x, factor=2.0) for x in xs]
    ys = [f.result() for f in futs]

    submit() returns a concurrent.futures.Future at once; a failed request
    fails its future (a KerneldError) and the stream goes on. Leaving the
    block waits for every response.
    """

    def __init__(self, client):
        self._c = client
        self._q = queue.SimpleQueue()
        self._pending = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._call = client._m["ExecuteStream"](iter(self._q.get, _END), metadata=client._metadata)
        self._reader = threading.Thread(target=self._read, name="kerneld-stream-reader", daemon=True)
        self._reader.start()

    def submit(self, op, *args, **kwargs):
        if self._closed:
            raise RuntimeError("kerneld: submit() on a closed stream")
        rid = "py-%d" % next(self._ids)
        kwargs.pop("timeout", None)  # the stream has one deadline: none
        p = Prepared(self._c, op, args, kwargs, request_id=rid)
        f = concurrent.futures.Future()
        f.set_running_or_notify_cancel()
        with self._lock:
            self._pending[rid] = (p, f)
        self._q.put(p.req)
        return f

    def _read(self):
        err = None
        try:
            for resp in self._call:
                with self._lock:
                    p, f = self._pending.pop(resp.request_id, (None, None))
                if f is not None:
                    p.settle(resp, f)
        except grpc.RpcError as e:
            err = from_rpc_error(e)
        with self._lock:
            left, self._pending = list(self._pending.values()), {}
        for p, f in left:
            p.release()
            f.set_exception(err or error_for(grpc.StatusCode.UNAVAILABLE,
                                             "the stream ended before this request's response"))

    def close(self):
        """Ends the stream and waits for every response."""
        if not self._closed:
            self._closed = True
            self._q.put(_END)
        self._reader.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
