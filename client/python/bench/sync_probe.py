#!/usr/bin/env python3
"""What the stream rule costs a call on this host: torch's current-stream
synchronize against the cheaper ways to learn that an idle stream is done.

  python3 sync_probe.py [--calls 20000]

p50 in us of each way, on an idle stream (a call's usual case). Not a test.
"""
import argparse
import ctypes

import torch

from call_breakdown import p50  # this folder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    n = ap.parse_args().calls
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuStreamSynchronize.argtypes = cu.cuStreamQuery.argtypes = [ctypes.c_void_p]
    raw = torch._C._cuda_getCurrentRawStream(0)
    side = torch.cuda.Stream()
    rows = [
        ("torch.cuda.current_stream(0)", lambda: torch.cuda.current_stream(0)),
        ("current_stream(0).synchronize()", lambda: torch.cuda.current_stream(0).synchronize()),
        ("current_stream(0).query()", lambda: torch.cuda.current_stream(0).query()),
        ("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0)),
        ("cuStreamSynchronize(raw), ctypes", lambda: cu.cuStreamSynchronize(raw)),
        ("cuStreamQuery(raw), ctypes", lambda: cu.cuStreamQuery(raw)),
        ("side stream .synchronize()", side.synchronize),
        ("side stream .query()", side.query),
    ]
    print("idle stream, %d calls, p50 us, %s" % (n, torch.cuda.get_device_name(0)))
    for name, f in rows:
        print("%-42s %7.2f" % (name, p50(f, n, warm=500)))


if __name__ == "__main__":
    main()
