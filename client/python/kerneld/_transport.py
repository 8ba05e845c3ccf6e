"""How Client.call() reaches the daemon: unary Execute, or one persistent
ExecuteStream shared by every call of the client (the default).

grpcio's synchronous unary path sets up an HTTP/2 stream, its headers and
trailers, and a completion queue per call; on one long-lived ExecuteStream a
call is one message each way. Each request carries a request_id of this
stream, and the response comes back with it.

Who reads the responses (leader/follower, public grpcio API only): a waiting
call without a deadline takes the reading itself. It calls next() on
grpcio's response iterator, hands responses that belong to other callers to
them, and once its own is in passes the reading on to another waiting
caller, or to nobody when none waits. One caller alone thus reads its own
response: no thread of ours in between (grpcio's request-consumer thread and
its channel spin thread remain: its synchronous bidi API has no other way).
A call with a deadline never reads: next() cannot time out, so a helper
thread reads for it (and stays in next() while the last call had a
deadline, as the dedicated reader did before). A thread interrupted inside
next() (KeyboardInterrupt) leaves grpcio's iterator unusable: the stream is
cancelled, the other calls on it fail with CANCELLED, the next call opens a
new one.

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
import time

import grpc

from ._errors import error_for, from_rpc_error

_END = object()
_DEADLINE = grpc.StatusCode.DEADLINE_EXCEEDED


class _Waiter:
    """One caller's slot. lock is held while nobody has woken the caller:
    _wake() releases it (once: sig) when its response or error is in, or
    when it is asked to take over reading."""
    __slots__ = ("lock", "sig", "resp", "err", "done", "late", "lead")

    def __init__(self, lead):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.sig = False
        self.resp = None
        self.err = None
        self.done = False
        self.late = None  # set when the caller gave up: run when the response comes
        self.lead = lead  # may read the stream itself (it has no deadline)


def _wake(w):
    """Under the connection's lock."""
    if not w.sig:
        w.sig = True
        w.lock.release()


class _Conn:
    """One ExecuteStream. Nobody reads it while no call waits. A waiting call
    without a deadline reads it itself (the leader): it hands responses that
    are others' to their callers and, once its own is in, passes the reading
    on to another waiter (or to the helper thread). A call with a deadline
    cannot read (next() on grpcio's iterator cannot time out): the helper
    thread reads for it."""

    def __init__(self, open_stream, metadata):
        self.q = queue.SimpleQueue()
        self.pending = {}
        self.lock = threading.Lock()
        self.dead = False
        self.err = None
        self.leading = False  # a thread reads (or is about to)
        self.helper = None    # the helper thread's _Waiter, made on first need
        self.linger = False   # the last call has a deadline: the helper keeps reading
        self.ids = itertools.count(1)
        self.call = open_stream(iter(self.q.get, _END), metadata=metadata)

    def send(self, req, lead=True):
        """Queues req; returns (request id, waiter), or (None, None) when this
        stream is already dead."""
        w = _Waiter(lead)
        rid = "c%d" % next(self.ids)
        req.request_id = rid
        with self.lock:
            if self.dead:
                return None, None
            self.pending[rid] = w
            self.linger = not lead
        self.q.put(req)
        return rid, w

    def wait(self, rid, w, timeout, on_abandon):
        end = None if timeout is None else time.monotonic() + max(timeout, 0)
        woke = expired = False
        try:
            while True:
                lead = False
                with self.lock:
                    if woke:
                        w.sig = False
                        woke = False
                    if w.done:
                        break
                    if not self.leading:
                        if w.lead:
                            self.leading = lead = True
                        else:
                            self._hand_on()
                if lead:
                    self._lead(w)
                    break
                if end is None:
                    w.lock.acquire()
                else:
                    left = end - time.monotonic()
                    if left <= 0 or not w.lock.acquire(True, left):
                        expired = not self._abandon(rid, w, on_abandon)
                        break
                woke = True
        except _Interrupted as e:  # we were reading: the stream is lost
            w.late = on_abandon() if on_abandon is not None else _nothing  # never run
            raise e.exc
        except BaseException:  # KeyboardInterrupt while waiting: the request is left to run
            if not self._abandon(rid, w, on_abandon):
                raise
        if expired:
            raise error_for(_DEADLINE, "Deadline Exceeded")
        if w.err is not None:
            raise w.err
        return w.resp

    def _abandon(self, rid, w, on_abandon):
        """True when the response came in the meantime (then it is the caller's)."""
        with self.lock:
            if w.done:
                return True
            w.late = on_abandon() if on_abandon is not None else _nothing
            self._hand_on()  # in case we were asked to read
            return False

    def _hand_on(self):
        """Under the lock, with nobody reading: wakes a waiter that may read,
        or the helper thread, when there is something to read."""
        if self.leading or not self.pending:
            return
        for w in self.pending.values():
            if w.lead and w.late is None:
                _wake(w)
                return
        if self.helper is None:
            self.helper = _Waiter(True)
            threading.Thread(target=self._help, name="kerneld-call-stream", daemon=True).start()
        _wake(self.helper)

    def _help(self):
        h = self.helper
        while True:
            h.lock.acquire()
            with self.lock:
                h.sig = False
                if self.leading or not self.pending:
                    if self.dead:
                        return
                    continue
                self.leading = True
            try:
                self._lead(None)
            except _Interrupted:
                return

    def _lead(self, me):
        """Reads responses until me's is in (me None: until nothing is pending).
        Called with self.leading set by the caller; clears it on return."""
        mine = True
        try:
            while True:
                try:
                    resp = next(self.call)
                except grpc.RpcError as e:
                    mine = False
                    return self._fail(from_rpc_error(e))
                except StopIteration:
                    mine = False
                    return self._fail(error_for(grpc.StatusCode.UNAVAILABLE,
                                                "kerneld: the daemon ended the call stream before "
                                                "this response"))
                except Exception as e:  # pragma: no cover - a response that does not parse
                    mine = False
                    return self._fail(error_for(grpc.StatusCode.INTERNAL,
                                                "kerneld: the call stream failed: %s" % e))
                except BaseException as e:
                    # Interrupted inside grpcio's next(): its receive is left
                    # outstanding and the iterator cannot be read again.
                    mine = False
                    self._fail(error_for(grpc.StatusCode.CANCELLED,
                                         "kerneld: the call stream was interrupted (%s in a thread "
                                         "reading it); this request may have run" % type(e).__name__),
                               cancel=True, keep=me)
                    raise _Interrupted(e)
                late = None
                with self.lock:
                    w = self.pending.pop(resp.request_id, None)
                    if w is not None:
                        if w.late is not None:
                            late = w.late
                        else:
                            w.resp = resp
                            w.done = True
                            if w is not me:
                                _wake(w)
                    stop = me.done if me is not None else not (self.pending or self.linger)
                    if stop:
                        self.leading = mine = False
                        self._hand_on()
                if late is not None:
                    _run(late)
                if stop:
                    return
        finally:
            if mine:  # left by an exception between reads: let another thread read
                with self.lock:
                    self.leading = False
                    self._hand_on()

    def _fail(self, err, cancel=False, keep=None):
        with self.lock:
            self.dead = True
            self.err = err
            self.leading = False
            left, self.pending = self.pending, {}
            if self.helper is not None:
                _wake(self.helper)
            lates = []
            for w in left.values():
                if w is keep:
                    continue
                if w.late is not None:
                    lates.append(w.late)
                else:
                    w.err = err
                    w.done = True
                    _wake(w)
        if cancel:
            self._cancel()
        for f in lates:
            _run(f)

    def _cancel(self):
        self.q.put(_END)
        try:
            self.call.cancel()
        except Exception:
            pass

    def close(self):
        with self.lock:
            self.dead = True
            if self.helper is not None:
                _wake(self.helper)
        self._cancel()


class _Interrupted(Exception):
    def __init__(self, exc):
        Exception.__init__(self)
        self.exc = exc


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
        lead = timeout is None
        c = self._current()
        rid, w = c.send(req, lead)
        if w is None:  # the stream died before we queued: nothing was sent, use a new one
            c = self._current(dead=c)
            rid, w = c.send(req, lead)
            if w is None:
                raise c.err or error_for(grpc.StatusCode.UNAVAILABLE, "kerneld: the call stream ended")
        return c.wait(rid, w, timeout, on_abandon)

    def close(self):
        with self._lock:
            self._closed = True
            c, self._conn = self._conn, None
        if c is not None:
            c.close()
