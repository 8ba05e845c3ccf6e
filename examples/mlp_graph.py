#!/usr/bin/env python3
"""The MLP block of a Llama-3-8B decoder layer at decode as one kerneld graph.

    fused_add_rmsnorm -> gemm (gate_up) -> silu_and_mul -> gemm (down)

bfloat16, hidden 4096, intermediate 14336; the weights live in device
buffers kerneld allocated (AllocateBuffer), so each call sends only the
tokens' activations. For T tokens per call it checks the graph's answer
against the same four ops called one by one (bit for bit) and prints the
client p50 and p99 of one graph call beside four separate calls.

    python3 examples/mlp_graph.py --target localhost:50051 --tokens 1,16,64

Needs numpy and ml_dtypes (numpy's bfloat16), and a daemon with a GPU.
docs/graphs.md describes graphs; bench/graph_bench.sh measures the same
block from C++ beside the local CUDA-graph reference and the echo floor.
"""
import argparse
import time

import numpy as np

import kerneld
from kerneld._graph import ServerBuffer

HIDDEN, INTER = 4096, 14336


def bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def fill(client, device, buf, rng, scale, rows_per_call=1024):
    """Writes random values into a [rows, cols] bfloat16 ServerBuffer, a slab
    of rows per call (a one-step graph whose output goes to the buffer)."""
    rows, cols = buf.shape
    for r0 in range(0, rows, rows_per_call):
        n = min(rows_per_call, rows - r0)
        slab = (rng.standard_normal((n, cols), dtype=np.float32) * scale).astype(bf16())
        g = client.graph(device)
        g.output("w", g.scale(slab, factor=1.0),
                 buffer=buf.view("bfloat16", (n, cols), offset=r0 * cols * 2))
        g.run()


class Mlp:
    def __init__(self, client, device, seed=0):
        self.client, self.device = client, device
        rng = np.random.default_rng(seed)
        self.norm_w = ServerBuffer.allocate(client, device, "bfloat16", (1, HIDDEN), "mlp.norm")
        self.gate_up = ServerBuffer.allocate(client, device, "bfloat16", (2 * INTER, HIDDEN),
                                             "mlp.gate_up")
        self.down = ServerBuffer.allocate(client, device, "bfloat16", (HIDDEN, INTER), "mlp.down")
        fill(client, device, self.norm_w, rng, 1.0)
        fill(client, device, self.gate_up, rng, HIDDEN ** -0.5)
        fill(client, device, self.down, rng, INTER ** -0.5)
        self.norm_weight = self.norm_w.view("bfloat16", (HIDDEN,))

    def graph(self, x, residual):
        g = self.client.graph(self.device)
        h, res = g.fused_add_rmsnorm(x, residual, self.norm_weight, eps=1e-5)
        gu = g.gemm(h, self.gate_up, transpose_b=True)
        act = g.silu_and_mul(gu)
        g.output("y", g.gemm(act, self.down, transpose_b=True))
        g.output("residual", res)
        return g

    def free(self):
        for b in (self.norm_w, self.gate_up, self.down):
            b.free()


def four_calls(mlp, x, residual):
    """fused_add_rmsnorm, gemm, silu_and_mul, gemm as four Execute calls
    through one-step graphs (the weights are referenced in their buffers)."""
    c, dev = mlp.client, mlp.device
    g = c.graph(dev)
    h, res = g.fused_add_rmsnorm(x, residual, mlp.norm_weight, eps=1e-5)
    g.output("h", h)
    g.output("residual", res)
    first = g.run()
    g = c.graph(dev)
    gu = g.gemm(first["h"], mlp.gate_up, transpose_b=True)
    gu = g.run()
    g = c.graph(dev)
    g.silu_and_mul(gu)
    act = g.run()
    g = c.graph(dev)
    g.gemm(act, mlp.down, transpose_b=True)
    y = g.run()
    return {"y": y, "residual": first["residual"]}


def percentiles(f, iters):
    lat = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f()
        lat.append((time.perf_counter() - t0) * 1e6)
    lat.sort()
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="localhost:50051")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--tokens", default="1,16,64")
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    client = kerneld.Client(args.target)
    mlp = Mlp(client, args.device)
    try:
        rng = np.random.default_rng(1)
        print("T   graph p50 us  graph p99 us  4 calls p50 us  4 calls p99 us  bit for bit")
        for t in (int(s) for s in args.tokens.split(",")):
            x = rng.standard_normal((t, HIDDEN), dtype=np.float32).astype(bf16())
            r = rng.standard_normal((t, HIDDEN), dtype=np.float32).astype(bf16())
            g = mlp.graph(x, r)
            got = g.run()
            want = four_calls(mlp, x, r)
            same = all(got[k].tobytes() == want[k].tobytes() for k in ("y", "residual"))
            for _ in range(10):  # warm: the first call captures the CUDA graph
                g.run()
            gp50, gp99 = percentiles(g.run, args.iters)
            cp50, cp99 = percentiles(lambda: four_calls(mlp, x, r), args.iters)
            print("%-3d %12.1f  %12.1f  %14.1f  %14.1f  %s" % (t, gp50, gp99, cp50, cp99,
                                                              "yes" if same else "NO"))
    finally:
        mlp.free()
        client.close()


if __name__ == "__main__":
    main()
