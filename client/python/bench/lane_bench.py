#!/usr/bin/env python3
"""The Python client on the same-host lane against a local launch, one process, one run.

  python3 lane_bench.py --kerneld build/server/kerneld [--kernelctl build/client/kernelctl]
                        [--calls 2000] [--rounds 5] [--json out.json]
  python3 lane_bench.py --target unix:/run/kerneld.sock --lane unix:/run/lane.sock ...

`scale` on 4096 float16 with out=: torch tensors over CUDA IPC where torch
sees a GPU and the daemon has cuda, else numpy inline on the CPU backend.
Rows, measured in this process and interleaved round by round (each
figure: the median over the rounds of that round's p50 or p99):

  local        torch's own `torch.mul(x, 2, out=y)` + `torch.cuda.synchronize()`
               (CPU: numpy's `np.multiply(x, 2, out=y)`): the reference
  python lane  kerneld.Client(target, lane=...).scale(x, factor=2, out=y)
  python grpc  the same call on the default gRPC client (rpc="native")
  kernelctl    with --kernelctl: `kernelctl perf --lane` (C++ on the lane, and
               gRPC, the same request; a second process), for comparison

The goal (issue 32): python lane p50 <= 2.5x local's. Started with --kerneld,
the script runs its own daemon (unix socket and lane in a temporary folder,
stopped at the end). Needs libkerneld_native (KERNELD_NATIVE_LIB). Not a
test: it prints numbers, the short table last.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import kerneld

N = 4096


def pcts(ts):
    a = np.asarray(ts) / 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def timed(f, n, warm=200):
    for _ in range(warm):
        f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t0)
    return ts


def start_daemon(binary, folder):
    ready = os.path.join(folder, "ready")
    sock, lane = os.path.join(folder, "k.sock"), os.path.join(folder, "lane.sock")
    log = open(os.path.join(folder, "kerneld.log"), "w")
    p = subprocess.Popen([binary, "--listen=unix:" + sock, "--lane_socket=" + lane,
                          "--metrics_listen=off", "--ready_file=" + ready],
                         stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if os.path.exists(ready) and "lane " in open(ready).read():
            return p, "unix:" + sock, "unix:" + lane
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit("lane_bench: kerneld did not start:\n" + open(log.name).read()[-2000:])


def kernelctl_rows(path, target, lane, gpu):
    """`kernelctl perf --lane` at one client: its lane and gRPC p50/p99 (us)."""
    req = (["--backend", "cuda", "--via", "ipc"] if gpu else ["--backend", "cpu", "--via", "inline"])
    cmd = [path, "--target", target, "--lane", lane, "perf", "scale", "--dtype", "float16",
           "--shape", str(N), "--attr", "factor=2", "--concurrency", "1", "--window-ms", "1000"] + req
    r = subprocess.run(cmd, capture_output=True, text=True)
    # "lane  clients   1: p50      9.2 us  p99     20.1 us  ..." (client/lane_perf.cc)
    rows = [("kernelctl " + m.group(1), float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^(lane|grpc)\s+clients\s+1: p50\s+([\d.]+) us\s+p99\s+([\d.]+) us",
                                 r.stdout, re.M)]
    if not rows:
        print("kernelctl perf --lane failed: %s\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-600:]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kerneld", help="start this daemon (with a lane) for the run")
    ap.add_argument("--target", help="a running daemon's unix socket (with --lane)")
    ap.add_argument("--lane", help="its lane socket (default: what the daemon says)")
    ap.add_argument("--kernelctl", help="also measure `kernelctl perf --lane` (C++)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    if bool(a.kerneld) == bool(a.target):
        sys.exit("lane_bench: give --kerneld BIN (a daemon of its own) or --target (and --lane)")
    folder = tempfile.mkdtemp(prefix="lane-bench-")
    proc = None
    try:
        if a.kerneld:
            proc, target, lane = start_daemon(a.kerneld, folder)
        else:
            target, lane = a.target, a.lane or True
        run(a, target, lane)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


def run(a, target, lane):
    lc = kerneld.Client(target, lane=lane)  # no lane: raises, with the reason
    gc = kerneld.Client(target)
    gpu = False
    try:
        import torch
        gpu = torch.cuda.is_available() and "cuda" in gc.info()["backends"]
    except ImportError:
        torch = None
    if gpu:
        x = torch.randn(N, device="cuda").half()
        y = torch.empty_like(x)

        def local():
            torch.mul(x, 2.0, out=y)
            torch.cuda.synchronize()
        what = "torch float16 over CUDA IPC, out=; local: torch.mul + torch.cuda.synchronize()"
    else:
        x = np.random.default_rng(0).standard_normal(N).astype(np.float16)
        y = np.empty_like(x)

        def local():
            np.multiply(x, np.float16(2.0), out=y)
        what = "numpy float16 inline on the CPU backend, out=; local: np.multiply"
    calls = {
        "local": local,
        "python lane": lambda: lc.scale(x, factor=2.0, out=y),
        "python grpc (%s)" % gc.rpc: lambda: gc.scale(x, factor=2.0, out=y),
    }
    for f in calls.values():  # registrations and plans made before timing
        f()
    got = {k: [] for k in calls}
    for _ in range(a.rounds):  # interleaved: the machine's drift hits every row alike
        for k, f in calls.items():
            got[k].append(pcts(timed(f, a.calls)))
    rows = [(k, statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
            for k, v in got.items()]
    if a.kernelctl:
        rows += kernelctl_rows(a.kernelctl, target, lc._native.path, gpu)
    lc.close()
    gc.close()

    ref = rows[0][1]
    print("# scale on %d float16: %s" % (N, what))
    print("# %d rounds of %d calls, medians of the rounds' p50 and p99; %s" %
          (a.rounds, a.calls, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    lane_row = next(r for r in rows if r[0] == "python lane")
    print("| via | p50 us | p99 us | p50 / local |")
    print("|---|---:|---:|---:|")
    for k, p50, p99 in rows:
        print("| %s | %.1f | %.1f | %.2fx |" % (k, p50, p99, p50 / ref))
    print("python lane / local p50: %.2fx (goal <= 2.5x); p99 / p50 %.2f" %
          (lane_row[1] / ref, lane_row[2] / lane_row[1]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"what": what, "rows": [{"via": k, "p50_us": p, "p99_us": q}
                                              for k, p, q in rows]}, f, indent=1)


if __name__ == "__main__":
    main()
