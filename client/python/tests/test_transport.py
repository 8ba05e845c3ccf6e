"""The call stream's leader/follower reading (kerneld/_transport.py), on a fake
ExecuteStream (no daemon): many threads, deadlines while another thread
reads, a stream failing under a reader, an interrupted reader."""
import queue
import random
import threading
import time
import types

import grpc
import pytest

import kerneld
from kerneld._transport import CallStream
from conftest import wait_until


class _RpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._c, self._d = code, details

    def code(self):
        return self._c

    def details(self):
        return self._d


class FakeServer:
    """Answers each request (a SimpleNamespace: value, delay in s) after its
    delay, in completion order, like the daemon's ExecuteStream."""

    def __init__(self):
        self.calls = []
        self.reads = 0
        self.readers = set()  # threads that called next()

    def open(self, it, metadata=None):
        call = _FakeCall(self, it)
        self.calls.append(call)
        return call


class _FakeCall:
    def __init__(self, server, it):
        self.server = server
        self.out = queue.SimpleQueue()
        self.reading = threading.Lock()
        self.ended = False
        self.hold = None  # an Event: responses wait for it
        threading.Thread(target=self._serve, args=(it,), daemon=True).start()

    def _serve(self, it):
        for req in it:
            t = threading.Timer(req.delay, self._answer, args=(req,))
            t.daemon = True
            t.start()

    def _answer(self, req):
        if self.hold is not None:
            self.hold.wait()
        if getattr(req, "gate", None) is not None:  # an Event: this response waits for it
            req.gate.wait()
        self.out.put(types.SimpleNamespace(request_id=req.request_id, value=req.value))

    def __iter__(self):
        return self

    def __next__(self):
        # grpcio's iterator takes one reader at a time: a second is a bug here
        assert self.reading.acquire(False), "two threads in next() at once"
        try:
            self.server.readers.add(threading.current_thread().name)
            item = self.out.get()
            self.server.reads += 1
        finally:
            self.reading.release()
        if isinstance(item, BaseException):
            self.ended = True
            raise item
        return item

    def fail(self, code=grpc.StatusCode.UNAVAILABLE, details="connection lost"):
        self.out.put(_RpcError(code, details))

    def cancel(self):
        if not self.ended:
            self.out.put(_RpcError(grpc.StatusCode.CANCELLED, "Cancelled"))


def _req(value, delay=0.0, gate=None):
    return types.SimpleNamespace(value=value, delay=delay, request_id="", gate=gate)


def _reading(cs, srv, thread_name, pending=1):
    """True once `thread_name` reads the stream with `pending` calls waiting."""
    c = cs._conn
    return (c is not None and c.leading and thread_name in srv.readers
            and len(c.pending) >= pending)


def test_one_caller_reads_its_own_response():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    for i in range(50):
        assert cs.execute(_req(i)).value == i
    # no thread of ours besides the caller read the stream
    assert srv.readers == {threading.current_thread().name}
    assert cs._conn.helper is None and not cs._conn.leading
    cs.close()


@pytest.mark.parametrize("timeouts", ["none", "all", "mixed"])
def test_many_threads_every_response_to_its_caller(timeouts):
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    errors = []

    def work(t):
        rng = random.Random(t)
        try:
            for i in range(150):
                v = (t, i)
                to = {"none": None, "all": 30.0, "mixed": 30.0 if (t + i) % 2 else None}[timeouts]
                d = rng.choice([0, 0, 0, 0.0005, 0.002])
                r = cs.execute(_req(v, d), timeout=to)
                assert r.value == v, (r.value, v)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a caller hangs: a lost wake-up"
    assert not errors, errors[0]
    c = cs._conn
    assert not c.pending and len(srv.calls) == 1
    # the helper stays in next() after a call with a deadline, else nobody
    # reads; the last caller's helper may still be on its way back into it
    wait_until(lambda: c.leading == c.linger, 10, "the helper back in next() (leading == linger)")
    cs.close()


def test_leader_hands_over_when_its_response_comes_first():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    got = {}

    def call(name, delay, gate=None):
        got[name] = cs.execute(_req(name, delay, gate)).value
    gate = threading.Event()  # slow's response comes when the test says
    slow = threading.Thread(target=call, args=("slow", 0.0, gate), name="slow")
    slow.start()
    wait_until(lambda: _reading(cs, srv, "slow"), 10, "slow to read the stream")
    call("fast", 0.0)  # waits as a follower; slow's thread hands it its response
    assert "slow" not in got  # fast's came first, through slow's thread
    gate.set()
    slow.join(5)
    assert got == {"slow": "slow", "fast": "fast"}
    # and the other way round: the reader's own response first, the rest wait
    got.clear()
    th = [threading.Thread(target=call, args=("s%d" % i, 0.2 + 0.05 * i)) for i in range(4)]
    for t in th:
        t.start()
    call("first", 0.05)
    for t in th:
        t.join(5)
    assert got == {"first": "first", **{"s%d" % i: "s%d" % i for i in range(4)}}
    assert not cs._conn.pending and not cs._conn.leading
    cs.close()


def test_deadline_while_another_thread_reads():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    late = []
    out = []
    leader = threading.Thread(target=lambda: out.append(cs.execute(_req("long", 1.0)).value),
                              name="leader")
    leader.start()
    wait_until(lambda: _reading(cs, srv, "leader"), 10, "the leader to read the stream")
    t0 = time.monotonic()
    with pytest.raises(kerneld.DeadlineExceeded):
        cs.execute(_req("abandoned", 0.6), timeout=0.1, on_abandon=lambda: lambda: late.append(1))
    assert time.monotonic() - t0 < 0.4
    # a call with a deadline that is met, while the same thread still reads
    assert cs.execute(_req("quick", 0.0), timeout=5).value == "quick"
    leader.join(5)
    assert out == ["long"]
    assert late == [1]  # the abandoned response came and ran its callback
    assert not cs._conn.pending
    cs.close()


def test_deadline_with_nobody_else_reading_uses_the_helper():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    late = []
    with pytest.raises(kerneld.DeadlineExceeded):
        cs.execute(_req("a", 0.5), timeout=0.05, on_abandon=lambda: lambda: late.append(1))
    deadline = time.time() + 5
    while not late and time.time() < deadline:
        time.sleep(0.01)
    assert late == [1]  # read by the helper though no caller waits
    assert "kerneld-call-stream" in srv.readers
    assert cs.execute(_req("b"), timeout=5).value == "b"
    assert cs._conn.leading  # the helper waits in next() for the next response
    assert cs.execute(_req("c")).value == "c"  # it reads c's too, then stops
    srv.readers.clear()
    assert cs.execute(_req("d")).value == "d"
    assert srv.readers == {threading.current_thread().name}
    cs.close()


def test_stream_failure_while_a_caller_reads():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    cs.execute(_req(0))
    first = srv.calls[0]
    res = {}

    def call(name, to):
        try:
            res[name] = cs.execute(_req(name, 10.0), timeout=to).value
        except kerneld.KerneldError as e:
            res[name] = e
    th = [threading.Thread(target=call, args=("t%d" % i, None if i % 2 else 30.0)) for i in range(6)]
    for t in th:
        t.start()
    wait_until(lambda: cs._conn.leading and len(cs._conn.pending) == 6 and srv.reads == 1, 10,
               "six calls waiting and one reading")
    first.fail()
    for t in th:
        t.join(5)
    assert not any(t.is_alive() for t in th)
    assert all(isinstance(e, kerneld.Unavailable) and e.message == "connection lost"
               for e in res.values()), res
    # the next call opens a new stream
    assert cs.execute(_req("again")).value == "again"
    assert len(srv.calls) == 2
    cs.close()


def test_interrupted_reader_fails_the_others_and_the_stream_reopens():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    cs.execute(_req(0))
    first = srv.calls[0]
    res = {}
    abandoned = []

    def call(name, **kw):
        try:
            res[name] = cs.execute(_req(name, 10.0), **kw).value
        except BaseException as e:  # noqa: BLE001 - checked below
            res[name] = e
    reader = threading.Thread(target=call, args=("reader",), name="reader",
                              kwargs={"on_abandon": lambda: abandoned.append(1) or (lambda: None)})
    reader.start()
    wait_until(lambda: _reading(cs, srv, "reader"), 10, "the reader to read the stream")
    other = threading.Thread(target=call, args=("other",))
    other.start()
    wait_until(lambda: len(cs._conn.pending) == 2, 10, "the other call to wait")
    first.out.put(KeyboardInterrupt())  # comes out of the reader's next()
    reader.join(5)
    other.join(5)
    assert isinstance(res["reader"], KeyboardInterrupt)
    assert isinstance(res["other"], kerneld.KerneldError)
    assert res["other"].code == grpc.StatusCode.CANCELLED
    assert abandoned == [1]  # its shm segment is never reused
    assert cs.execute(_req("again")).value == "again"
    assert len(srv.calls) == 2
    cs.close()


def test_close_fails_a_waiter_with_a_deadline():
    srv = FakeServer()
    cs = CallStream(srv.open, None)
    res = []

    def call():
        try:
            cs.execute(_req("x", 10.0), timeout=30)
        except kerneld.KerneldError as e:
            res.append(e)
    t = threading.Thread(target=call)
    t.start()
    wait_until(lambda: cs._conn is not None and cs._conn.pending, 10, "the call to be sent")
    cs.close()
    t.join(5)
    assert not t.is_alive() and res and res[0].code == grpc.StatusCode.CANCELLED
