#!/usr/bin/env python3
"""Where the Python client's time goes on a torch CUDA IPC call (issue 14).

  python3 profile_ipc.py --target 127.0.0.1:50051 [--calls 2000]

scale on 4096 float16 torch tensors with out=, backend cuda: the client's
p50 beside the server's own total for the same calls (return_info), the
pieces of the client's path timed alone (the allocation lookup, the
producer-stream synchronize), then cProfile's top functions by own time
and by cumulative time. Needs a GPU, torch, and a daemon with cuda. Not a
test: it prints numbers.
"""
import argparse
import cProfile
import io
import pstats
import statistics
import time

import kerneld
from kerneld import _cuda


def p50_us(f, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    import torch
    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    for rpc in ("stream", "unary"):
        c = kerneld.Client(a.target, rpc=rpc)
        for _ in range(200):
            c.scale(x, factor=2.0, out=y, backend="cuda")
        wall, server = [], []
        for _ in range(a.calls):
            t0 = time.perf_counter_ns()
            _, info = c.call("scale", x=x, factor=2.0, out=y, backend="cuda", return_info=True)
            wall.append(time.perf_counter_ns() - t0)
            server.append(info["total_ns"])
        print("rpc=%-6s client p50 %.1f us, server total p50 %.1f us (%d calls)" %
              (rpc, statistics.median(wall) / 1e3, statistics.median(server) / 1e3, a.calls))
        if rpc == "stream":
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(a.calls):
                c.scale(x, factor=2.0, out=y, backend="cuda")
            pr.disable()
            for key in ("tottime", "cumulative"):
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats(key).print_stats(22)
                print("---- cProfile, %d calls, by %s" % (a.calls, key))
                print("\n".join(s.getvalue().splitlines()[6:]))
        c.close()
    ptr = x.data_ptr()
    print("pieces alone, p50 us: allocation_of %.1f, torch current_stream().synchronize %.1f, "
          "torch.cuda.synchronize %.1f, ipc handle %.1f" % (
              p50_us(lambda: _cuda.allocation_of(ptr), 1000),
              p50_us(lambda: torch.cuda.current_stream(x.device).synchronize(), 1000),
              p50_us(torch.cuda.synchronize, 1000),
              p50_us(lambda: _cuda.ipc_handle(_cuda.allocation_of(ptr)), 200)))


if __name__ == "__main__":
    main()
