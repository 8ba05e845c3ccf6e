"""A pool of POSIX shared-memory segments, each registered with the daemon once.

A call checks out one segment big enough for all its tensors (inputs and
outputs at 64-byte aligned offsets), copies inputs in, and gives the segment
back when its response is read; segments are reused by later calls and
unregistered and unlinked on close().
"""
import mmap
import os
import secrets
import threading

import numpy as np

try:
    import _posixshmem  # CPython's shm_open/shm_unlink (multiprocessing.shared_memory uses it)
except ImportError:  # pragma: no cover
    _posixshmem = None

ALIGN = 64
MIN_SEGMENT = 1 << 20


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Segment:
    def __init__(self, size):
        self.name = "/kerneld-py-%d-%s" % (os.getpid(), secrets.token_hex(6))
        flags = os.O_CREAT | os.O_EXCL | os.O_RDWR
        if _posixshmem is not None:
            fd = _posixshmem.shm_open(self.name, flags, 0o600)
        else:
            fd = os.open("/dev/shm" + self.name, flags, 0o600)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            self._unlink()
            raise
        os.close(fd)
        self.size = size
        self.buf = np.frombuffer(self.map, dtype=np.uint8)
        self.buffer_id = None

    def _unlink(self):
        try:
            if _posixshmem is not None:
                _posixshmem.shm_unlink(self.name)
            else:
                os.unlink("/dev/shm" + self.name)
        except FileNotFoundError:
            pass

    def close(self):
        self.buf = None
        try:
            self.map.close()
        except BufferError:
            pass  # a caller still holds a view; the mapping goes when it does
        self._unlink()


class ShmPool:
    """Thread-safe: each checked-out segment belongs to one call until returned."""

    def __init__(self, register, unregister):
        self._register, self._unregister = register, unregister
        self._free = []
        self._all = []
        self._lock = threading.Lock()
        self._closed = False

    def checkout(self, nbytes):
        need = max(align(nbytes), ALIGN)
        with self._lock:
            if self._closed:
                raise RuntimeError("kerneld: the client is closed")
            best = None
            for s in self._free:
                if s.size >= need and (best is None or s.size < best.size):
                    best = s
            if best is not None:
                self._free.remove(best)
                return best
        size = MIN_SEGMENT
        while size < need:
            size *= 2
        seg = Segment(size)
        try:
            seg.buffer_id = self._register(seg)
        except BaseException:
            seg.close()
            raise
        with self._lock:
            self._all.append(seg)
        return seg

    def give_back(self, seg):
        with self._lock:
            if self._closed:
                return
            self._free.append(seg)

    def retire(self, seg):
        """A segment the daemon may still write (its call was abandoned):
        unregistered (the daemon defers that while a request uses it),
        unmapped and unlinked here, never handed to another call."""
        with self._lock:
            if seg in self._all:
                self._all.remove(seg)
            if seg in self._free:
                self._free.remove(seg)
        try:
            self._unregister(seg.buffer_id)
        except Exception:
            pass  # the daemon may be gone; its lease ends the registration
        seg.close()

    def segments(self):
        with self._lock:
            return list(self._all)

    def close(self):
        with self._lock:
            self._closed = True
            segs, self._all, self._free = self._all, [], []
        for s in segs:
            try:
                self._unregister(s.buffer_id)
            except Exception:
                pass  # the daemon may be gone; the name is unlinked regardless
            s.close()
