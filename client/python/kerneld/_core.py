"""One call's request and the decoding of its response, shared by the sync
client, its streams and the asyncio client."""

import grpc
import numpy as np

from ._proto import kerneld_pb2 as pb
from ._schema import attr_value
from ._shm import align
from ._tensors import (to_arg, empty_like_kind, host_from_bytes,
                       numpy_dtype, _torch, _cupy)
from ._errors import error_for, invalid_argument, invalid_argument_count

# A unary call that ended with these may still be running in the daemon: its
# shared-memory segment is retired, never reused (ShmPool.retire).
_MAY_RUN_ON = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)

CALL_KEYWORDS = ("out", "backend", "device", "via", "timeout", "return_info")


class BufArg:
    """An input or output given as a registered Handle: referenced, never copied."""
    def __init__(self, handle):
        self.handle = handle
        a = handle._arg
        self.kind = "buffer"
        self.base_kind = a.kind
        self.obj, self.name, self.dtype, self.shape = handle.obj, a.name, a.dtype, a.shape
        self.nbytes, self.framework, self.device = a.nbytes, a.framework, a.device
        self.buffer_id, self.offset = handle.buffer_id, handle.offset
        self.arr = getattr(a, "arr", None)


class ServerBufArg:
    """An input or output given as a ServerBuffer (memory kerneld allocated,
    AllocateBuffer): referenced by (buffer_id, offset), never copied; an
    in-place output over it stays in it (a KV cache appended to each step)."""
    def __init__(self, sb):
        self.kind = "buffer"
        self.base_kind = "server"  # the daemon's memory: no client stream to wait for
        self.obj, self.name = sb, ""
        self.dtype = pb.DType.Value("DTYPE_" + sb.dtype.upper())
        self.shape = tuple(sb.shape)
        self.nbytes, self.framework, self.device = sb.nbytes, "numpy", None
        self.buffer_id, self.offset = sb.buffer_id, sb.offset
        self.arr = None


def _buffer_arg(v):
    """A BufArg or ServerBufArg for a registered Handle or a ServerBuffer; else None."""
    kind = type(v).__name__
    if kind == "Handle":
        return BufArg(v)
    if kind == "ServerBuffer":
        return ServerBufArg(v)
    return None


def _tensorish(v):
    return (isinstance(v, np.ndarray) or hasattr(v, "__cuda_array_interface__")
            or hasattr(v, "__dlpack__") or type(v).__name__ in ("Handle", "ServerBuffer")
            or (_torch() is not None and isinstance(v, _torch().Tensor)))


def _set_ref(t, dtype, shape, buffer_id, offset):
    t.dtype = dtype
    t.shape.extend(shape)
    t.buffer.buffer_id = buffer_id
    t.buffer.offset = offset


def info_dict(info):
    return {f.name: getattr(info, f.name) for f in info.DESCRIPTOR.fields}


class Prepared:
    """A request ready to send, and what to do with its response."""

    def __init__(self, client, op, args, kwargs, request_id="", keep_parts=False):
        self.client = client
        # keep_parts: what _plan.make needs from this request, kept until it
        # has it (the arguments reference the caller's tensors)
        self._keep = keep_parts
        self._parts = None
        self.op = op
        self.seg = None
        self._after = []     # callables(resp) run after a successful response
        self._results = []   # (output name, callable(resp) -> object)
        self._learn = None
        try:
            self._prepare(op, args, kwargs, request_id)
        except BaseException:
            self.release()
            raise

    # ---- building ----
    def _prepare(self, op, args, kwargs, request_id):
        c = self.client
        opts = {k: kwargs.pop(k) for k in CALL_KEYWORDS if k in kwargs}
        self.timeout = opts.get("timeout", c.timeout)
        self.return_info = bool(opts.get("return_info", False))
        via = opts.get("via") or ("shm" if c.use_shm else "inline")
        if via not in ("inline", "shm"):
            raise invalid_argument("%s: via=%r; host arrays travel 'inline' or through 'shm' (GPU tensors "
                             "always over CUDA IPC)" % (op, via))
        schema = c._schema_or_none(op)
        self.schema = schema
        names = schema.inputs if schema else []
        if len(args) > len(names):
            raise invalid_argument_count("%s takes %d positional inputs (%s), %d given" %
                            (op, len(names), ", ".join(names), len(args)))
        inputs = dict(zip(names, args))
        attrs = {}
        for k, v in kwargs.items():
            if k in inputs:
                raise invalid_argument_count("%s: '%s' given twice (positionally and by name)" % (op, k))
            if schema is not None and k in schema.input_dtypes:
                inputs[k] = v
            elif schema is not None and k in schema.attr_specs:
                attrs[k] = v
            elif _tensorish(v):
                inputs[k] = v
            else:
                attrs[k] = v

        req = pb.ExecuteRequest(op=op)
        if request_id:
            req.request_id = request_id
        if opts:
            if opts.get("backend"):
                req.backend = opts["backend"]
            if opts.get("device"):
                req.device = opts["device"]
        for k, v in attrs.items():
            try:
                attr_value(v, req.attrs[k])
            except ValueError as e:  # attr_value's InvalidArgument, named for the op
                raise invalid_argument("%s: %s" % (op, getattr(e, "message", e))) from None

        # Inputs: what they are, checked before anything is sent.
        ins = {}
        bufs = False  # a registered Handle among the tensors
        for n, v in inputs.items():
            a = _buffer_arg(v)
            if a is not None:
                bufs = True
            else:
                a = to_arg(op, n, v)
            if schema is not None:
                schema.check_dtype(n, a.dtype)
            ins[n] = a
        primary = None
        for a in ins.values():
            k = a.base_kind if a.kind == "buffer" else a.kind
            if k == "cuda":
                primary = a
                break
        if primary is None and ins:
            primary = next(iter(ins.values()))
        self.primary = primary
        cuda_kind = primary is not None and (primary.kind == "cuda" or
                                             (primary.kind == "buffer" and primary.base_kind == "cuda"))

        # Outputs the caller gave.
        outs = self._normalize_out(op, schema, opts.get("out"))
        out_args = {}
        for n, v in outs.items():
            a = _buffer_arg(v)
            if a is not None:
                bufs = True
            else:
                a = to_arg(op, "out " + n, v)
            out_args[n] = a

        # Outputs we allocate (GPU inputs: on their device; shm: in the segment).
        inferred = {}
        # Nothing to infer when the caller placed every output (out=, or in place).
        if schema is not None and (cuda_kind or via == "shm") and any(
                o not in out_args and o not in schema.in_place_of for o in schema.outputs):
            inferred = schema.infer_outputs({n: a.shape for n, a in ins.items()},
                                            {n: a.dtype for n, a in ins.items()})
            key = self._learn_key(ins, req)
            for o, sd in c._learned.get(key, {}).items():
                inferred.setdefault(o, sd)
            self._learn = key

        # GPU tensors: register their allocations (once; cached), then allocate
        # the outputs we must on the primary input's device.
        ipc = None
        refs = {}
        cuda_args = [a for a in ins.values() if a.kind == "cuda"]
        cuda_args += [a for a in out_args.values() if a.kind == "cuda"]
        for a in cuda_args:
            if a.nbytes == 0:  # an empty tensor touches no memory: declared without data
                refs[id(a)] = None
                continue
            ipc = ipc or c._ipc()
            refs[id(a)] = ipc.resolve(a)
        alloc_outs = {}
        if schema is not None and cuda_kind:
            for o in schema.outputs:
                if o in out_args or o in schema.in_place_of or o not in inferred:
                    continue
                shape, dt = inferred[o]
                if 0 in shape:
                    continue  # comes back inline (empty) and is put on the device
                obj = empty_like_kind(primary, shape, dt)
                a = to_arg(op, o, obj)
                ipc = ipc or c._ipc()
                refs[id(a)] = ipc.resolve(a)
                alloc_outs[o] = a
                cuda_args.append(a)

        # The producing streams finish before the daemon reads (or writes) the
        # memory: once per framework and device. Registered handles too.
        seen = set()
        for a in cuda_args + [x.handle._arg for x in (list(ins.values()) + list(out_args.values())
                                                      if bufs else ())
                              if x.kind == "buffer" and x.base_kind == "cuda"]:
            if a.nbytes == 0:
                continue
            k = (a.framework, a.device)
            if k not in seen:
                seen.add(k)
                a.synchronize()

        # Host tensors through shared memory: one segment per call.
        shm_outs = []
        host_in = ()
        if via == "shm":
            host_in = [(n, a) for n, a in ins.items() if a.kind == "host"]
            for o, a in out_args.items():
                if a.kind == "host":
                    shm_outs.append((o, a.nbytes))
            if schema is not None and not cuda_kind:
                for o in schema.outputs:
                    if o not in out_args and o not in schema.in_place_of and o in inferred:
                        shape, dt = inferred[o]
                        n = np.dtype(numpy_dtype(dt)).itemsize if dt != pb.DTYPE_BFLOAT16 else 2
                        for s in shape:
                            n *= s
                        shm_outs.append((o, n))
        slots = {}
        if via == "shm" and (host_in or shm_outs):
            total = sum(align(a.nbytes) for _, a in host_in) + sum(align(n) for _, n in shm_outs)
            self.seg = seg = c._pool().checkout(total)
            off = 0
            for n, a in host_in:
                seg.buf[off:off + a.nbytes] = a.flat
                slots[n] = off
                off += align(a.nbytes)
            for o, nb in shm_outs:
                slots["out " + o] = off
                off += align(nb)

        for n, a in ins.items():
            t = req.inputs[n]
            if a.kind == "buffer":
                _set_ref(t, a.dtype, a.shape, a.buffer_id, a.offset)
            elif a.kind == "cuda":
                if refs[id(a)] is None:
                    t.dtype = a.dtype
                    t.shape.extend(a.shape)
                    t.inline_data = b""
                else:
                    _set_ref(t, a.dtype, a.shape, *refs[id(a)])
            elif n in slots:
                _set_ref(t, a.dtype, a.shape, self.seg.buffer_id, slots[n])
            else:
                t.dtype = a.dtype
                t.shape.extend(a.shape)
                t.inline_data = a.tobytes()

        if schema is None:
            # Unknown op: the daemon answers NOT_FOUND with what it has; outputs come inline.
            self.req = req
            return
        for o in schema.outputs:
            src = schema.in_place_of.get(o)
            if src is not None:
                self._plan_in_place(req, o, ins.get(src), slots.get(src))
            elif o in out_args:
                self._plan_out(req, o, out_args[o], refs, slots.get("out " + o))
            elif o in alloc_outs:
                a = alloc_outs[o]
                _set_ref(req.outputs[o], a.dtype, a.shape, *refs[id(a)])
                self._results.append((o, lambda r, a=a: a.obj))
            elif ("out " + o) in slots:
                shape, dt = inferred[o]
                _set_ref(req.outputs[o], dt, shape, self.seg.buffer_id, slots["out " + o])
                self._results.append((o, self._from_slot(slots["out " + o], shape, dt)))
            else:
                self._results.append((o, self._from_inline(o, cuda_kind)))
        self.req = req
        if self._keep:
            self._parts = (ins, out_args, alloc_outs, refs, cuda_kind)

    def _normalize_out(self, op, schema, out):
        if out is None:
            return {}
        if schema is None:
            if isinstance(out, dict):
                return dict(out)
            raise invalid_argument("%s: out= for an op this server does not list must be a dict" % op)
        if isinstance(out, dict):
            outs = dict(out)
        elif isinstance(out, (tuple, list)):
            if len(out) != len(schema.outputs):
                raise invalid_argument("%s: out= has %d entries; the op has %d outputs (%s)" %
                                 (op, len(out), len(schema.outputs), ", ".join(schema.outputs)))
            outs = {n: v for n, v in zip(schema.outputs, out) if v is not None}
        else:
            free = [o for o in schema.outputs if o not in schema.in_place_of]
            if not free:
                o = schema.outputs[0]
                raise invalid_argument("%s: output '%s' is written in place of input '%s'; out= does "
                                 "not apply to it" % (op, o, schema.in_place_of[o]))
            if len(free) != 1:
                raise invalid_argument("%s: out= takes a tuple or dict here (outputs %s)" %
                                 (op, ", ".join(schema.outputs)))
            outs = {free[0]: out}
        for n in outs:
            if n not in schema.outputs:
                raise invalid_argument("%s: out= names '%s'; the outputs are {%s}" %
                                 (op, n, ", ".join(schema.outputs)))
            if n in schema.in_place_of:
                raise invalid_argument("%s: output '%s' is written in place of input '%s'; out= does "
                                 "not apply to it" % (op, n, schema.in_place_of[n]))
        return outs

    def _learn_key(self, ins, req):
        return (self.op, tuple(sorted((n, a.shape, a.dtype) for n, a in ins.items())),
                tuple(sorted((k, str(v)) for k, v in req.attrs.items())))

    def _plan_in_place(self, req, o, a, slot):
        # Never declared: the daemon writes it where the input is (a buffer,
        # or the inline response for an inline input).
        if a is None:
            return
        if a.kind == "host" and slot is not None:
            self._after.append(lambda r, a=a, s=slot: np.copyto(a.flat, self.seg.buf[s:s + a.nbytes]))
        elif a.kind == "host":
            self._after.append(lambda r, a=a, o=o: self._copy_inline(r, o, a))
        self._results.append((o, lambda r, a=a: a.obj))

    def _plan_out(self, req, o, a, refs, slot):
        t = req.outputs[o]
        if a.kind == "buffer":
            _set_ref(t, a.dtype, a.shape, a.buffer_id, a.offset)
        elif a.kind == "cuda" and refs[id(a)] is None:
            t.dtype = a.dtype
            t.shape.extend(a.shape)
        elif a.kind == "cuda":
            _set_ref(t, a.dtype, a.shape, *refs[id(a)])
        elif slot is not None:
            _set_ref(t, a.dtype, a.shape, self.seg.buffer_id, slot)
            self._after.append(lambda r, a=a, s=slot: np.copyto(a.flat, self.seg.buf[s:s + a.nbytes]))
        else:
            t.dtype = a.dtype  # declared without data: the daemon checks dtype and shape
            t.shape.extend(a.shape)
            self._after.append(lambda r, a=a, o=o: self._copy_inline(r, o, a))
        self._results.append((o, lambda r, a=a: a.obj))

    def _copy_inline(self, resp, o, a):
        data = resp.outputs[o].inline_data
        if len(data) != a.nbytes:
            raise error_for(13, "%s: output '%s' came back with %d bytes, expected %d" %
                            (self.op, o, len(data), a.nbytes))
        if a.nbytes:
            a.flat[:] = np.frombuffer(data, dtype=np.uint8)

    def _from_slot(self, off, shape, dt):
        fw = self.primary.framework if self.primary is not None else "numpy"

        def get(resp):
            n = 1
            for s in shape:
                n *= s
            n *= np.dtype(numpy_dtype(dt)).itemsize if dt != pb.DTYPE_BFLOAT16 else 2
            return host_from_bytes(self.seg.buf[off:off + n], shape, dt, fw)
        return get

    def _from_inline(self, o, cuda_kind):
        p = self.primary

        def get(resp):
            t = resp.outputs[o]
            if t.WhichOneof("data") == "buffer":
                return None  # placed by the daemon; not ours to read
            fw = p.framework if (p is not None and not cuda_kind) else "numpy"
            if fw not in ("numpy", "torch"):
                fw = "numpy"
            if cuda_kind:
                fw = "torch" if p.framework == "torch" else "numpy"
            host = host_from_bytes(t.inline_data, tuple(t.shape), t.dtype, fw)
            if self._learn is not None:
                self.client._learned.setdefault(self._learn, {})[o] = (tuple(t.shape), t.dtype)
            if not cuda_kind:
                return host
            if p.framework == "torch":
                return host.to("cuda:%d" % p.device)
            cp = _cupy()
            if cp is None:
                raise invalid_argument("%s: output '%s' came inline and cannot be put on the GPU without "
                                 "cupy or torch; pass out=" % (self.op, o))
            with cp.cuda.Device(p.device):
                return cp.asarray(host)
        return get

    # ---- finishing ----
    def finish(self, resp):
        try:
            for f in self._after:
                f(resp)
            vals = [get(resp) for _, get in self._results]
        finally:
            self.release()
        if self.schema is None:
            vals = [host_from_bytes(t.inline_data, tuple(t.shape), t.dtype, "numpy")
                    if t.WhichOneof("data") == "inline_data" else None
                    for _, t in sorted(resp.outputs.items())]
        result = vals[0] if len(vals) == 1 else tuple(vals)
        if self.return_info:
            return result, info_dict(resp.info)
        return result

    def complete(self, resp):
        """The call's result from its ExecuteResponse; a status in it (a stream's
        response) raises its KerneldError, as unary Execute's status would."""
        st = resp.status
        if st.code:
            self.release()
            raise error_for(st.code, st.message)
        return self.finish(resp)

    def settle(self, resp, fut):
        """A stream's response into its future (concurrent or asyncio)."""
        if fut.done():  # cancelled by its caller
            self.release()
            return
        try:
            fut.set_result(self.complete(resp))
        except BaseException as e:
            fut.set_exception(e)

    def release(self):
        seg, self.seg = self.seg, None
        if seg is not None:
            self.client._pool().give_back(seg)

    def failed(self, code):
        """After a unary or native call failed with `code`: a call that ended in
        DEADLINE_EXCEEDED or CANCELLED may still run in the daemon, so its
        segment is retired; any other error leaves it free for reuse."""
        if code in _MAY_RUN_ON:
            self.retire()
        else:
            self.release()

    def retire(self):
        """For a unary call abandoned while the daemon may still run it: its
        segment is unregistered (the daemon defers that until the request
        ends) and unmapped, never reused by another call."""
        seg, self.seg = self.seg, None
        if seg is not None:
            self.client._pool().retire(seg)

    def detach(self):
        """For a request left running in the daemon: what release() would do, to
        be run once its response arrives; release() then does nothing."""
        seg, self.seg = self.seg, None
        if seg is None:
            return lambda: None
        pool = self.client._pool()
        return lambda: pool.give_back(seg)
