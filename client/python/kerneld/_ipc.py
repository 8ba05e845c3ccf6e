"""CUDA IPC registrations, one per allocation, cached.

A GPU tensor lives inside a cudaMalloc allocation (PyTorch's caching
allocator and cupy's pool hand out pieces of bigger ones). We register the
whole allocation once (RegisterCudaIpcBuffer with its base's IPC handle) and
send (buffer_id, tensor address - base) with each request.

The cache is keyed by (device, base, size). An allocation freed and replaced
at the same address (torch.cuda.empty_cache() then a new tensor, say) would
hit a stale entry, so each entry also keeps the allocation's CUDA buffer id
(CU_POINTER_ATTRIBUTE_BUFFER_ID: unique per allocation for the process's
life, never reused). Every lookup compares it with the buffer id found at the
pointer now; a mismatch unregisters the old registration and registers the
new allocation. When a new allocation is registered, every other entry is
checked the same way and entries whose allocation is gone are unregistered,
so the daemon does not keep freed memory mapped.
"""
import os
import threading

from . import _cuda


class _Entry:
    __slots__ = ("buffer_id", "cu_id", "base", "size", "device", "pinned")

    def __init__(self, buffer_id, alloc, pinned=False):
        self.buffer_id, self.cu_id = buffer_id, alloc.buffer_id
        self.base, self.size, self.device, self.pinned = alloc.base, alloc.size, alloc.device, pinned


class IpcRegistry:
    def __init__(self, register, unregister):
        """register(handle, device_uuid, byte_size, name) -> buffer_id; unregister(buffer_id)."""
        self._register, self._unregister = register, unregister
        self._entries = {}
        self._lock = threading.Lock()
        self.registrations = 0  # how many RegisterCudaIpcBuffer calls were made

    def resolve(self, arg, pinned=False):
        """(buffer_id, offset) for a CudaArg; registers its allocation when new or replaced."""
        alloc = _cuda.allocation_of(arg.ptr)
        arg.device = alloc.device
        arg.context = alloc.context
        key = (alloc.device, alloc.base, alloc.size)
        with self._lock:
            e = self._entries.get(key)
            if e is not None and e.cu_id == alloc.buffer_id:
                if pinned:
                    e.pinned = True
                arg.ipc_entry = e
                return e.buffer_id, arg.ptr - alloc.base
            stale = [] if e is None else [self._entries.pop(key)]
            for k, o in list(self._entries.items()):
                if _cuda.buffer_id_at(o.base) != o.cu_id:
                    stale.append(self._entries.pop(k))
            for o in stale:
                self._drop(o)
            handle = _cuda.ipc_handle(alloc)
            bid = self._register(handle, _cuda.device_uuid(alloc.device), alloc.size,
                                 "python pid %d 0x%x+%d" % (os.getpid(), alloc.base, alloc.size))
            self.registrations += 1
            arg.ipc_entry = self._entries[key] = _Entry(bid, alloc, pinned)
            return bid, arg.ptr - alloc.base

    def current(self, entry):
        """Whether `entry` (a resolved argument's .ipc_entry) is still registered."""
        return self._entries.get((entry.device, entry.base, entry.size)) is entry

    def _drop(self, e):
        try:
            self._unregister(e.buffer_id)
        except Exception:
            pass  # expired or already gone: nothing to free

    def release(self, buffer_id):
        with self._lock:
            for k, e in list(self._entries.items()):
                if e.buffer_id == buffer_id:
                    del self._entries[k]
                    self._drop(e)

    def buffer_ids(self):
        with self._lock:
            return [e.buffer_id for e in self._entries.values()]

    def close(self):
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for e in entries:
            self._drop(e)
