#!/usr/bin/env python3
"""The Python client's per-call cost over kernelctl's (C++), one op and size, one daemon, one run.

  python3 python_vs_kernelctl.py --kernelctl build/client/kernelctl \\
      (--target ADDR | --kerneld build/server/kerneld) [--op scale --dtype float32 --shape 4096
      --attr factor=2 --via inline|shm --calls 2000 --rounds 3]

Concurrency 1 throughout. Each round runs, back to back on the same daemon:
kernelctl perf --mode unary and --mode stream (closed loop, one client), then
the Python client with rpc="native" and "native_unary" (where
libkerneld_native is found: $KERNELD_NATIVE_LIB, or <prefix>/lib of a kerneld
on $PATH), rpc="unary" and rpc="stream" (`calls` timed calls each), and rpc="stream" with timeout= (the helper thread reads the stream
for a call with a deadline; one without reads its own response). The p50 printed is the median of the rounds' p50s (the rounds
interleave, so a busy machine weighs on every row alike). Also the first
calls of a new client: its first call (connection + ExecuteStream opened),
and with --via shm its first shm call (pool segment created and registered).
Issue 14's goal: Python p50 within 30 us of kernelctl's. Not a test: it
prints numbers (and --json writes them).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import kerneld


def start_daemon(binary):
    d = tempfile.mkdtemp(prefix="kerneld-bench-")
    ready = os.path.join(d, "ready")
    proc = subprocess.Popen([binary, "--listen=127.0.0.1:0", "--metrics_listen=off",
                             "--ready_file=" + ready], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(d, "log"), "w"))
    for _ in range(1500):
        if os.path.exists(ready):
            for line in open(ready):
                kind, _, value = line.strip().partition(" ")
                if kind == "grpc" and not value.startswith("unix"):  # unix: and unix-abstract:
                    return proc, value.replace("0.0.0.0:", "127.0.0.1:")
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    sys.exit("kerneld did not start; see %s/log" % d)


def kernelctl_p50(a, mode):
    out = tempfile.mktemp(suffix=".json")
    cmd = [a.kernelctl, "--target", a.target, "perf", a.op, "--dtype", a.dtype, "--shape", a.shape,
           "--via", a.via, "--concurrency", "1", "--mode", mode, "--window-ms", str(a.window_ms),
           "--max-windows", "3"]
    for kv in a.attr:
        cmd += ["--attr", kv]
    cmd += ["--json", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    try:
        rec = json.load(open(out))[0]
        os.unlink(out)
        return rec["latency_us"]["p50"]
    except Exception:
        sys.exit("kernelctl failed (%s):\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-2000:]))


def attrs(a):
    out = {}
    for kv in a.attr:
        k, _, v = kv.partition("=")
        try:
            out[k] = float(v) if any(ch in v for ch in ".eE") or k in ("factor", "eps") else int(v)
        except ValueError:
            out[k] = {"true": True, "false": False}.get(v, v)
    return out


def python_p50(c, a, x, kw):
    for _ in range(min(200, a.calls)):
        c.call(a.op, x, via=a.via, **kw)
    ts = np.empty(a.calls, np.int64)
    for i in range(a.calls):
        t0 = time.perf_counter_ns()
        c.call(a.op, x, via=a.via, **kw)
        ts[i] = time.perf_counter_ns() - t0
    return float(np.percentile(ts, 50)) / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target")
    ap.add_argument("--kerneld", help="start this daemon (CPU backend) on a free port")
    ap.add_argument("--kernelctl", default="build/client/kernelctl")
    ap.add_argument("--op", default="scale")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--shape", default="4096")
    ap.add_argument("--attr", action="append", default=None, help="K=V (default factor=2)")
    ap.add_argument("--via", default="inline", choices=["inline", "shm"])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window-ms", type=int, default=500)
    ap.add_argument("--json")
    a = ap.parse_args()
    a.attr = a.attr or ["factor=2"]
    proc = None
    if not a.target:
        if not a.kerneld:
            sys.exit("--target or --kerneld")
        proc, a.target = start_daemon(a.kerneld)
    try:
        shape = tuple(int(s) for s in a.shape.split("x"))
        x = np.random.default_rng(0).standard_normal(shape).astype(a.dtype)
        kw = attrs(a)

        first = {}
        t0 = time.perf_counter_ns()
        c0 = kerneld.Client(a.target)
        c0.ops()
        first["first ops() (connect + ListKernels)"] = (time.perf_counter_ns() - t0) / 1e3
        t0 = time.perf_counter_ns()
        c0.call(a.op, x, **kw)
        first["first call, inline (ExecuteStream opened)"] = (time.perf_counter_ns() - t0) / 1e3
        t0 = time.perf_counter_ns()
        c0.call(a.op, x, via="shm", **kw)
        first["first shm call (segment created + RegisterSharedMemory)"] = (time.perf_counter_ns() - t0) / 1e3
        c0.close()
        c1 = kerneld.Client(a.target, shm=True)  # its first segment is registered in the background
        c1.ops()
        t0 = time.perf_counter_ns()
        c1.call(a.op, x, **kw)
        first["first call of Client(shm=True) after ops()"] = (time.perf_counter_ns() - t0) / 1e3
        c1.close()

        clients = {}
        for m in ("native", "native_unary", "unary", "stream"):
            try:
                clients[m] = kerneld.Client(a.target, rpc=m)
            except TypeError:  # a client from before rpc= (one Execute per call)
                clients.setdefault("unary", kerneld.Client(a.target))
            except ValueError as e:  # no libkerneld_native (or a client from before it)
                print("python rpc=%s: not measured (%s)" % (m, e))
        for c in clients.values():
            c.ops()
        rows = {k: [] for k in ("kernelctl unary", "kernelctl stream", "python rpc=native",
                                "python rpc=native_unary", "python rpc=unary",
                                "python rpc=stream", "python stream+timeout")}
        for _ in range(a.rounds):
            rows["kernelctl unary"].append(kernelctl_p50(a, "unary"))
            rows["kernelctl stream"].append(kernelctl_p50(a, "stream"))
            for m, c in clients.items():
                rows["python rpc=" + m].append(python_p50(c, a, x, kw))
            if "stream" in clients:  # a call with a deadline: the helper thread reads for it
                rows["python stream+timeout"].append(python_p50(clients["stream"], a, x,
                                                                dict(kw, timeout=60.0)))
        rows = {k: v for k, v in rows.items() if v}
        for c in clients.values():
            c.close()
        p50 = {k: float(np.median(v)) for k, v in rows.items()}
        base = p50["kernelctl unary"]
        print("%s %s %s via %s, concurrency 1, %d rounds (python: %d calls each), python %s, grpcio %s, "
              "kerneld %s" % (a.op, a.dtype, a.shape, a.via, a.rounds, a.calls, sys.version.split()[0],
                              __import__("grpc").__version__, a.target))
        print("%-20s %9s %14s   %s" % ("client", "p50 us", "- kernelctl", "p50 per round"))
        for k, v in p50.items():
            print("%-20s %9.1f %+14.1f   %s" % (k, v, v - base, " ".join("%.1f" % r for r in rows[k])))
        if "python rpc=native" in p50:
            print("python rpc=native - kernelctl unary: %+.1f us, - kernelctl stream: %+.1f us "
                  "(issue 14's goal: <= 30)" % (p50["python rpc=native"] - base,
                                                p50["python rpc=native"] - p50["kernelctl stream"]))
        if "python rpc=stream" in p50:
            print("python rpc=stream - kernelctl stream: %+.1f us" %
                  (p50["python rpc=stream"] - p50["kernelctl stream"]))
        for k, v in first.items():
            print("%s: %.0f us" % (k, v))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"op": a.op, "dtype": a.dtype, "shape": a.shape, "via": a.via, "p50_us": p50,
                           "rounds": rows, "first_us": first}, f, indent=1)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
