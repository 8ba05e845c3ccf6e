#!/usr/bin/env python3
"""scale on 4096 float16: the Python client's p50 against kernelctl's (C++) on one daemon, one run.

  python3 bench_scale.py --target 127.0.0.1:50051 --kernelctl build/client/kernelctl [--repeat 3000]

Rows: cpu backend with inline numpy; cuda backend with torch tensors over
CUDA IPC (when torch sees a GPU and the daemon has cuda). The client is the
default one (rpc="native" where libkerneld_native is found, e.g. with
$KERNELD_NATIVE_LIB set); rows marked rpc=stream repeat a call through
grpcio's ExecuteStream for comparison. Also the first
call's registration cost (a new allocation: RegisterCudaIpcBuffer; a new
client's shm pool: RegisterSharedMemory). Goal (issue 14): Python p50 within
30 us of kernelctl's. Not a test: it prints numbers.
"""
import argparse
import json
import re
import subprocess
import sys
import time

import numpy as np

import kerneld


def pct(xs, q):
    return float(np.percentile(np.asarray(xs) / 1e3, q))


def timed(f, n, warm=200):
    for _ in range(warm):
        f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t0)
    return ts


def kernelctl(path, target, via, backend, repeat, stream=False):
    cmd = [path, "--target", target, "run", "scale", "--dtype", "float16", "--shape", "4096",
           "--attr", "factor=2", "--repeat", str(repeat), "--via", via, "--backend", backend]
    if stream:  # ping-pong on one ExecuteStream
        cmd.append("--stream")
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"client p50 ([\d.]+) us p99 ([\d.]+) us", r.stdout + r.stderr)
    if not m:
        return None, None, (r.stdout + r.stderr).strip()[-400:]
    return float(m.group(1)), float(m.group(2)), " ".join(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--kernelctl", default="build/client/kernelctl")
    ap.add_argument("--repeat", type=int, default=3000)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    rows, extra = [], {}
    c = kerneld.Client(a.target)
    c.ops()
    cs = kerneld.Client(a.target, rpc="stream") if c.rpc != "stream" else None
    if cs is not None:
        cs.ops()
    c0 = kerneld.Client(a.target, spin_us=0) if c.rpc == "native" else None  # never spins
    cu = kerneld.Client(a.target, rpc="native_unary") if c.rpc == "native" else None
    for other in (c0, cu):
        if other is not None:
            other.ops()
    x = (np.random.default_rng(0).standard_normal(4096)).astype(np.float16)
    y = np.empty_like(x)

    # cpu, inline numpy
    ts = timed(lambda: c.scale(x, factor=2.0, out=y, backend="cpu"), a.repeat)
    k50, k99, kcmd = kernelctl(a.kernelctl, a.target, "inline", "cpu", a.repeat)
    rows.append(("cpu, inline (numpy)", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    if c0 is not None:
        ts = timed(lambda: c0.scale(x, factor=2.0, out=y, backend="cpu"), a.repeat)
        rows.append(("cpu, inline, spin_us=0", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    if cu is not None:
        ts = timed(lambda: cu.scale(x, factor=2.0, out=y, backend="cpu"), a.repeat)
        rows.append(("cpu, inline, rpc=native_unary", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    s50, _, _ = kernelctl(a.kernelctl, a.target, "inline", "cpu", a.repeat, stream=True)
    extra["kernelctl --stream p50, cpu inline, us"] = s50
    if cs is not None:
        ts = timed(lambda: cs.scale(x, factor=2.0, out=y, backend="cpu"), a.repeat)
        rows.append(("cpu, inline, rpc=stream", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    with c.stream() as s:  # the same call, one at a time, on one ExecuteStream
        ts = timed(lambda: s.submit("scale", x, factor=2.0, out=y, backend="cpu").result(), a.repeat)
    rows.append(("cpu, inline, c.stream() one by one", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    ts = timed(lambda: c.scale(x, factor=2.0, out=y, backend="cpu", via="shm"), a.repeat)
    k50, k99, kcmd = kernelctl(a.kernelctl, a.target, "shm", "cpu", a.repeat)
    rows.append(("cpu, shm (numpy)", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    c2 = kerneld.Client(a.target)
    c2.ops()
    t0 = time.perf_counter_ns()
    c2.scale(x, factor=2.0, backend="cpu", via="shm")
    extra["first shm call (pool segment created + RegisterSharedMemory), us"] = (time.perf_counter_ns() - t0) / 1e3
    c2.close()

    try:
        import torch
        gpu = torch.cuda.is_available() and "cuda" in c.info()["backends"]
    except ImportError:
        gpu = False
    if gpu:
        torch.cuda.init()
        xt = torch.randn(4096, device="cuda", dtype=torch.float16)
        yt = torch.empty_like(xt)
        torch.cuda.synchronize()
        # first call on a new allocation: allocation lookup + IPC handle + RegisterCudaIpcBuffer
        c3 = kerneld.Client(a.target)
        c3.ops()
        fresh = torch.empty(64 << 20, device="cuda", dtype=torch.uint8)[: 8192].view(torch.float16)
        fresh.copy_(xt)
        t0 = time.perf_counter_ns()
        c3.scale(fresh, factor=2.0, out=fresh, backend="cuda")
        first = (time.perf_counter_ns() - t0) / 1e3
        t0 = time.perf_counter_ns()
        c3.scale(fresh, factor=2.0, out=fresh, backend="cuda")
        second = (time.perf_counter_ns() - t0) / 1e3
        extra["first IPC call on a new allocation (register), us"] = first
        extra["second call on it (cached), us"] = second
        c3.close()
        ts = timed(lambda: c.scale(xt, factor=2.0, out=yt, backend="cuda"), a.repeat)
        k50, k99, kcmd = kernelctl(a.kernelctl, a.target, "ipc", "cuda", a.repeat)
        rows.append(("cuda, IPC (torch, out=)", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
        if c0 is not None:
            ts = timed(lambda: c0.scale(xt, factor=2.0, out=yt, backend="cuda"), a.repeat)
            rows.append(("cuda, IPC (torch, out=), spin_us=0", pct(ts, 50), pct(ts, 99), k50, k99,
                         kcmd))
        if cu is not None:
            ts = timed(lambda: cu.scale(xt, factor=2.0, out=yt, backend="cuda"), a.repeat)
            rows.append(("cuda, IPC (torch, out=), native_unary", pct(ts, 50), pct(ts, 99), k50,
                         k99, kcmd))
        s50, _, _ = kernelctl(a.kernelctl, a.target, "ipc", "cuda", a.repeat, stream=True)
        extra["kernelctl --stream p50, cuda IPC, us"] = s50
        if cs is not None:
            ts = timed(lambda: cs.scale(xt, factor=2.0, out=yt, backend="cuda"), a.repeat)
            rows.append(("cuda, IPC (torch, out=), rpc=stream", pct(ts, 50), pct(ts, 99), k50, k99,
                         kcmd))
        with c.stream() as s:
            ts = timed(lambda: s.submit("scale", xt, factor=2.0, out=yt, backend="cuda").result(), a.repeat)
        rows.append(("cuda, IPC, c.stream() one by one", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
        ts = timed(lambda: c.scale(xt, factor=2.0, backend="cuda"), a.repeat)
        rows.append(("cuda, IPC (torch, output allocated)", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
        ts = timed(lambda: c.scale(x, factor=2.0, out=y, backend="cuda"), a.repeat)
        k50, k99, kcmd = kernelctl(a.kernelctl, a.target, "inline", "cuda", a.repeat)
        rows.append(("cuda, inline (numpy)", pct(ts, 50), pct(ts, 99), k50, k99, kcmd))
    else:
        extra["gpu"] = "skipped: torch sees no GPU or the daemon has no cuda backend"

    print("scale, 4096 float16, %d calls each, python %s, kerneld %s, client rpc=%s" %
          (a.repeat, sys.version.split()[0], c.info()["version"], c.rpc))
    print("%-38s %10s %10s %12s %12s %10s" % ("path", "py p50 us", "py p99 us", "C++ p50 us",
                                              "C++ p99 us", "py - C++"))
    for name, p50, p99, k50, k99, _ in rows:
        d = "%.1f" % (p50 - k50) if k50 is not None else "-"
        print("%-38s %10.1f %10.1f %12s %12s %10s" % (name, p50, p99, "%.1f" % k50 if k50 else "-",
                                                      "%.1f" % k99 if k99 else "-", d))
    for k, v in extra.items():
        print("%s: %s" % (k, "%.1f" % v if isinstance(v, float) else v))
    for r in rows:
        if r[3] is None:
            print("kernelctl failed for %s: %s" % (r[0], r[5]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": [dict(zip(("path", "py_p50_us", "py_p99_us", "cpp_p50_us", "cpp_p99_us",
                                          "kernelctl"), r)) for r in rows], "extra": extra}, f, indent=1)
    c.close()
    for other in (cs, c0, cu):
        if other is not None:
            other.close()


if __name__ == "__main__":
    main()
