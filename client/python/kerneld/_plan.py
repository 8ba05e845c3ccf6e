"""Call plans: a repeated call's request, built once.

A decode loop calls the same op on tensors of the same shapes again and
again. The generic path (Prepared) derives everything anew each time: names,
schema checks, output shapes, a protobuf message. On the GPU host that took
17 us a call for numpy inline and 40 us for torch over CUDA IPC, most of what
Python added over kernelctl's stream (H200, 2026-11-26, commit e8f7630;
docs/history/performance-2026-11.md).

A plan is made from a call that succeeded on the generic path. Its key holds
everything that decided that request: the op, each tensor's kind, dtype,
shape and contiguity (a GPU tensor's address too), the attrs'
types and values, and the call keywords; the plan also keeps the schema it
was made with and is used only while the client still has that schema. A
later call with the same key sends the plan's bytes: constant, but for the
host inputs' data (appended as they are) and the outputs the client
allocates (encoded per call).

GPU tensors are checked before every send, as the generic path checks them:
the allocation at each address must be the one registered (its CUDA buffer
id, unique per allocation) and its registration still live. When not, the
call takes the generic path, which registers the allocation again and
replaces the plan. The producing stream is synchronized on every call.

Plans hold no tensors (addresses, shapes and registrations only), so a call
keeps nothing alive. Only the native calls (rpc="native", "native_unary")
use plans: their requests travel as bytes.
"""
import threading

import numpy as np

from ._proto import kerneld_pb2 as pb
from ._tensors import CudaArg, host_from_bytes, sync_torch_stream, _torch
from ._errors import error_for
from . import _cuda

MAX_PLANS = 256   # keys are per shape and attr value: a bound, not a cache of everything
MISS = object()   # Plan.run: a check failed; take the generic path
NO_PLAN = object()  # a key whose calls cannot use a plan (mixed kinds, shm, ...)

_CALL_KW = frozenset(("timeout", "return_info", "backend", "device"))
_SCALARS = (float, int, bool, str, type(None))
UNSET = object()  # no timeout= in the call: the client's, read when it runs

# ExecuteRequest's map fields and the wire tags of the bytes we append.
_INPUTS, _OUTPUTS = 2, 3


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _entry(field, name, tensor):
    """One entry of ExecuteRequest's map<string, Tensor> `field`, serialized."""
    key = name.encode()
    body = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(len(tensor)) + tensor
    return bytes([field << 3 | 2]) + _varint(len(body)) + body


def inline_prefix(field, name, dtype, shape, nbytes):
    """An inline tensor's map entry up to its data: prefix + nbytes of data
    is the whole entry (every length in it is known from nbytes)."""
    head = pb.Tensor(dtype=dtype, shape=shape).SerializeToString() + b"\x1a" + _varint(nbytes)
    tlen = len(head) + nbytes
    key = name.encode()
    body_len = 1 + len(_varint(len(key))) + len(key) + 1 + len(_varint(tlen)) + tlen
    return (bytes([field << 3 | 2]) + _varint(body_len) + b"\x0a" + _varint(len(key)) + key +
            b"\x12" + _varint(tlen) + head)


def _sig(v, torch):
    """What a tensor contributes to a key; None: not one a plan takes."""
    t = type(v)
    if t is np.ndarray:
        return (0, v.dtype, v.shape, v.flags.c_contiguous)
    if torch is not None and t is torch.Tensor and v.is_cuda:
        # No device: a CUDA address (unified addressing) names its device.
        return (1, v.dtype, v.shape, v.data_ptr(), v.is_contiguous())
    return None


def key(client, op, args, kwargs):
    """(key, tensors, their roles, the op's schema) of a call, or None when it
    cannot use a plan.

    Roles are ("in", name) or ("out", name), parallel to the tensors.
    Anything unusual (Handles, shm, unknown keywords, out= shapes the
    generic path would refuse) is left to the generic path, which has the
    error messages."""
    if client.use_shm:
        return None
    schema = client._schema_or_none(op)
    if schema is None or len(args) > len(schema.inputs):
        return None
    torch = _torch()
    parts, objs, roles = [op], [], []
    for n, v in zip(schema.inputs, args):
        s = _sig(v, torch)
        if s is None:
            return None
        parts.append(s)
        objs.append(v)
        roles.append(("in", n))
    for k, v in kwargs.items():
        if k == "out":
            outs = _out_names(schema, v)
            if outs is None:
                return None
            parts.append("out")
            for n, o in outs:
                s = _sig(o, torch)
                if s is None:
                    return None
                parts.append((n, s))
                objs.append(o)
                roles.append(("out", n))
        elif k in schema.input_dtypes:
            s = _sig(v, torch)
            if s is None or ("in", k) in roles:
                return None
            parts.append((k, s))
            objs.append(v)
            roles.append(("in", k))
        elif k == "via":
            if v != "inline":
                return None
            parts.append((k, v))
        elif k in _CALL_KW or k in schema.attr_specs:
            t = type(v)
            if t not in _SCALARS:
                return None
            # A float by its bits: -0.0 == 0.0 (and NaN != NaN) as values.
            parts.append((k, t, v.hex() if t is float else v))
        else:
            return None
    return tuple(parts), objs, roles, schema


def _out_names(schema, out):
    """[(output name, tensor)] for out=, or None where the generic path decides."""
    if out is None:
        return []
    if isinstance(out, dict):
        items = list(out.items())
    elif isinstance(out, (tuple, list)):
        if len(out) != len(schema.outputs):
            return None
        items = [(n, v) for n, v in zip(schema.outputs, out) if v is not None]
    else:
        free = [o for o in schema.outputs if o not in schema.in_place_of]
        if len(free) != 1:
            return None
        items = [(free[0], out)]
    if any(n not in schema.outputs or n in schema.in_place_of for n, _ in items):
        return None
    return items


class Plan:
    """The request bytes of one key, and how a response becomes the result."""

    __slots__ = ("op", "schema", "const", "pieces", "checks", "allocs", "syncs", "results",
                 "timeout", "return_info", "registry")

    def run(self, client, native, objs):
        """The call's result; MISS when a GPU check fails (nothing was sent)."""
        for ptr, cu_id, entry in self.checks:  # one per registration
            if _cuda.buffer_id_at(ptr) != cu_id or not self.registry.current(entry):
                return MISS
        allocated = []
        parts = [self.const]
        for i, prefix in self.pieces:
            parts.append(prefix)
            parts.append(objs[i])  # a C-contiguous array: its buffer, copied once by join
        if self.allocs:
            torch = _torch()
            ipc = client._ipc()
            for name, shape, tdt, dt, nbytes, dev in self.allocs:
                t = torch.empty(shape, dtype=tdt, device=dev)
                bid, off = ipc.resolve(CudaArg(name, t, t.data_ptr(), nbytes, dt, shape, "torch", None))
                ref = pb.Tensor(dtype=dt, shape=shape, buffer=pb.BufferRef(buffer_id=bid, offset=off))
                parts.append(_entry(_OUTPUTS, name, ref.SerializeToString()))
                allocated.append(t)
        for dev, ctx in self.syncs:
            sync_torch_stream(dev, ctx)
        timeout = client.timeout if self.timeout is UNSET else self.timeout
        resp = pb.ExecuteResponse.FromString(native.execute_bytes(b"".join(parts), timeout))
        st = resp.status
        if st.code:
            raise error_for(st.code, st.message)
        vals = []
        for kind, o, i in self.results:
            if kind == "obj":
                vals.append(objs[i])
            elif kind == "alloc":
                vals.append(allocated[i])
            elif kind == "copy":
                vals.append(_copy_into(self.op, resp, o, objs[i]))
            else:
                t = resp.outputs[o]
                vals.append(None if t.WhichOneof("data") == "buffer" else
                            host_from_bytes(t.inline_data, tuple(t.shape), t.dtype, "numpy"))
        result = vals[0] if len(vals) == 1 else tuple(vals)
        if self.return_info:
            from ._core import info_dict
            return result, info_dict(resp.info)
        return result

    def request_bytes(self, objs):
        """The request a call with these tensors sends (host and placed tensors
        only; for tests, which compare it with the generic path's)."""
        parts = [self.const]
        for i, prefix in self.pieces:
            parts += [prefix, objs[i]]
        return b"".join(parts)


def _copy_into(op, resp, o, arr):
    data = resp.outputs[o].inline_data
    if len(data) != arr.nbytes:
        raise error_for(13, "%s: output '%s' came back with %d bytes, expected %d" %
                        (op, o, len(data), arr.nbytes))
    if arr.nbytes:
        arr.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, dtype=np.uint8)
    return arr


def make(p, roles, timeout, return_info):
    """A Plan from Prepared `p` (made with keep_parts=True, its call answered);
    NO_PLAN when its kind of call is not one a plan covers; None when a later
    call of the key may make one. timeout: the call's timeout= or UNSET."""
    parts, p._parts = p._parts, None
    if parts is None or p.seg is not None or p.schema is None:
        return NO_PLAN
    ins, out_args, alloc_outs, refs, cuda_kind = parts
    schema = p.schema
    where = {r: i for i, r in enumerate(roles)}
    args = list(ins.items()) + list(out_args.items())
    want = "cuda" if cuda_kind else "host"
    if any(a.kind != want or a.framework != ("torch" if cuda_kind else "numpy") for _, a in args):
        return NO_PLAN
    plan = Plan()
    plan.op, plan.schema = p.op, schema
    plan.timeout, plan.return_info = timeout, return_info
    plan.registry = None
    plan.pieces, plan.checks, plan.allocs, plan.syncs, plan.results = [], [], [], [], []
    req = pb.ExecuteRequest()
    req.CopyFrom(p.req)
    if not cuda_kind:
        for n, a in ins.items():
            del req.inputs[n]
            plan.pieces.append((where[("in", n)],
                                inline_prefix(_INPUTS, n, a.dtype, a.shape, a.nbytes)))
    else:
        plan.registry = p.client._ipc()
        entries = set()
        for a in list(ins.values()) + list(out_args.values()):
            e = getattr(a, "ipc_entry", None)
            if refs.get(id(a)) is None or e is None:
                return NO_PLAN  # an empty tensor: declared without data
            # One check a registration: tensors at fixed offsets of one
            # allocation are all in it when the allocation is the same one.
            if id(e) not in entries:
                entries.add(id(e))
                plan.checks.append((a.ptr, e.cu_id, e))
            if (a.device, a.context) not in plan.syncs:
                plan.syncs.append((a.device, a.context))
        for o, a in alloc_outs.items():
            del req.outputs[o]
            plan.allocs.append((o, a.shape, a.obj.dtype, a.dtype, a.nbytes, a.obj.device))
            if (a.device, a.context) not in plan.syncs:
                plan.syncs.append((a.device, a.context))
    alloc_index = {o: i for i, o in enumerate(alloc_outs)}
    for o in schema.outputs:
        src = schema.in_place_of.get(o)
        if src is not None:
            if src not in ins:
                continue  # never declared; the generic path returns nothing for it
            plan.results.append(("copy" if not cuda_kind else "obj", o, where[("in", src)]))
        elif o in out_args:
            plan.results.append(("copy" if not cuda_kind else "obj", o, where[("out", o)]))
        elif o in alloc_index:
            plan.results.append(("alloc", o, alloc_index[o]))
        elif not cuda_kind:
            plan.results.append(("new", o, None))
        else:
            # A GPU call whose output came back inline: its shape had no rule.
            # The client learns it from this response, and the next call
            # allocates it; that call makes the plan.
            return None
    plan.const = req.SerializeToString()
    return plan


class Plans:
    """A client's plans, by key; bounded (the oldest goes first)."""

    def __init__(self):
        self._d = {}
        self._lock = threading.Lock()
        self._off = False
        self.hits = 0  # calls a plan served (tests read it)

    def disable(self):
        """No plans from now on (benchmarks compare the generic path)."""
        with self._lock:
            self._off = True
            self._d.clear()

    def get(self, k, schema):
        p = self._d.get(k)
        if p is not None and p is not NO_PLAN and p.schema is not schema:
            return None  # the client reloaded its schemas: make it again
        return p

    def put(self, k, plan):
        with self._lock:
            if self._off:
                return
            if len(self._d) >= MAX_PLANS and k not in self._d:
                self._d.pop(next(iter(self._d)))
            self._d[k] = plan

    def __len__(self):
        return len(self._d)
