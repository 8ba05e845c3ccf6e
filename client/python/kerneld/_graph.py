"""client.graph(): many kernels in one call (ExecuteGraph, docs/graphs.md).

    with client.graph() as g:
        h = g.rmsnorm(x, w)          # x, w: numpy arrays (sent inline) or Handles (buffers)
        y = g.silu_and_mul(h)        # h: a step's output, kept in the daemon
        out = g.run()                # numpy: the last step's output (a dict when it has several)

Steps take inputs positionally (schema order) or by name and attrs by
name, as client.<op>() does; an op with several outputs returns a tuple of
them. g.output(name, value) declares what run() returns (a dict by name);
without it run() returns the last step's outputs. Nothing runs before run(),
and the whole graph is validated by the daemon before any step runs.

Results come back as the inputs went in, as with client.<op>(): numpy for
numpy inputs, torch tensors for torch ones; GPU tensors (torch, cupy) are
referenced over CUDA IPC, not copied, and the results are put on their
device.

Device memory that kerneld allocates and keeps (AllocateBuffer), such as a
model's weights, is a ServerBuffer: a graph input by reference, or where
g.output(name, value, buffer=...) writes:

    w = ServerBuffer.allocate(client, "cuda:0", "bfloat16", (28672, 4096))
    h = g.gemm(x, w, transpose_b=True)

On the asyncio client (kerneld.aio) the graph is recorded the same way and
run with `await g.run()`; `s.submit_graph(g)` sends it as one message of a
stream (ExecuteStream), between plain calls:

    async with c.graph() as g:
        y = g.silu_and_mul(g.rmsnorm(x, w))
        out = await g.run()
    async with c.stream() as s:
        f = s.submit_graph(g)        # an asyncio.Future of what run() returns
"""
import numpy as np

from ._proto import kerneld_pb2 as pb
from ._errors import error_for, invalid_argument
from ._schema import attr_python  # noqa: F401  (the attr rules are the schema's)
from ._tensors import to_arg, host_from_bytes, _cupy


class Value:
    """A step's output inside a graph: pass it to later steps."""

    def __init__(self, graph, binding, shape_hint=None):
        self.graph, self.binding = graph, binding

    def __repr__(self):
        return "<kerneld graph value %s>" % self.binding


def _set_attr(av, v):
    if isinstance(v, bool):
        av.b = v
    elif isinstance(v, (int, np.integer)):
        av.i = int(v)
    elif isinstance(v, (float, np.floating)):
        av.f = float(v)
    elif isinstance(v, str):
        av.s = v
    else:
        raise invalid_argument("graph attr of type %s; attrs are float, int, bool or str"
                               % type(v).__name__)


_ITEM = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8,
         "int8": 1, "uint8": 1, "bool": 1}


class ServerBuffer:
    """A tensor in device memory kerneld allocated (AllocateBuffer): a graph
    input by reference, or a graph output's destination. free() (or the
    end of a `with` block) unregisters it; the memory goes when the last
    request using it has finished."""

    def __init__(self, client, buffer_id, dtype, shape, offset=0, owner=True):
        self._client, self.buffer_id = client, buffer_id
        self.dtype, self.shape, self.offset = dtype, tuple(int(s) for s in shape), int(offset)
        self._owner = owner

    @classmethod
    def allocate(cls, client, device, dtype, shape, name=""):
        """A new buffer of `dtype` (a name: "bfloat16") and `shape` on `device` ("cuda:0")."""
        if dtype not in _ITEM:
            raise invalid_argument("ServerBuffer: unknown dtype %r (%s)" % (dtype, ", ".join(_ITEM)))
        n = _ITEM[dtype]
        for d in shape:
            n *= int(d)
        b = client._b
        b.methods()  # the buffers' channel
        allocate = b.channel.unary_unary(
            "/kerneld.v1.BufferService/AllocateBuffer",
            request_serializer=pb.AllocateBufferRequest.SerializeToString,
            response_deserializer=pb.AllocateBufferResponse.FromString)
        try:
            resp = allocate(pb.AllocateBufferRequest(device=device, byte_size=n, name=name),
                            timeout=b.timeout, metadata=b.metadata)
        except Exception as e:  # grpc.RpcError: the client's error types
            from ._errors import from_rpc_error
            raise from_rpc_error(e) from None
        return cls(client, resp.buffer_id, dtype, shape)

    def view(self, dtype, shape, offset=0):
        """The same memory as another dtype and shape from byte `offset` (not owning it)."""
        return ServerBuffer(self._client, self.buffer_id, dtype, shape, self.offset + offset,
                            owner=False)

    @property
    def nbytes(self):
        n = _ITEM[self.dtype]
        for d in self.shape:
            n *= d
        return n

    def free(self):
        if self._owner and self.buffer_id:
            self._client._b.unregister(self.buffer_id)
            self.buffer_id = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False


class Graph:
    def __init__(self, client, device=""):
        self._c = client
        self._req = pb.ExecuteGraphRequest(device=device)
        self._inputs = {}  # id(obj) -> name: one graph input per object
        self._keep = []    # the objects sent, alive until run()
        self._outputs_declared = False
        self._fw = None    # the first host input's framework ("numpy", "torch")
        self._cuda = []    # the GPU inputs (CudaArgs), synchronized before each run

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _input(self, where, name, obj):
        from ._client import Handle
        key = id(obj)
        if key in self._inputs:
            return self._inputs[key]
        gname = "in%d" % len(self._inputs)
        t = self._req.inputs[gname]
        if isinstance(obj, ServerBuffer):
            t.dtype = pb.DType.Value("DTYPE_" + obj.dtype.upper())
            t.shape.extend(obj.shape)
            t.buffer.buffer_id = obj.buffer_id
            t.buffer.offset = obj.offset
        elif isinstance(obj, Handle):
            t.dtype = obj._arg.dtype
            t.shape.extend(int(s) for s in obj._arg.shape)
            t.buffer.buffer_id = obj.buffer_id
            t.buffer.offset = obj.offset
        else:
            arg = to_arg(where, name, obj)
            t.dtype = arg.dtype
            t.shape.extend(int(s) for s in arg.shape)
            if arg.kind == "cuda":
                # By reference, as client.<op>() sends it: its allocation
                # registered once (CUDA IPC), the producing stream synchronized
                # before each run.
                if arg.nbytes == 0:
                    t.inline_data = b""
                else:
                    t.buffer.buffer_id, t.buffer.offset = self._c._ipc().resolve(arg)
                    self._cuda.append(arg)
            else:
                if self._fw is None:
                    self._fw = arg.framework
                t.inline_data = arg.tobytes()
        self._inputs[key] = gname
        self._keep.append(obj)
        return gname

    def __getattr__(self, op):
        if op.startswith("_"):
            raise AttributeError(op)
        schema = self._c._schema_or_none(op)
        if schema is None:
            raise AttributeError("kerneld graph: no op '%s'; ops: %s"
                                 % (op, ", ".join(sorted(self._c._schemas or ()))))

        def step(*args, **kwargs):
            return self.step(op, *args, **kwargs)
        step.__name__ = op
        return step

    def step(self, op, *args, **kwargs):
        """Appends a step of `op`; returns its output (a tuple for several)."""
        schema = self._c._schema_or_none(op)
        if schema is None:
            raise invalid_argument("kerneld graph: unknown op '%s'" % op)
        name = kwargs.pop("name", "")
        backend = kwargs.pop("backend", "")
        if len(args) > len(schema.inputs):
            raise invalid_argument("%s takes %d inputs (%s); %d given" % (
                op, len(schema.inputs), ", ".join(schema.inputs), len(args)))
        bound = dict(zip(schema.inputs, args))
        for k in list(kwargs):
            if k in schema.inputs:
                bound[k] = kwargs.pop(k)
        s = self._req.steps.add(op=op, name=name, backend=backend)
        index = len(self._req.steps) - 1
        sname = name or "step%d" % index
        for k, v in bound.items():
            s.inputs[k] = v.binding if isinstance(v, Value) else self._input(op, k, v)
        for k, v in kwargs.items():
            _set_attr(s.attrs[k], v)
        outs = [Value(self, "%s.%s" % (sname, o.name)) for o in schema.info.outputs]
        self._last = outs
        return outs[0] if len(outs) == 1 else tuple(outs)

    def output(self, name, value, buffer=None):
        """Declares a graph output: run() then returns a dict by these names.
        buffer (a ServerBuffer or a Handle): written there instead of returned."""
        o = self._req.outputs.add(name=name, source=value.binding)
        if buffer is not None:
            o.buffer.buffer_id = buffer.buffer_id
            o.buffer.offset = buffer.offset
        self._outputs_declared = True

    @property
    def request(self):
        """The ExecuteGraphRequest built so far."""
        return self._req

    def run(self, timeout=None, return_info=False):
        """Sends the graph (ExecuteGraph); its results (see the module doc)."""
        self._before_send()
        return self._results(self._c._rpc("ExecuteGraph", self._req, timeout), return_info)

    # ---- shared by run(), the asyncio client and streams ----
    def _before_send(self):
        # The GPU inputs' producers finish before the daemon reads them: once
        # per framework and device, as client.<op>() does.
        seen = set()
        for a in self._cuda:
            if (a.framework, a.device) not in seen:
                seen.add((a.framework, a.device))
                a.synchronize()

    def _value(self, t):
        """An inline output as the caller's kind of array."""
        if not self._cuda:
            return host_from_bytes(t.inline_data, list(t.shape), t.dtype, self._fw or "numpy")
        first = self._cuda[0]
        host = host_from_bytes(t.inline_data, list(t.shape), t.dtype,
                               "torch" if first.framework == "torch" else "numpy")
        if first.framework == "torch":
            return host.to("cuda:%d" % first.device)
        cp = _cupy()
        if cp is None:
            return host
        with cp.cuda.Device(first.device):
            return cp.asarray(host)

    def _results(self, resp, return_info):
        """What run() returns, from an ExecuteGraphResponse."""
        out = {k: self._value(t) for k, t in resp.outputs.items()
               if t.WhichOneof("data") != "buffer"}
        if not self._outputs_declared:
            names = [v.binding.split(".", 1)[1] for v in self._last]
            out = out[names[0]] if len(names) == 1 else tuple(out[n] for n in names)
        if return_info:
            return out, {"backend": resp.info.backend, "device": resp.info.device,
                         "total_ns": resp.info.total_ns, "execute_ns": resp.info.execute_ns,
                         "intermediate_bytes": resp.intermediate_bytes}
        return out

    def _stream_message(self, request_id, return_info=False):
        """This graph as one ExecuteStream message, and what settles its
        answer into a future (the streams' pending entries)."""
        self._before_send()
        req = pb.ExecuteRequest(request_id=request_id)
        req.graph.CopyFrom(self._req)
        return req, _StreamAnswer(self, return_info)


class _StreamAnswer:
    """A graph message's answer (ExecuteResponse.graph) into its future, as
    Prepared.settle does for a call."""

    def __init__(self, graph, return_info):
        self.graph, self.return_info = graph, return_info

    def settle(self, resp, fut):
        if fut.done():  # cancelled by its caller
            return
        try:
            if resp.status.code:
                raise error_for(resp.status.code, resp.status.message)
            fut.set_result(self.graph._results(resp.graph, self.return_info))
        except BaseException as e:
            fut.set_exception(e)

    def release(self):
        pass  # a graph holds no shared-memory segment


class AioGraph(Graph):
    """A Graph of the asyncio client: recorded the same way, run with
    `await g.run()`; usable with `with` or `async with`."""

    async def run(self, timeout=None, return_info=False):
        """Sends the graph (ExecuteGraph); its results (see the module doc)."""
        self._before_send()
        return self._results(await self._c._arpc("ExecuteGraph", self._req, timeout), return_info)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False
