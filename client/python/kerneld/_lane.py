"""Client.call() over the same-host lane (Client(..., lane=True), docs/lane.md).

The lane is a shared-memory ring of request/response slots that the daemon
hands a client on its --lane_socket; a request is the same serialized
ExecuteRequest, answered by the same request path, without gRPC. The ring
protocol is spoken by libkerneld_native (client/native/native_lane.h: the
C++ client's own ring code), reached through ctypes like rpc="native":

  - the protocol needs atomic read-modify-writes, a full fence and futex
    calls, which Python cannot issue itself;
  - a call busy-polls its slot for a while before it sleeps (a wake-up is
    what a fast call mostly pays), and that poll must not hold the GIL:
    ctypes drops it for the whole call;
  - one ctypes call sends and waits; a second copies the answer out.

Nothing falls back to gRPC by itself: no lane is an error at Client(), and
a lane that dies fails the calls in flight (kerneld.Unavailable); the next
call opens a new lane. A request the daemon never took (it was gone before)
is sent again on the new lane at once.

Waits are cut into 0.2 s slices so that Ctrl-C reaches the calling thread;
an abandoned request (Ctrl-C, timeout) still runs in the daemon, which
cannot be told to drop one it took: its slot is reused once it is answered.
"""
import ctypes
import threading

import grpc

from ._errors import error_for

_SLICE_S = 0.2
_CODES = {s.value[0]: s for s in grpc.StatusCode}
_PENDING, _NOT_TAKEN = -1, -2


def declare(lib):
    """Declares the lane's functions on lib; None, or why it has none (a
    library built before the lane)."""
    c = ctypes
    vp, cp, sz, dbl, i = c.c_void_p, c.c_char_p, c.c_size_t, c.c_double, c.c_int
    # name: (restype, argtypes), as client/native/native_lane.h declares them
    sigs = {
        "kd_lane_connect": (vp, [cp, cp, sz, c.POINTER(i), cp, sz]),
        "kd_lane_free": (None, [vp]),
        "kd_lane_slots": (c.c_uint32, [vp]),
        "kd_lane_slot_bytes": (c.c_uint64, [vp]),
        "kd_lane_set_spin": (None, [vp, dbl]),
        "kd_lane_call": (i, [vp, cp, sz, dbl, dbl, c.POINTER(i), c.POINTER(vp), c.POINTER(sz)]),
        "kd_lane_wait": (i, [vp, i, dbl, c.POINTER(vp), c.POINTER(sz)]),
        "kd_lane_abandon": (None, [vp, i]),
    }
    try:
        for name, (restype, argtypes) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes
    except AttributeError as e:
        return "libkerneld_native %s has no lane (%s): it is older than the lane" % (
            getattr(lib, "_name", "?"), e)
    return None


def socket_path(target):
    """A lane socket given as "unix:/path" or "/path": the path."""
    return target[5:] if target.startswith("unix:") else target


class _Lane:
    """One connected lane and the calls using it (freed when none is left)."""
    __slots__ = ("handle", "busy", "dead")

    def __init__(self, handle):
        self.handle, self.busy, self.dead = handle, 0, False


class _Out(threading.local):
    """A thread's ctypes out-parameters, made once."""

    def __init__(self):
        self.slot = ctypes.c_int()
        self.ptr = ctypes.c_void_p()
        self.n = ctypes.c_size_t()
        self.refs = (ctypes.byref(self.slot), ctypes.byref(self.ptr), ctypes.byref(self.n))


class LaneCalls:
    """Execute requests through a lane: the interface of _native.NativeCalls
    (execute, execute_bytes, close), so call plans use it as they are.
    Thread-safe: each call takes a slot of its own (up to the daemon's
    --lane_slots at once; more wait for one)."""

    def __init__(self, lib, path, token=None, spin_us=None):
        self._lib = lib
        self._path = socket_path(path)
        self._token = (token or "").encode()
        self._spin = None if spin_us is None else spin_us / 1e6
        self._guard = threading.Lock()
        self._closed = False
        self._out = _Out()
        self._lane = self._connect()  # raises: no lane is an error, said at once

    @property
    def path(self):
        return self._path

    def slots(self):
        lane = self._lane
        return self._lib.kd_lane_slots(lane.handle) if lane is not None else 0

    def _connect(self):
        code = ctypes.c_int()
        err = ctypes.create_string_buffer(1024)
        h = self._lib.kd_lane_connect(self._path.encode(), self._token, len(self._token),
                                      ctypes.byref(code), err, len(err))
        if not h:
            raise error_for(_CODES.get(code.value, grpc.StatusCode.UNAVAILABLE),
                            "kerneld: no lane: %s" % err.value.decode("utf-8", errors="replace"))
        if self._spin is not None:
            self._lib.kd_lane_set_spin(h, self._spin)
        return _Lane(h)

    def _take(self):
        """The current lane with this call counted on it (a new one after the
        last died)."""
        with self._guard:
            if self._closed:
                raise error_for(grpc.StatusCode.CANCELLED, "kerneld: the client is closed")
            lane = self._lane
            if lane is None or lane.dead:
                lane = self._lane = self._connect()
            lane.busy += 1
            return lane

    def _give(self, lane, dead=False):
        with self._guard:
            lane.busy -= 1
            if dead:
                lane.dead = True
            free = lane.busy == 0 and (lane.dead or self._closed) and lane.handle is not None
            h = lane.handle if free else None
            if free:
                lane.handle = None
                if self._lane is lane:
                    self._lane = None
        if h:
            self._lib.kd_lane_free(h)

    def execute(self, req, timeout=None):
        """Sends req (an ExecuteRequest), returns the ExecuteResponse bytes;
        raises KerneldError when the daemon answered with an error status."""
        return self.execute_bytes(req.SerializeToString(), timeout)

    def execute_bytes(self, data, timeout=None):
        """execute() for a request already serialized (a call plan's)."""
        lib, o = self._lib, self._out
        slot_ref, ptr_ref, n_ref = o.refs
        t = float(timeout) if timeout else 0.0
        for attempt in (0, 1):
            lane = self._take()
            dead = False
            try:
                h = lane.handle
                code = lib.kd_lane_call(h, data, len(data), t, _SLICE_S, slot_ref, ptr_ref, n_ref)
                try:
                    while code == _PENDING:  # between slices Python can raise KeyboardInterrupt
                        code = lib.kd_lane_wait(h, o.slot.value, _SLICE_S, ptr_ref, n_ref)
                except BaseException:
                    lib.kd_lane_abandon(h, o.slot.value)  # answered later, then reused
                    raise
                n = o.n.value
                out = ctypes.string_at(o.ptr.value, n) if n else b""
                if code == 0:
                    return out
                # The daemon went away (restart, drain): the next call opens a new lane.
                dead = code in (_NOT_TAKEN, grpc.StatusCode.UNAVAILABLE.value[0])
            finally:
                self._give(lane, dead)
            if code == _NOT_TAKEN and attempt == 0:
                continue  # it never ran: send it on a new lane
            msg = out.decode("utf-8", errors="replace")
            if code == _NOT_TAKEN:
                code = grpc.StatusCode.UNAVAILABLE.value[0]
            raise error_for(_CODES.get(code, grpc.StatusCode.UNKNOWN), msg)

    def close(self):
        """Refuses later calls; the lane goes when the last call in flight ends."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            lane = self._lane
            free = lane is not None and lane.busy == 0 and lane.handle is not None
            h = lane.handle if free else None
            if free:
                lane.handle = None
                self._lane = None
        if h:
            self._lib.kd_lane_free(h)
