"""How Client.call() reaches the daemon: unary Execute, or one persistent
ExecuteStream shared by every call of the client (the default).

grpcio's synchronous unary path sets up an HTTP/2 stream, its headers and
trailers, and a completion queue per call; on one long-lived ExecuteStream a
call is one message each way. Each request carries a request_id of this
stream; a reader thread hands each response to the caller waiting for it.

Rules kept identical to unary Execute:
  - a request's error comes back as its response's status: the same
    KerneldError subclass, code and message;
  - timeout= is a deadline: the caller gets DeadlineExceeded when it passes;
  - a stream that fails (daemon restarted, connection lost, draining) fails
    the calls waiting on it with the stream's status; the next call opens a
    new stream (a call whose request never reached a dead stream is sent on
    the new one).
What differs (Client(rpc="unary") when it matters): a request abandoned by
its caller (deadline, KeyboardInterrupt) still runs in the daemon, which
cannot be told to cancel one message of a stream; the shared memory it uses
goes back to the pool only when its response arrives.
"""
import itertools
import queue
import threading

import grpc

from ._errors import error_for, from_rpc_error

_END = object()
_DEADLINE = grpc.StatusCode.DEADLINE_EXCEEDED


class _Waiter:
    __slots__ = ("lock", "resp", "err", "late")

    def __init__(self):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.resp = None
        self.err = None
        self.late = None  # set when the caller gave up: run when the response comes


class _Conn:
    """One ExecuteStream and its reader thread."""

    def __init__(self, open_stream, metadata):
        self.q = queue.SimpleQueue()
        self.pending = {}
        self.lock = threading.Lock()
        self.dead = False
        self.err = None
        self.ids = itertools.count(1)
        self.call = open_stream(iter(self.q.get, _END), metadata=metadata)
        self.reader = threading.Thread(target=self._read, name="kerneld-call-stream", daemon=True)
        self.reader.start()

    def send(self, req):
        """Queues req; returns its waiter, or None when this stream is already dead."""
        w = _Waiter()
        rid = "c%d" % next(self.ids)
        req.request_id = rid
        with self.lock:
            if self.dead:
                return None, None
            self.pending[rid] = w
        self.q.put(req)
        return rid, w

    def wait(self, rid, w, timeout, on_abandon):
        try:
            got = w.lock.acquire(True, -1 if timeout is None else max(timeout, 0))
        except BaseException:  # KeyboardInterrupt: the request is left to run
            got = self._abandon(rid, w, on_abandon)
            if not got:
                raise
        if not got and not self._abandon(rid, w, on_abandon):
            raise error_for(_DEADLINE, "Deadline Exceeded")
        if w.err is not None:
            raise w.err
        return w.resp

    def _abandon(self, rid, w, on_abandon):
        """True when the response came in the meantime (then it is the caller's)."""
        with self.lock:
            if rid in self.pending:
                w.late = on_abandon() if on_abandon is not None else _nothing
                return False
        w.lock.acquire()  # released by the reader already, or about to be
        return True

    def _read(self):
        err = None
        try:
            for resp in self.call:
                with self.lock:
                    w = self.pending.pop(resp.request_id, None)
                if w is None:
                    continue
                if w.late is not None:
                    _run(w.late)
                    continue
                w.resp = resp
                w.lock.release()
        except grpc.RpcError as e:
            err = from_rpc_error(e)
        except Exception as e:  # pragma: no cover - a response that does not parse
            err = error_for(grpc.StatusCode.INTERNAL, "kerneld: the call stream failed: %s" % e)
        if err is None:
            err = error_for(grpc.StatusCode.UNAVAILABLE,
                            "kerneld: the daemon ended the call stream before this response")
        with self.lock:
            self.dead = True
            self.err = err
            left, self.pending = self.pending, {}
        for w in left.values():
            if w.late is not None:
                _run(w.late)
            else:
                w.err = err
                w.lock.release()

    def close(self):
        with self.lock:
            self.dead = True
        self.q.put(_END)
        try:
            self.call.cancel()
        except Exception:
            pass


def _nothing():
    pass


def _run(f):
    try:
        f()
    except Exception:
        pass


class CallStream:
    """Client.call() over one ExecuteStream, opened on first use and reopened
    after a failure. Thread-safe: any number of threads call execute()."""

    def __init__(self, open_stream, metadata):
        self._open = open_stream
        self._md = metadata
        self._conn = None
        self._lock = threading.Lock()
        self._closed = False

    def _current(self, dead=None):
        c = self._conn
        if c is not None and c is not dead and not c.dead:
            return c
        with self._lock:
            if self._closed:
                raise error_for(grpc.StatusCode.CANCELLED, "kerneld: the client is closed")
            c = self._conn
            if c is None or c is dead or c.dead:
                c = self._conn = _Conn(self._open, self._md)
            return c

    def execute(self, req, timeout=None, on_abandon=None):
        """Sends req, waits for its response (an ExecuteResponse, status not checked).

        on_abandon(): called (under a lock, briefly) when the caller gives up
        waiting; returns what to run once the abandoned response arrives."""
        c = self._current()
        rid, w = c.send(req)
        if w is None:  # the stream died before we queued: nothing was sent, use a new one
            c = self._current(dead=c)
            rid, w = c.send(req)
            if w is None:
                raise c.err or error_for(grpc.StatusCode.UNAVAILABLE, "kerneld: the call stream ended")
        return c.wait(rid, w, timeout, on_abandon)

    def close(self):
        with self._lock:
            self._closed = True
            c, self._conn = self._conn, None
        if c is not None:
            c.close()
