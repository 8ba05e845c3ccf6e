#!/usr/bin/env python3
"""Where a Python call's time goes beside kernelctl's, one daemon, one run.

  python3 call_breakdown.py --target ADDR --kernelctl PATH [--calls 3000] [--rounds 3]

For scale on 4096 float16 (numpy inline on the cpu backend; torch over CUDA
IPC on cuda when torch sees a GPU), interleaved in rounds, p50 of each:
  kernelctl      `kernelctl run --repeat` (C++ blocking stub, one thread), and
                 with --stream (ping-pong on one ExecuteStream)
  full           client.scale(...) as a user calls it (rpc="native" with its
                 adaptive spin and call plans, the same without plans, with
                 spin_us=0, rpc="native_unary" and rpc="stream")
  transport      the transport alone on a request built once (native:
                 NativeCalls.execute; stream: CallStream.execute)
  prepare        building the request (Prepared: arguments, IPC lookups,
                 stream synchronization) without sending it: the generic path
  plan key       what a planned call computes to find its plan
  complete       reading a response into the result
  ctypes no-op   one call into libkerneld_native that does nothing
Not a test: it prints numbers.
"""
import argparse
import ctypes
import re
import subprocess
import sys

import numpy as np

import bench_scale  # this folder: its kernelctl runner
import kerneld
from kerneld import _native, _plan
from kerneld._core import Prepared
from kerneld._proto import kerneld_pb2 as pb


def p50(f, n, warm=200):
    ts = sorted(bench_scale.timed(f, n, warm))
    return ts[len(ts) // 2] / 1e3


def kernelctl(path, target, via, backend, n, stream=False):
    k50 = bench_scale.kernelctl(path, target, via, backend, n, stream)[0]
    return float("nan") if k50 is None else k50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--kernelctl", required=True)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    clients = {}
    for name, kw in (("native", dict(rpc="native")),
                     ("native, no plans", dict(rpc="native")),
                     ("native spin_us=0", dict(rpc="native", spin_us=0)),
                     ("native_unary", dict(rpc="native_unary")),
                     ("stream", dict(rpc="stream"))):
        try:
            clients[name] = kerneld.Client(a.target, **kw)
        except ValueError as e:
            print("rpc=%s: %s" % (name, e))
    for c in clients.values():
        c.ops()
    if "native, no plans" in clients:
        clients["native, no plans"]._plans.disable()
    lib = _native.load()[0]
    cases = [("cpu inline numpy", "inline", "cpu",
              np.random.default_rng(0).standard_normal(4096).astype(np.float16))]
    try:
        import torch
        if torch.cuda.is_available() and "cuda" in clients["stream"].info()["backends"]:
            cases.append(("cuda IPC torch", "ipc", "cuda",
                          torch.randn(4096, device="cuda", dtype=torch.float16)))
    except ImportError:
        pass
    rows = {}
    for _ in range(a.rounds):
        for name, via, backend, x in cases:
            y = x.clone() if hasattr(x, "clone") else np.empty_like(x)
            kw = dict(factor=2.0, out=y, backend=backend)
            add = lambda k, v: rows.setdefault((name, k), []).append(v)
            add("kernelctl", kernelctl(a.kernelctl, a.target, via, backend, a.calls))
            add("kernelctl --stream", kernelctl(a.kernelctl, a.target, via, backend, a.calls, True))
            for rpc, c in clients.items():
                add("full, rpc=%s" % rpc, p50(lambda: c.scale(x, **kw), a.calls))
                p = Prepared(c, "scale", (x,), dict(kw))  # Prepared pops out=, backend=
                if rpc.startswith("native"):
                    add("transport, rpc=%s" % rpc, p50(lambda: c._native.execute(p.req), a.calls))
                    raw = c._native.execute(p.req)
                    resp = pb.ExecuteResponse.FromString(raw)
                else:
                    add("transport, rpc=stream", p50(lambda: c._calls.execute(p.req), a.calls))
                add("prepare, rpc=%s" % rpc, p50(lambda: Prepared(c, "scale", (x,), dict(kw)),
                                                 a.calls))
            if "native" in clients:
                c = clients["native"]
                add("plan key", p50(lambda: _plan.key(c, "scale", (x,), dict(kw)), a.calls))

                def prep_complete():
                    Prepared(c, "scale", (x,), dict(kw)).complete(resp)
                add("prepare + complete", p50(prep_complete, a.calls))
        if lib is not None:
            rows.setdefault(("-", "ctypes no-op"), []).append(p50(lib.kd_abi_version, a.calls))
    print("scale 4096 float16, %d calls, median of %d rounds' p50 (us), python %s" %
          (a.calls, a.rounds, sys.version.split()[0]))
    med = {k: float(np.median(v)) for k, v in rows.items()}
    for (name, k), v in rows.items():
        print("%-18s %-30s %8.1f   %s" % (name, k, med[(name, k)], " ".join("%.1f" % r for r in v)))
    for name, _, _, _ in cases:
        for rpc in clients:
            full = med.get((name, "full, rpc=%s" % rpc))
            if full is None:
                continue
            print("%-18s rpc=%-18s - kernelctl %+7.1f us, - kernelctl --stream %+7.1f us" % (
                name, rpc, full - med[(name, "kernelctl")], full - med[(name, "kernelctl --stream")]))
    for c in clients.values():
        c.close()


if __name__ == "__main__":
    main()
