"""Starts real kerneld daemons on loopback for the tests.

The binary: $KERNELD_BIN, else the repository's build-cpu/ or build/ tree
(scripts/test builds build/). Each daemon listens on 127.0.0.1:0 and a unix
socket and reports its address through --ready_file. Clients connect to the
unix socket (.target), where the daemon learns their uid from the kernel and
lets them register their own shared memory; .tcp is the TCP address, where an
anonymous caller may register only objects every user can open.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def kerneld_bin():
    cands = [os.environ.get("KERNELD_BIN"), REPO / "build-cpu/server/kerneld",
             REPO / "build/server/kerneld", shutil.which("kerneld")]
    for c in cands:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    pytest.exit("kerneld binary not found: build it (scripts/build, or cmake -S . -B build-cpu "
                "-DKERNELD_CUDA=OFF && cmake --build build-cpu --target kerneld) or set KERNELD_BIN",
                returncode=2)


def daemon_help():
    return subprocess.run([kerneld_bin(), "--help"], capture_output=True, text=True).stdout + \
        subprocess.run([kerneld_bin(), "--help"], capture_output=True, text=True).stderr


class Daemon:
    def __init__(self, *flags, listen="127.0.0.1:0"):
        self.dir = tempfile.mkdtemp(prefix="kerneld-pytest-")
        ready = os.path.join(self.dir, "ready")
        self.unix = "unix:" + os.path.join(self.dir, "sock")
        args = [kerneld_bin(), "--listen=" + listen, "--listen=" + self.unix,
                "--metrics_listen=off", "--ready_file=" + ready] + list(flags)
        self.log = os.path.join(self.dir, "stderr.log")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        self.target = None  # the unix socket, once the daemon is up
        self.tcp = None
        self.metrics_port = None  # with --metrics_listen=... among flags
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(ready):
                for line in open(ready):
                    kind, _, value = line.strip().partition(" ")
                    if kind == "grpc" and not value.startswith("unix"):  # unix: and unix-abstract:
                        self.tcp = value
                    elif kind == "metrics":
                        self.metrics_port = int(value.rsplit(":", 1)[-1])
            if self.tcp:
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if not self.tcp:
            self.stop()
            raise RuntimeError("kerneld did not start (%s):\n%s" % (" ".join(args), open(self.log).read()))
        if self.tcp.startswith("0.0.0.0:"):
            self.tcp = "127.0.0.1:" + self.tcp.split(":")[1]
        self.target = self.unix

    def metric(self, name, *labels):
        """The sum of `name`'s series from this daemon's /metrics whose labels
        include every 'key="value"' in labels (needs --metrics_listen=...)."""
        import urllib.request
        assert self.metrics_port, "start the daemon with --metrics_listen=127.0.0.1:0"
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                      timeout=10).read().decode()
        total = 0.0
        for line in text.splitlines():
            if ((line.startswith(name + "{") or line.startswith(name + " "))
                    and all(l in line for l in labels)):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def requests_ok(self, op):
        """kerneld_requests_total{op, code="OK"} from this daemon's /metrics."""
        return self.metric("kerneld_requests_total", 'op="%s"' % op, 'code="OK"')

    def wait_running(self, n=1, timeout=30):
        """Waits until n requests execute on the daemon's workers (its
        kerneld_inflight_requests gauge): a call is then surely in flight."""
        wait_until(lambda: self.metric("kerneld_inflight_requests") >= n, timeout,
                   "%d request(s) running in the daemon" % n)

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    d = Daemon("--enable_test_ops=true")
    yield d
    d.stop()


@pytest.fixture(scope="session")
def client(daemon):
    import kerneld
    c = kerneld.Client(daemon.target, timeout=120)
    yield c
    c.close()


@pytest.fixture
def new_daemon():
    made = []

    def make(*flags, **kw):
        d = Daemon(*flags, **kw)
        made.append(d)
        return d
    yield make
    for d in made:
        d.stop()


def wait_until(cond, timeout=30, what="the condition"):
    """Polls cond() until it is true; fails after `timeout` seconds saying what
    it waited for. The way tests wait for another thread or process to reach
    a state, never a fixed sleep."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("waited %.0f s for %s" % (timeout, what))
        time.sleep(0.005)


def run_in_threads(work, n=8):
    """work(t) for t < n, each on its own thread; fails with the first error
    any thread raised (an assertion in a thread would otherwise be lost)."""
    errors = []

    def guarded(t):
        try:
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=guarded, args=(t,)) for t in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
