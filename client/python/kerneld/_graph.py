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

Device memory that kerneld allocates and keeps (AllocateBuffer), such as a
model's weights, is a ServerBuffer: a graph input by reference, or where
g.output(name, value, buffer=...) writes:

    w = ServerBuffer.allocate(client, "cuda:0", "bfloat16", (28672, 4096))
    h = g.gemm(x, w, transpose_b=True)
"""
import numpy as np

from ._proto import kerneld_pb2 as pb
from ._errors import invalid_argument
from ._schema import attr_python  # noqa: F401  (the attr rules are the schema's)
from ._tensors import to_arg, host_from_bytes


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
            if arg.kind != "host":
                raise invalid_argument("%s: '%s': a graph takes host arrays inline, or Handles "
                                       "(client.register) for device memory" % (where, name))
            t.dtype = arg.dtype
            t.shape.extend(int(s) for s in arg.shape)
            t.inline_data = arg.tobytes()
        self._inputs[key] = gname
        self._keep.append(obj)
        return gname

    def __getattr__(self, op):
        if op.startswith("_"):
            raise AttributeError(op)
        schema = self._c._schema_or_none(op)
        if schema is None:
            raise AttributeError("kerneld graph: no op '%s'; ops: %s" % (op, ", ".join(self._c.ops())))

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
        """Sends the graph; numpy results (see the module doc)."""
        resp = self._c._rpc("ExecuteGraph", self._req, timeout)
        out = {k: host_from_bytes(t.inline_data, list(t.shape), t.dtype, "numpy")
               for k, t in resp.outputs.items() if t.WhichOneof("data") != "buffer"}
        if not self._outputs_declared:
            names = [v.binding.split(".", 1)[1] for v in self._last]
            out = out[names[0]] if len(names) == 1 else tuple(out[n] for n in names)
        if return_info:
            return out, {"backend": resp.info.backend, "device": resp.info.device,
                         "total_ns": resp.info.total_ns, "execute_ns": resp.info.execute_ns,
                         "intermediate_bytes": resp.intermediate_bytes}
        return out
