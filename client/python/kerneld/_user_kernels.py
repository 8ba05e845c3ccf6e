"""User kernels (kerneld.v1.AdminService, docs/user-kernels.md): requests built
from Python values, and answers as dicts. register_kernel, unregister_kernel,
list_user_kernels and evaluate_kernel of kerneld.Client and kerneld.aio.Client
use these: the two differ only in how they send the RPC and reload schemas."""
import json

import grpc
from google.protobuf import json_format

from ._proto import kerneld_pb2 as pb
from ._errors import error_for, invalid_argument
from ._messages import msg_dict
from ._schema import attr_value

_AS = "/kerneld.v1.AdminService/"
METHODS = {
    "RegisterKernel": (pb.RegisterKernelRequest, pb.RegisterKernelResponse),
    "UnregisterKernel": (pb.UnregisterKernelRequest, pb.UnregisterKernelResponse),
    "ListUserKernels": (pb.ListUserKernelsRequest, pb.ListUserKernelsResponse),
    "EvaluateKernel": (pb.EvaluateKernelRequest, pb.EvaluateKernelResponse),
}


def methods(channel, uu):
    """The AdminService's unary methods on `channel`, made by `uu(path, req, resp)`."""
    return {n: uu(_AS + n, req, resp) for n, (req, resp) in METHODS.items()}


def _spell_dtypes(spec):
    # "float32" -> "DTYPE_FLOAT32", as kernelctl's spec files allow.
    for side in ("inputs", "outputs"):
        for t in spec.get(side) or []:
            if isinstance(t, dict) and isinstance(t.get("dtypes"), list):
                t["dtypes"] = [d if not isinstance(d, str) or d.startswith("DTYPE_")
                               else "DTYPE_" + d.upper() for d in t["dtypes"]]


def register_request(source, entry, spec, name=None, replace=False, arch=None,
                     compile_options=None):
    """A RegisterKernelRequest: `spec` is a dict (or its JSON text) with the
    message's fields (name, inputs, outputs, attrs, launch, options, doc),
    dtypes by name ("float32")."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise invalid_argument("register_kernel: spec is not JSON: %s" % e) from None
    if not isinstance(spec, dict):
        raise invalid_argument("register_kernel: spec is a dict (or its JSON), not %s" %
                               type(spec).__name__)
    if not isinstance(source, str) or not source:
        raise invalid_argument("register_kernel: source is the CUDA program's text")
    spec = json.loads(json.dumps(spec))  # a copy, and only JSON values
    _spell_dtypes(spec)
    if "cuda_source" in spec or "cudaSource" in spec:
        raise invalid_argument("register_kernel: the program is `source`, not the spec's cuda_source")
    req = pb.RegisterKernelRequest()
    try:
        json_format.ParseDict(spec, req)
    except json_format.ParseError as e:
        raise invalid_argument("register_kernel: spec: %s" % e) from None
    req.cuda_source = source
    if name:
        req.name = name
    if entry:
        req.entry = entry
    elif not req.entry:
        req.entry = req.name
    if not req.name:
        raise invalid_argument("register_kernel: the spec names no kernel (\"name\", or name=)")
    if replace:
        req.options.replace = True
    if arch:
        req.options.arch = arch
    for o in compile_options or []:
        req.options.compile_options.append(o)
    return req


def evaluate_request(name, against, shapes, first_input, dtype="float32", attrs=None,
                     iterations=0, seed=0, device=""):
    """An EvaluateKernelRequest: `shapes` maps input names to shapes, or is
    one shape for the built-in's first input (`first_input()` names it)."""
    req = pb.EvaluateKernelRequest(name=name, against=against, dtype=dtype or "",
                                   iterations=int(iterations), seed=int(seed), device=device or "")
    if isinstance(shapes, dict):
        items = shapes.items()
    elif isinstance(shapes, (tuple, list)):
        items = [(first_input(), shapes)]
    else:
        raise invalid_argument("evaluate_kernel: shapes is {input: shape} or one shape, not %r" %
                               (shapes,))
    for k, s in items:
        try:
            dims = [int(d) for d in s]
        except (TypeError, ValueError):
            raise invalid_argument("evaluate_kernel: shape of %r: %r is not a tuple of ints" %
                                   (k, s)) from None
        req.shapes[k].dims.extend(dims)
    for k, v in (attrs or {}).items():
        attr_value(v, req.attrs[k])
    return req


def wants_first_input(shapes):
    """True when `shapes` is one shape, for the built-in's first input: the
    caller then looks that input's name up (describe) for evaluate_request."""
    return isinstance(shapes, (tuple, list))


def unregister_request(name):
    return pb.UnregisterKernelRequest(name=name)


def list_request(all_principals=False):
    return pb.ListUserKernelsRequest(all_principals=bool(all_principals))


def kernel_list(resp):
    """A ListUserKernelsResponse as list_user_kernels answers: a dict per kernel."""
    return [msg_dict(k) for k in resp.kernels]


def forget(client, name):
    """After (un)registering `name`: the client's method for it (cached on
    first use) and its schemas go, so the next use sees the daemon's ops."""
    client.__dict__.pop(name, None)
    client._schemas = None


def op_method(client, req, resp, coroutine=False):
    """After RegisterKernel `req` answered `resp` and the client reloaded its
    schemas: the op's method (a coroutine function on the asyncio client),
    set on the client and carrying the answer as .registration."""
    if req.name not in client._schemas:  # unseen: a daemon that lists it only later
        raise error_for(grpc.StatusCode.NOT_FOUND,
                        "register_kernel: %s registered but ListKernels does not show it" %
                        req.name)
    m = client._op_method(req.name, coroutine=coroutine)
    m.registration = msg_dict(resp)
    object.__setattr__(client, req.name, m)
    return m
