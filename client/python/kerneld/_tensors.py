"""Arrays and tensors in, the same kind out.

An argument becomes a HostArg (contiguous host memory: numpy, torch CPU) or a
CudaArg (device memory: torch CUDA, cupy, __cuda_array_interface__, CUDA
__dlpack__). Anything kerneld cannot take raises kerneld.InvalidArgument (a
ValueError) naming the tensor.
"""
import ctypes
import sys

import numpy as np

from . import _cuda
from ._errors import invalid_argument
from ._proto import kerneld_pb2 as pb

# dtype enum <-> name <-> itemsize
NAMES = {pb.DTYPE_FLOAT16: "float16", pb.DTYPE_BFLOAT16: "bfloat16", pb.DTYPE_FLOAT32: "float32",
         pb.DTYPE_FLOAT64: "float64", pb.DTYPE_INT8: "int8", pb.DTYPE_INT16: "int16",
         pb.DTYPE_INT32: "int32", pb.DTYPE_INT64: "int64", pb.DTYPE_UINT8: "uint8",
         pb.DTYPE_BOOL: "bool"}
BY_NAME = {v: k for k, v in NAMES.items()}
ITEMSIZE = {pb.DTYPE_FLOAT16: 2, pb.DTYPE_BFLOAT16: 2, pb.DTYPE_FLOAT32: 4, pb.DTYPE_FLOAT64: 8,
            pb.DTYPE_INT8: 1, pb.DTYPE_INT16: 2, pb.DTYPE_INT32: 4, pb.DTYPE_INT64: 8,
            pb.DTYPE_UINT8: 1, pb.DTYPE_BOOL: 1}


def _bfloat16_numpy():
    try:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return None


def numpy_dtype(dt):
    """numpy dtype for a kerneld dtype (bfloat16 needs ml_dtypes)."""
    if dt == pb.DTYPE_BFLOAT16:
        d = _bfloat16_numpy()
        if d is None:
            raise invalid_argument("a bfloat16 result as numpy needs ml_dtypes (pip install ml_dtypes, "
                             "or kerneld[bfloat16]); or pass torch tensors")
        return d
    return np.dtype(NAMES[dt])


_NP_CACHE = {}


def _from_numpy_dtype(d):
    try:
        return _NP_CACHE[d]
    except KeyError:
        pass
    r = BY_NAME[d.name] if d.name in BY_NAME and (d.kind != "V" or d.name == "bfloat16") else None
    _NP_CACHE[d] = r
    return r


def _shape_str(shape):
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


class HostArg:
    """Contiguous host memory; .flat is a uint8 view of it."""
    kind = "host"

    device = None

    def __init__(self, name, obj, arr, dtype, framework):
        self.name, self.obj, self.dtype, self.framework = name, obj, dtype, framework
        self.shape = arr.shape  # a numpy array's: a tuple of ints
        self.arr = arr
        self.nbytes = arr.nbytes

    @property
    def flat(self):
        arr = self.arr
        return arr.reshape(-1).view(np.uint8) if arr.size else np.empty(0, np.uint8)

    def tobytes(self):
        return self.arr.tobytes()


class CudaArg:
    """Device memory at .ptr (the tensor's first byte) on device ordinal .device."""
    kind = "cuda"

    def __init__(self, name, obj, ptr, nbytes, dtype, shape, framework, sync, keep=None):
        self.name, self.obj, self.ptr, self.nbytes = name, obj, ptr, nbytes
        self.dtype, self.shape, self.framework = dtype, tuple(int(s) for s in shape), framework
        self._sync = sync
        self.keep = keep  # a DLPack capsule that must outlive the request
        self.device = None  # filled from the pointer (allocation_of)
        self.context = None  # the allocation's CUDA context, filled with .device
        self.ipc_entry = None  # its IpcRegistry entry, filled by resolve

    def synchronize(self):
        # sync(context): the argument's allocation context (None until
        # IpcRegistry.resolve fills it). Passed in, never captured: a closure
        # that held this CudaArg would make a reference cycle that keeps the
        # tensor (and its GPU memory) alive until the garbage collector runs.
        if self._sync is not None:
            self._sync(self.context)


# ---- torch / cupy, looked up only when the caller already imported them ----

def _torch():
    return sys.modules.get("torch")


def _cupy():
    return sys.modules.get("cupy")


_TORCH_DTYPES = None


def _torch_dtypes():
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        t = _torch()
        _TORCH_DTYPES = {t.float16: pb.DTYPE_FLOAT16, t.bfloat16: pb.DTYPE_BFLOAT16,
                         t.float32: pb.DTYPE_FLOAT32, t.float64: pb.DTYPE_FLOAT64,
                         t.int8: pb.DTYPE_INT8, t.int16: pb.DTYPE_INT16, t.int32: pb.DTYPE_INT32,
                         t.int64: pb.DTYPE_INT64, t.uint8: pb.DTYPE_UINT8, t.bool: pb.DTYPE_BOOL}
    return _TORCH_DTYPES


def _torch_dtype(dt):
    for k, v in _torch_dtypes().items():
        if v == dt:
            return k
    raise invalid_argument("no torch dtype for %s" % NAMES.get(dt, dt))


def _not_contiguous(where, name, shape, strides, fix):
    return invalid_argument("%s: '%s' is not contiguous (shape %s, strides %s); kerneld takes row-major "
                      "contiguous tensors: pass %s" % (where, name, _shape_str(shape),
                                                       _shape_str(strides), fix))


def _c_strides(shape, itemsize):
    out, acc = [], itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _contiguous(shape, strides, itemsize):
    """Row-major contiguity, ignoring the strides of size-1 dims (as torch does)."""
    if strides is None:
        return True
    want = _c_strides(shape, itemsize)
    return all(int(s) == 1 or int(a) == int(b) for s, a, b in zip(shape, strides, want)) \
        or any(int(s) == 0 for s in shape)


def to_arg(where, name, obj):
    """An argument for tensor `name` of op `where`; InvalidArgument if kerneld cannot take it."""
    t = _torch()
    if t is not None and isinstance(obj, t.Tensor):
        return _torch_arg(where, name, obj)
    cp = _cupy()
    if cp is not None and isinstance(obj, cp.ndarray):
        return _cupy_arg(where, name, obj)
    if isinstance(obj, np.ndarray):
        return _numpy_arg(where, name, obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai_arg(where, name, obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev_type, _ = obj.__dlpack_device__()
        if int(dev_type) == 2:  # kDLCUDA
            return _dlpack_arg(where, name, obj)
        if hasattr(obj, "__array__") or int(dev_type) == 1:
            return _numpy_arg(where, name, np.from_dlpack(obj), obj)
    if isinstance(obj, (list, tuple, int, float, bool, np.generic)):
        return _numpy_arg(where, name, np.asarray(obj))
    raise invalid_argument("%s: '%s' is a %s; kerneld takes numpy arrays, torch tensors, cupy arrays, "
                     "or objects with __cuda_array_interface__ or __dlpack__"
                     % (where, name, type(obj).__name__))


def _numpy_arg(where, name, a, obj=None):
    dt = _from_numpy_dtype(a.dtype)
    if dt is None:
        raise invalid_argument("%s: '%s' has numpy dtype %s, which kerneld does not know; its dtypes are "
                         "{%s}" % (where, name, a.dtype, ", ".join(NAMES.values())))
    if a.dtype.byteorder == ">":
        raise invalid_argument("%s: '%s' is big-endian (%s); pass a.astype(a.dtype.newbyteorder('<'))"
                         % (where, name, a.dtype.str))
    if not a.flags.c_contiguous:
        raise _not_contiguous(where, name, a.shape, a.strides, "np.ascontiguousarray(%s)" % name)
    return HostArg(name, a if obj is None else obj, a, dt, "numpy")


def _torch_arg(where, name, x):
    dt = _torch_dtypes().get(x.dtype)
    if dt is None:
        raise invalid_argument("%s: '%s' has torch dtype %s, which kerneld does not know"
                         % (where, name, x.dtype))
    if not x.is_contiguous():
        raise _not_contiguous(where, name, x.shape, [s * x.element_size() for s in x.stride()],
                              "%s.contiguous()" % name)
    if x.device.type == "cuda":
        dev = x.device
        idx = dev.index if dev.index is not None else _torch().cuda.current_device()

        def sync(context):
            sync_torch_stream(idx, context)
        a = CudaArg(name, x, x.data_ptr(), x.numel() * x.element_size(), dt, x.shape,
                    "torch", sync)
        a.device = idx
        return a
    if x.device.type != "cpu":
        raise invalid_argument("%s: '%s' is on torch device %s; kerneld takes cpu and cuda tensors"
                         % (where, name, x.device))
    d = x.detach()
    if dt == pb.DTYPE_BFLOAT16:
        arr = d.view(_torch().int16).numpy()
    else:
        arr = d.numpy()
    return HostArg(name, x, arr, dt, "torch")


def sync_torch_stream(dev, ctx):
    """The stream rule for torch: its current stream on device `dev` finishes
    before the daemon reads. Through the driver on the raw handle when `ctx`
    (the tensors' context) is this thread's, which the null stream's handle
    needs: 1.0 against 2.7 us on the GPU host (bench/sync_probe.py); torch's
    own call otherwise (ctx None: not resolved yet)."""
    torch = _torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None and ctx is not None:
        if _cuda.current_context() == ctx:
            _cuda.stream_synchronize(raw(dev))
            return
    torch.cuda.current_stream(dev).synchronize()


def _cupy_arg(where, name, a):
    dt = _from_numpy_dtype(a.dtype)
    if dt is None:
        raise invalid_argument("%s: '%s' has cupy dtype %s, which kerneld does not know"
                         % (where, name, a.dtype))
    if not a.flags.c_contiguous:
        raise _not_contiguous(where, name, a.shape, a.strides, "cupy.ascontiguousarray(%s)" % name)
    dev_id = a.device.id

    def sync(context):
        cp = _cupy()
        with cp.cuda.Device(dev_id):
            cp.cuda.get_current_stream().synchronize()
    arg = CudaArg(name, a, int(a.data.ptr), int(a.nbytes), dt, a.shape, "cupy", sync)
    arg.device = dev_id
    return arg


_TYPESTR = {"<f2": pb.DTYPE_FLOAT16, "<f4": pb.DTYPE_FLOAT32, "<f8": pb.DTYPE_FLOAT64,
            "|i1": pb.DTYPE_INT8, "<i2": pb.DTYPE_INT16, "<i4": pb.DTYPE_INT32,
            "<i8": pb.DTYPE_INT64, "|u1": pb.DTYPE_UINT8, "|b1": pb.DTYPE_BOOL}


def _cai_arg(where, name, obj):
    cai = obj.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dt = _TYPESTR.get(cai["typestr"])
    if dt is None:
        raise invalid_argument("%s: '%s' has typestr %r, which kerneld does not take"
                         % (where, name, cai["typestr"]))
    if not _contiguous(shape, cai.get("strides"), ITEMSIZE[dt]):
        raise _not_contiguous(where, name, shape, cai["strides"], "a contiguous copy")
    ptr = int(cai["data"][0])
    stream = cai.get("stream", None)
    n = ITEMSIZE[dt]
    for s in shape:
        n *= int(s)

    def sync(context):
        if ptr == 0:
            return
        alloc = _cuda.allocation_of(ptr)
        if stream is None:  # no stream named: the producer promises nothing; wait for the device
            with _cuda.pushed(alloc.context):
                _cuda.lib().cuCtxSynchronize()
        else:
            _cuda.stream_synchronize(int(stream), alloc.context)
    return CudaArg(name, obj, ptr, n, dt, shape, "cai", sync)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL = {(2, 16): pb.DTYPE_FLOAT16, (4, 16): pb.DTYPE_BFLOAT16, (2, 32): pb.DTYPE_FLOAT32,
       (2, 64): pb.DTYPE_FLOAT64, (0, 8): pb.DTYPE_INT8, (0, 16): pb.DTYPE_INT16,
       (0, 32): pb.DTYPE_INT32, (0, 64): pb.DTYPE_INT64, (1, 8): pb.DTYPE_UINT8,
       (6, 8): pb.DTYPE_BOOL, (1, 1): pb.DTYPE_BOOL}


def _dlpack_arg(where, name, obj):
    # stream=1: the producer makes the legacy default stream wait for its
    # work (DLPack's protocol); we synchronize that stream before sending.
    capsule = obj.__dlpack__(stream=1)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(capsule, b"dltensor")
    t = _DLTensor.from_address(p)  # DLManagedTensor starts with its DLTensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    dt = _DL.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if dt is None:
        raise invalid_argument("%s: '%s' has DLPack dtype code %d bits %d lanes %d, which kerneld does "
                         "not take" % (where, name, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    strides = None if not t.strides else tuple(t.strides[i] * ITEMSIZE[dt] for i in range(t.ndim))
    if not _contiguous(shape, strides, ITEMSIZE[dt]):
        raise _not_contiguous(where, name, shape, strides, "a contiguous copy")
    n = ITEMSIZE[dt]
    for s in shape:
        n *= int(s)

    def sync(context):
        _cuda.stream_synchronize(_cuda.CU_STREAM_LEGACY)
    return CudaArg(name, obj, int(t.data or 0) + int(t.byte_offset), n, dt, shape, "dlpack", sync,
                   keep=capsule)


# ---- outputs of the same kind as the inputs ----

def empty_like_kind(proto_arg, shape, dt):
    """A new array/tensor of `proto_arg`'s kind (and device), of shape and dtype."""
    if proto_arg is None or proto_arg.kind == "host":
        fw = proto_arg.framework if proto_arg is not None else "numpy"
        if fw == "torch":
            return _torch().empty(tuple(shape), dtype=_torch_dtype(dt))
        return np.empty(tuple(shape), dtype=numpy_dtype(dt))
    fw = proto_arg.framework
    if fw == "torch" or (fw in ("cai", "dlpack") and _torch() is not None and _cupy() is None):
        t = _torch()
        return t.empty(tuple(shape), dtype=_torch_dtype(dt), device="cuda:%d" % proto_arg.device)
    cp = _cupy()
    if cp is None:
        raise invalid_argument("cannot allocate a GPU output like '%s' (a %s) without torch or cupy "
                         "imported; pass out=" % (proto_arg.name, type(proto_arg.obj).__name__))
    with cp.cuda.Device(proto_arg.device):
        if dt == pb.DTYPE_BFLOAT16:
            raise invalid_argument("cupy has no bfloat16; pass torch tensors or out=")
        return cp.empty(tuple(shape), dtype=np.dtype(NAMES[dt]))


def host_view(obj, arg):
    """A writable numpy view of a HostArg's object (for results written back)."""
    return arg.arr


def host_from_bytes(data, shape, dt, framework):
    """A new host array/tensor of `framework` holding bytes `data`."""
    a = np.frombuffer(data, dtype=np.uint8).copy()
    if framework == "torch":
        t = _torch()
        if dt == pb.DTYPE_BFLOAT16:
            return t.from_numpy(a.view(np.int16)).view(t.bfloat16).reshape(tuple(shape))
        return t.from_numpy(a.view(numpy_dtype(dt))).reshape(tuple(shape))
    return a.view(numpy_dtype(dt)).reshape(tuple(shape))
