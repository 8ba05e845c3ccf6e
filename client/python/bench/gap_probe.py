#!/usr/bin/env python3
"""Does the time between two calls change the next call's latency? And where
does building a torch request go? One daemon, one run.

  python3 gap_probe.py --target ADDR [--calls 2000]

1. rpc="native" transport alone (a request built once), with a gap between
   calls: a busy spin of G us, or G us of Python work (numpy ops on a 4096
   element array, as building a request does). p50 of the call alone.
2. cProfile of Prepared for a torch CUDA tensor with out= (when torch sees a GPU).
Not a test: it prints numbers.
"""
import argparse
import cProfile
import io
import pstats
import time

import numpy as np

import call_breakdown  # this folder: its p50 timer
import kerneld
from kerneld._core import Prepared


def spin(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


def work(us, a):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        a = (a * 1.0001).astype(np.float16)
    return a


def line_times(cls, name, run, n):
    """p50 time of each top-level statement of cls.name over n runs of run():
    the method is recompiled with a clock read between its statements."""
    import ast
    import inspect
    import textwrap
    src = textwrap.dedent(inspect.getsource(getattr(cls, name)))
    tree = ast.parse(src)
    fn = tree.body[0]
    body = []
    for st in fn.body:
        body.append(ast.parse("_LT.append((%d, _PC()))" % st.lineno).body[0])
        body.append(st)
    body.append(ast.parse("_LT.append((0, _PC()))").body[0])
    fn.body = body
    ast.fix_missing_locations(tree)
    mod = inspect.getmodule(cls)
    g = dict(mod.__dict__)
    marks = []
    g["_LT"], g["_PC"] = marks, time.perf_counter_ns
    exec(compile(tree, "<timed %s>" % name, "exec"), g)
    orig = getattr(cls, name)
    setattr(cls, name, g[name])
    per = {}
    try:
        for _ in range(n):
            del marks[:]
            run()
            for (ln, t0), (_, t1) in zip(marks, marks[1:]):
                per.setdefault(ln, []).append(t1 - t0)
    finally:
        setattr(cls, name, orig)
    lines = src.splitlines()
    out = []
    for ln, ts in sorted(per.items()):
        ts.sort()
        out.append((ts[len(ts) // 2] / 1e3, ln, lines[ln - 1].strip()[:70]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    args = a
    c = kerneld.Client(a.target, rpc="native")
    c.ops()
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float16)
    y = np.empty_like(x)
    p = Prepared(c, "scale", (x,), dict(factor=2.0, out=y, backend="cpu"))
    junk = x.copy()
    print("gap  kind    call p50 us")
    for g in (0, 5, 10, 20, 40, 80, 160):
        for kind in ("spin", "python"):
            ts = []
            for i in range(a.calls):
                if g:
                    if kind == "spin":
                        spin(g)
                    else:
                        junk = work(g, junk)
                t0 = time.perf_counter_ns()
                c._native.execute(p.req)
                ts.append(time.perf_counter_ns() - t0)
            ts.sort()
            print("%4d %-7s %8.1f" % (g, kind, ts[len(ts) // 2] / 1e3))
            if g == 0:
                break
    try:
        import torch
        if torch.cuda.is_available():
            xt = torch.randn(4096, device="cuda", dtype=torch.float16)
            yt = torch.empty_like(xt)
            kw = dict(factor=2.0, out=yt, backend="cuda")
            Prepared(c, "scale", (xt,), dict(kw))
            from kerneld._tensors import to_arg
            ipc = c._ipc()
            arg = to_arg("scale", "x", xt)

            def p50(f):
                return call_breakdown.p50(f, args.calls, warm=0)
            dev = xt.device
            print("torch pieces, p50 us: Prepared %.1f | to_arg %.1f | ipc.resolve %.1f | "
                  "current_stream(dev).synchronize %.1f | data_ptr %.2f | is_contiguous %.2f | "
                  "shape %.2f | device %.2f | dtype %.2f | numel %.2f" % (
                      p50(lambda: Prepared(c, "scale", (xt,), dict(kw))),
                      p50(lambda: to_arg("scale", "x", xt)), p50(lambda: ipc.resolve(arg)),
                      p50(lambda: torch.cuda.current_stream(dev).synchronize()),
                      p50(xt.data_ptr), p50(xt.is_contiguous), p50(lambda: xt.shape),
                      p50(lambda: xt.device), p50(lambda: xt.dtype), p50(xt.numel)))
            print("Prepared._prepare for torch with out=, p50 us by statement:")
            for us, ln, text in line_times(Prepared, "_prepare",
                                           lambda: Prepared(c, "scale", (xt,), dict(kw)), args.calls):
                if us >= 0.5:
                    print("  %6.1f  line %3d  %s" % (us, ln, text))
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(a.calls):
                Prepared(c, "scale", (xt,), dict(kw))
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
            print(s.getvalue())
    except ImportError:
        pass
    c.close()


if __name__ == "__main__":
    main()
