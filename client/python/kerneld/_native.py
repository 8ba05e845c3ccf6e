"""Client.call() over libkerneld_native (rpc="native"): a unary Execute made
by gRPC C++ on the caller's own thread, reached through ctypes.

Why: grpcio's synchronous API passes every call through its own threads and
back; that is most of the Python client's cost over kernelctl (docs/
performance.md). libkerneld_native (client/native/native_call.h) starts the
call and waits for it on the calling thread's completion queue, as kernelctl
does, with the GIL released while it waits. Requests and responses cross as
serialized bytes.

Where the library comes from, in order:
  1. $KERNELD_NATIVE_LIB: a path to libkerneld_native.so ("0" or "off":
     never use it);
  2. next to the daemon: <prefix>/lib of a `kerneld` found on $PATH
     (scripts/install's prefix and the relocatable package both put it there);
  3. the loader's search path (ldconfig, $LD_LIBRARY_PATH).
A library that is absent, does not load or has another ABI means the client
uses grpcio ("stream"); Client(rpc="native") then raises InvalidArgument saying
which.

Semantics are unary Execute's: one RPC per call; a deadline or a
KeyboardInterrupt cancels the call in the daemon. The wait is cut into 0.2 s
slices so that Ctrl-C reaches the calling thread.

gRPC's own logging: the library's gRPC core writes INFO lines to stderr
unless told otherwise, so its first channel is made with GRPC_VERBOSITY as
kerneld/_grpc_log.py says (ERROR unless the user asks for more).

Spinning (spin_us): a thread that sleeps while its call is in flight is woken
when the response comes, and on virtual machines that wake-up is dear (tens
of microseconds, more the longer the core slept). So a call first
busy-polls its queue for a short while (the GIL released) and only then
sleeps. Nothing spins while no call is in flight: an idle client costs no
CPU.
"""
import ctypes
import ctypes.util
import os
import shutil
import threading
import time

import grpc

from . import _grpc_log
from ._channel import _read
from ._errors import error_for, invalid_argument

_ABI = 2
_SLICE_S = 0.2
# spin_us=None (the default) adapts: a call busy-polls for up to twice the
# recent calls' latency (an EWMA), and not at all once calls take longer
# than _SPIN_MAX_S, where a wake-up is a small part of the call.
_SPIN_MAX_S = 250e-6
_EWMA = 0.125
_CODES = {s.value[0]: s for s in grpc.StatusCode}
_EXECUTE = b"/kerneld.v1.KernelService/Execute"
_EXECUTE_STREAM = b"/kerneld.v1.KernelService/ExecuteStream"

_lock = threading.Lock()
_loaded = {}  # $KERNELD_NATIVE_LIB -> (lib or None, why not)


def _candidates():
    env = os.environ.get("KERNELD_NATIVE_LIB")
    if env is not None:
        if env.strip().lower() in ("", "0", "off", "no", "false"):
            return None, "KERNELD_NATIVE_LIB=%s turns it off" % env
        return [env], None
    out = []
    daemon = shutil.which("kerneld")
    if daemon:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(daemon)))
        out.append(os.path.join(prefix, "lib", "libkerneld_native.so"))
    found = ctypes.util.find_library("kerneld_native")
    if found:
        out.append(found)
    out.append("libkerneld_native.so")  # $LD_LIBRARY_PATH
    return out, None


_verbosity_set = False


def _with_grpc_verbosity(fn, *args):
    """fn(*args) with GRPC_VERBOSITY set for the library's gRPC core, which
    reads it once, at its first channel (kerneld/_grpc_log.py says why)."""
    global _verbosity_set
    if _verbosity_set:
        return fn(*args)
    with _lock:
        if _verbosity_set:
            return fn(*args)
        _verbosity_set = True
        with _grpc_log.verbosity():
            return fn(*args)


def _declare(lib):
    c = ctypes
    vp, cp, sz, dbl, i = c.c_void_p, c.c_char_p, c.c_size_t, c.c_double, c.c_int
    # name: (restype, argtypes), as client/native/native_call.h declares them
    sigs = {
        "kd_abi_version": (i, []),
        "kd_channel_new": (vp, [cp, i, cp, sz, cp, sz, cp, sz, cp, c.POINTER(cp), c.POINTER(cp),
                                sz, cp, sz]),
        "kd_channel_free": (None, [vp]),
        "kd_call_start": (vp, [vp, cp, cp, sz, cp, dbl]),
        "kd_call_wait": (i, [vp, dbl]),
        "kd_call_spin": (i, [vp, dbl]),
        "kd_call_cancel": (None, [vp]),
        "kd_call_data": (vp, [vp, c.POINTER(sz)]),
        "kd_call_message": (cp, [vp]),
        "kd_call_free": (None, [vp]),
        "kd_stream_open": (vp, [vp, cp, cp]),
        "kd_stream_send": (i, [vp, cp, sz]),
        "kd_stream_wait": (i, [vp, dbl, dbl, c.POINTER(i)]),
        "kd_stream_data": (vp, [vp, c.POINTER(sz)]),
        "kd_stream_message": (cp, [vp]),
        "kd_stream_cancel": (None, [vp]),
        "kd_stream_free": (None, [vp]),
    }
    for name, (restype, argtypes) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes


def load():
    """(the library, None), or (None, why it is not used)."""
    key = os.environ.get("KERNELD_NATIVE_LIB")
    with _lock:
        if key in _loaded:
            return _loaded[key]
        paths, why = _candidates()
        lib = None
        if paths is not None:
            tried = []
            for p in paths:
                if os.sep in p and not os.path.exists(p):
                    tried.append("%s: no such file" % p)
                    continue
                try:
                    cand = ctypes.CDLL(p)  # CDLL: the GIL is released during each call
                    _declare(cand)
                    abi = cand.kd_abi_version()
                except (OSError, AttributeError) as e:
                    tried.append("%s: %s" % (p, e))
                    continue
                if abi != _ABI:
                    tried.append("%s: ABI %d, this client needs %d" % (p, abi, _ABI))
                    continue
                lib = cand
                break
            why = None if lib is not None else "libkerneld_native.so not usable (%s)" % "; ".join(tried)
        _loaded[key] = (lib, why)
        return lib, why


class NativeCalls:
    """Execute RPCs through libkerneld_native on one gRPC C++ channel of its
    own (beside the client's grpcio channel, which serves everything else).
    Thread-safe: each thread's calls wait on that thread's queue."""

    def __init__(self, lib, target, metadata, tls, tls_ca, tls_cert, tls_key, server_name, options,
                 spin_us=None, stream=True):
        self._lib = lib
        self._stream_mode = bool(stream)
        self._streams = {}  # thread ident -> its kd_stream
        if spin_us is not None and (not isinstance(spin_us, (int, float)) or spin_us < 0):
            raise invalid_argument("kerneld.Client: spin_us=%r; None (adapts), 0 (never spin) or a "
                             "number of microseconds" % (spin_us,))
        self._spin = None if spin_us is None else spin_us / 1e6
        self._ewma = None  # seconds, recent calls' latency (spin_us=None)
        self._auth = None
        for k, v in metadata or ():
            if k == "authorization":
                self._auth = v.encode()
        ca, cert, key = _read(tls_ca), _read(tls_cert), _read(tls_key)
        use_tls = 1 if (tls or ca or cert or key) else 0
        keys, values = [], []
        for k, v in options or ():
            if k in ("grpc.max_send_message_length", "grpc.max_receive_message_length") and v == -1:
                continue  # the library's default already
            keys.append(str(k).encode())
            values.append(str(v).encode())
        n = len(keys)
        err = ctypes.create_string_buffer(512)
        self._ch = _with_grpc_verbosity(
            lib.kd_channel_new, target.encode(), use_tls, ca, len(ca or b""), cert,
            len(cert or b""), key, len(key or b""), (server_name or "").encode(),
            (ctypes.c_char_p * n)(*keys), (ctypes.c_char_p * n)(*values), n, err, len(err))
        if not self._ch:
            raise invalid_argument("kerneld.Client: rpc='native' could not open a channel to %s: %s" %
                             (target, err.value.decode(errors="replace")))
        self._closed = False
        self._busy = 0  # calls between start and free: the channel outlives them
        self._guard = threading.Lock()

    def _spin_budget(self):
        spin = self._spin
        if spin is None:
            e = self._ewma
            spin = _SPIN_MAX_S if e is None else (2 * e if e < _SPIN_MAX_S else 0.0)
        return spin

    def _learn(self, t0):
        if self._spin is None:
            dt = time.perf_counter() - t0
            e = self._ewma
            self._ewma = dt if e is None else e + _EWMA * (dt - e)

    def execute(self, req, timeout=None):
        """Sends req (an ExecuteRequest), returns the ExecuteResponse bytes;
        raises KerneldError for a failed RPC or stream. On a stream a request's
        own error comes back inside the response (its status), as on grpcio's."""
        return self.execute_bytes(req.SerializeToString(), timeout)

    def execute_bytes(self, data, timeout=None):
        """execute() for a request already serialized (a call plan's)."""
        lib = self._lib
        with self._guard:
            if self._closed:
                raise error_for(grpc.StatusCode.CANCELLED, "kerneld: the client is closed")
            self._busy += 1
        if self._stream_mode:
            try:
                return self._exchange(data, timeout)
            finally:
                self._done()
        try:
            call = lib.kd_call_start(self._ch, _EXECUTE, data, len(data), self._auth,
                                     float(timeout) if timeout else 0.0)
        except BaseException:
            self._done()
            raise
        try:
            t0 = time.perf_counter()
            spin = self._spin_budget()
            code = lib.kd_call_spin(call, spin) if spin > 0 else -1
            if code < 0:
                code = lib.kd_call_wait(call, _SLICE_S)
            while code < 0:  # between slices Python can raise KeyboardInterrupt here
                code = lib.kd_call_wait(call, _SLICE_S)
            if code != 0:
                msg = lib.kd_call_message(call) or b""
                raise error_for(_CODES.get(code, grpc.StatusCode.UNKNOWN),
                                msg.decode("utf-8", errors="replace"))
            self._learn(t0)
            n = ctypes.c_size_t()
            p = lib.kd_call_data(call, ctypes.byref(n))
            return ctypes.string_at(p, n.value) if n.value else b""
        finally:
            lib.kd_call_free(call)  # cancels and waits when we leave early
            del data  # referenced by the call until here
            self._done()

    # ---- one ExecuteStream per calling thread ----

    def _stream_of_this_thread(self, tid):
        s = self._streams.get(tid)
        if s is None:
            if self._streams:  # threads that ended leave theirs: end those now
                alive = {t.ident for t in threading.enumerate()}
                for other in [k for k in self._streams if k not in alive]:
                    self._drop_stream(other)
            s = self._lib.kd_stream_open(self._ch, _EXECUTE_STREAM, self._auth)
            self._streams[tid] = s
        return s

    def _drop_stream(self, tid, cancel=False):
        s = self._streams.pop(tid, None)
        if s:
            if cancel:
                self._lib.kd_stream_cancel(s)
            self._lib.kd_stream_free(s)

    def _exchange(self, data, timeout):
        lib = self._lib
        tid = threading.get_ident()
        end = None if not timeout else time.monotonic() + float(timeout)

        def slice_left():  # the next wait: a Ctrl-C slice, or less before the deadline
            return _SLICE_S if end is None else max(0.0, min(_SLICE_S, end - time.monotonic()))
        sent = ctypes.c_int()
        for attempt in (0, 1):
            fresh = tid not in self._streams
            s = self._stream_of_this_thread(tid)
            code = lib.kd_stream_send(s, data, len(data))
            if code == 0:
                t0 = time.perf_counter()
                try:
                    code = lib.kd_stream_wait(s, self._spin_budget(), slice_left(), ctypes.byref(sent))
                    while code < 0:  # between slices Python can raise KeyboardInterrupt here
                        if end is not None and time.monotonic() >= end:
                            self._drop_stream(tid, cancel=True)  # cancels the request in the daemon
                            raise error_for(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
                        code = lib.kd_stream_wait(s, 0.0, slice_left(), ctypes.byref(sent))
                except BaseException:
                    self._drop_stream(tid, cancel=True)
                    raise
                if code == 0:
                    self._learn(t0)
                    n = ctypes.c_size_t()
                    p = lib.kd_stream_data(s, ctypes.byref(n))
                    return ctypes.string_at(p, n.value) if n.value else b""
            else:
                sent.value = 0
            msg = (lib.kd_stream_message(s) or b"").decode("utf-8", errors="replace")
            self._drop_stream(tid)
            # A stream that ended while idle (the daemon restarted, the connection
            # dropped): a request that never went out goes on a new one.
            if not sent.value and not fresh and attempt == 0:
                continue
            raise error_for(_CODES.get(code, grpc.StatusCode.UNKNOWN), msg)

    def _done(self):
        with self._guard:
            self._busy -= 1
            free = self._closed and self._busy == 0 and self._ch is not None
            ch, self._ch = (self._ch, None) if free else (None, self._ch)
        if ch:
            self._free_all(ch)

    def _free_all(self, ch):
        for tid in list(self._streams):
            self._drop_stream(tid)
        self._lib.kd_channel_free(ch)

    def close(self):
        """Refuses later calls; the channel goes when the last call in flight ends."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            free = self._busy == 0
            ch, self._ch = (self._ch, None) if free else (None, self._ch)
        if ch:
            self._free_all(ch)
