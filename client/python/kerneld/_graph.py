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
        if isinstance(obj, Handle):
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

    def output(self, name, value):
        """Declares a graph output: run() then returns a dict by these names."""
        self._req.outputs.add(name=name, source=value.binding)
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
