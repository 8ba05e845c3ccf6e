"""The few CUDA driver calls the IPC path needs, through ctypes on libcuda.

No CUDA toolkit and no framework is needed for these: torch and cupy load
libcuda.so.1 themselves, and we use the same library. Every call runs with
the pointer's own context pushed, so any thread may call.
"""
import ctypes
import threading

from ._errors import invalid_argument

CU_POINTER_ATTRIBUTE_CONTEXT = 1
CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
CU_POINTER_ATTRIBUTE_BUFFER_ID = 7
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11
CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
CU_MEMORYTYPE_DEVICE = 2
CU_STREAM_LEGACY = 0x1
CUDA_ERROR_INVALID_VALUE = 1

_lock = threading.Lock()
_lib = None


class CudaError(RuntimeError):
    def __init__(self, call, rc, text):
        self.rc = rc
        super().__init__("%s failed: CUDA error %d (%s)" % (call, rc, text))


def lib():
    """libcuda, initialized; raises RuntimeError with the reason when absent."""
    global _lib
    with _lock:
        if _lib is None:
            try:
                l = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise RuntimeError("kerneld: GPU tensors need the NVIDIA driver (libcuda.so.1): %s" % e)
            l.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            l.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
            l.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                  ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
            l.cuIpcGetMemHandle.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
            l.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
            l.cuCtxGetCurrent.argtypes = [ctypes.c_void_p]
            l.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            l.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            l.cuDeviceGetUuid.argtypes = [ctypes.c_char_p, ctypes.c_int]
            l.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
            l.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_int),
                                                 ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
            _check(l, "cuInit", l.cuInit(0))
            _lib = l
        return _lib


def _text(l, rc):
    s = ctypes.c_char_p()
    if l.cuGetErrorString(rc, ctypes.byref(s)) == 0 and s.value:
        return s.value.decode()
    return "unknown"


def _check(l, call, rc):
    if rc != 0:
        raise CudaError(call, rc, _text(l, rc))


def _attr(l, ptr, attr, ctype):
    v = ctype()
    rc = l.cuPointerGetAttribute(ctypes.byref(v), attr, ptr)
    return rc, v.value


class Allocation:
    """The cudaMalloc allocation holding a device pointer."""
    __slots__ = ("device", "base", "size", "buffer_id", "context")

    def __init__(self, device, base, size, buffer_id, context):
        self.device, self.base, self.size = device, base, size
        self.buffer_id, self.context = buffer_id, context


class _Query:
    """The six attributes allocation_of needs, read by one cuPointerGetAttributes.

    One ctypes call instead of six: on the H100 host allocation_of took 6.4-13 us
    p50 as six calls, twice per call with out= (client/python/bench/profile_ipc.py).
    The buffers are reused, so a query allocates nothing; one per thread.
    """

    ATTRS = (CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
             CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
             CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE)

    def __init__(self):
        self.mtype, self.ctx, self.dev = ctypes.c_uint(), ctypes.c_void_p(), ctypes.c_int()
        self.bid, self.base, self.size = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_size_t()
        vals = (self.mtype, self.ctx, self.dev, self.bid, self.base, self.size)
        self.attrs = (ctypes.c_int * 6)(*self.ATTRS)
        self.data = (ctypes.c_void_p * 6)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])


_local = threading.local()


def allocation_of(ptr):
    """Allocation for a device pointer (base, size, device ordinal, CUDA buffer id).

    The buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID) is unique to one
    allocation for the process's life: an allocation freed and replaced at the
    same address gets a new one, which is how the registration cache notices.
    """
    l = lib()
    q = getattr(_local, "query", None)
    if q is None:
        q = _local.query = _Query()
    q.mtype.value = 0
    # cuPointerGetAttributes answers every attribute it can; for memory the
    # driver does not know it leaves memory type 0 and returns success.
    rc = l.cuPointerGetAttributes(6, q.attrs, q.data, ptr)
    if rc == 0 and q.mtype.value == CU_MEMORYTYPE_DEVICE and q.size.value:
        return Allocation(q.dev.value, q.base.value, q.size.value, q.bid.value, q.ctx.value)
    return _allocation_of_one_by_one(l, ptr)


def _allocation_of_one_by_one(l, ptr):
    """allocation_of through cuPointerGetAttribute, one attribute a call: the
    errors name what is wrong, and older drivers without the range attributes
    fall back to cuMemGetAddressRange."""
    rc, mtype = _attr(l, ptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ctypes.c_uint)
    if rc != 0 or mtype != CU_MEMORYTYPE_DEVICE:
        raise invalid_argument("0x%x is not CUDA device memory (%s)" %
                         (ptr, _text(l, rc) if rc else "memory type %d" % mtype))
    _, ctx = _attr(l, ptr, CU_POINTER_ATTRIBUTE_CONTEXT, ctypes.c_void_p)
    _, dev = _attr(l, ptr, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ctypes.c_int)
    rc, bid = _attr(l, ptr, CU_POINTER_ATTRIBUTE_BUFFER_ID, ctypes.c_uint64)
    _check(l, "cuPointerGetAttribute(BUFFER_ID)", rc)
    rc1, base = _attr(l, ptr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ctypes.c_uint64)
    rc2, size = _attr(l, ptr, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ctypes.c_size_t)
    if rc1 != 0 or rc2 != 0:  # older drivers: cuMemGetAddressRange in the pointer's context
        b, s = ctypes.c_uint64(), ctypes.c_size_t()
        with pushed(ctx):
            _check(l, "cuMemGetAddressRange", l.cuMemGetAddressRange_v2(ctypes.byref(b), ctypes.byref(s), ptr))
        base, size = b.value, s.value
    return Allocation(dev, base, size, bid, ctx)


def buffer_id_at(ptr):
    """The CUDA buffer id of the allocation holding `ptr` now, or None if none does."""
    l = lib()
    q = getattr(_local, "bid", None)
    if q is None:  # this thread's result slot: a planned call checks every time
        v = ctypes.c_uint64()
        q = _local.bid = (v, ctypes.byref(v))
    rc = l.cuPointerGetAttribute(q[1], CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr)
    return q[0].value if rc == 0 else None


def current_context():
    """The calling thread's current CUDA context (None when it has none)."""
    l = lib()
    q = getattr(_local, "ctx", None)
    if q is None:
        v = ctypes.c_void_p()
        q = _local.ctx = (v, ctypes.byref(v))
    if l.cuCtxGetCurrent(q[1]) != 0:
        return None
    return q[0].value


class pushed:
    """Makes `ctx` current on this thread for a block."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        _check(lib(), "cuCtxPushCurrent", lib().cuCtxPushCurrent_v2(self.ctx))

    def __exit__(self, *exc):
        old = ctypes.c_void_p()
        lib().cuCtxPopCurrent_v2(ctypes.byref(old))


def ipc_handle(alloc):
    """The 64-byte cudaIpcMemHandle_t of an allocation's base."""
    l = lib()
    h = ctypes.create_string_buffer(64)
    with pushed(alloc.context):
        rc = l.cuIpcGetMemHandle(h, alloc.base)
    if rc != 0:
        raise CudaError("cuIpcGetMemHandle", rc, _text(l, rc) +
                        "; memory from cuMemCreate/expandable segments (PYTORCH_CUDA_ALLOC_CONF="
                        "expandable_segments:True) or managed memory cannot be shared over CUDA IPC")
    return h.raw


_uuids = {}


def device_uuid(ordinal):
    """"GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of a device ordinal of this process."""
    u = _uuids.get(ordinal)
    if u is None:
        l = lib()
        d = ctypes.c_int()
        _check(l, "cuDeviceGet", l.cuDeviceGet(ctypes.byref(d), ordinal))
        raw = ctypes.create_string_buffer(16)
        _check(l, "cuDeviceGetUuid", l.cuDeviceGetUuid(raw, d.value))
        h = raw.raw.hex()
        u = "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
        _uuids[ordinal] = u
    return u


def stream_synchronize(stream, context=None):
    """cuStreamSynchronize (stream 0x1: the legacy default stream)."""
    l = lib()
    if context is not None:
        with pushed(context):
            _check(l, "cuStreamSynchronize", l.cuStreamSynchronize(stream))
    else:
        _check(l, "cuStreamSynchronize", l.cuStreamSynchronize(stream))
