#!/usr/bin/env python3
"""kerneld's kernels beside their peers, from one run on the GPU host.

Runs kernel_bench (CUDA events, L2 read-flushed between runs, median) with
--json, then times torch eager on exactly the records kernel_bench printed
(same shapes, dtypes and attrs, the same flush and the same median), and
prints each kernel's time beside torch's and, given --flashinfer (the
binary bench/peers/flashinfer_peer.cu builds against FlashInfer's headers,
which bench/fetch_flashinfer takes from its PyPI wheel), FlashInfer's for
the norms and for top_k_mask_logits / top_k_renorm_probs, timed the same way, with the ratios peer / kerneld (> 1: kerneld
is faster).

The attention ops (bench_attention.py) compare against torch's
scaled_dot_product_attention on dense K / V of each record's lengths, and,
where the flashinfer Python package imports, against FlashInfer's
BatchDecodeWithPagedKVCacheWrapper, BatchPrefillWithPagedKVCacheWrapper,
BatchPrefillWithRaggedKVCacheWrapper (planned once, run timed, backend
auto: the backend it chose is printed), append_paged_kv_cache and
merge_state, on the page tables kernel_bench drew (the record's index
arrays). Prefill rows add TFLOP/s, decode rows GB/s.

    bench/peers.py --kernel-bench build/bench/kernel_bench [--flashinfer PATH] [--ops a,b]
                   [--shapes decode,mid] [--extra-shapes d1=1x4096,...] [--json peers.json]

Needs python3 with torch (CUDA) and a GPU; kernel_bench's own options after
`--` go to it unchanged.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import bench_attention


def torch_fn(torch, rec):
    """A zero-argument callable running rec's op in torch eager, or None."""
    F = torch.nn.functional
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[rec["dtype"]]
    dev = torch.device("cuda")
    ins = rec["inputs"]
    attrs = rec.get("attrs", {})

    def t(name, dtype=dt):
        return torch.randn(*ins[name], dtype=dtype, device=dev)

    op = rec["op"]
    if op == "scale":
        x, f = t("x"), float(attrs.get("factor", 2.0))
        return lambda: x * f
    if op == "add":
        a, b = t("a"), t("b")
        return lambda: a + b
    if op == "rmsnorm":
        x, w = t("x"), t("weight")
        eps = float(attrs.get("eps", 1e-6))
        return lambda: F.rms_norm(x, (x.shape[-1],), w, eps)
    if op == "fused_add_rmsnorm":
        # torch has no fused op: the add and the norm, two kernels.
        x, r, w = t("x"), t("residual"), t("weight")
        eps = float(attrs.get("eps", 1e-6))
        return lambda: F.rms_norm(x + r, (x.shape[-1],), w, eps)
    if op == "layernorm":
        names = list(ins)  # x, then the scale and the shift, whatever their names
        x, w, b = t(names[0]), t(names[1]), t(names[2])
        eps = float(attrs.get("eps", 1e-5))
        return lambda: F.layer_norm(x, (x.shape[-1],), w, b, eps)
    if op in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"):
        x = t("x")
        d = x.shape[-1] // 2
        act = {"silu_and_mul": F.silu, "gelu_and_mul": F.gelu,
               "gelu_tanh_and_mul": lambda v: F.gelu(v, approximate="tanh")}[op]
        return lambda: act(x[..., :d]) * x[..., d:]
    if op == "softmax":
        x = t("logits")
        temp = float(attrs.get("temperature", 1.0))
        return (lambda: torch.softmax(x, -1, dtype=torch.float32)) if temp == 1.0 else (
            lambda: torch.softmax(x / temp, -1, dtype=torch.float32))
    if op == "gemm":
        a, b = t("a"), t("b")
        tb = bool(attrs.get("transpose_b", False))
        return (lambda: a @ b.t()) if tb else (lambda: a @ b)
    if op in bench_attention.OPS:
        return bench_attention.torch_fn(torch, rec, dt)
    return None


def main_input(rec):
    """The [rows, width] input a peer's column is keyed by: x, logits or probs."""
    ins = rec["inputs"]
    return ins.get("x") or ins.get("logits") or ins.get("probs")


def time_torch(torch, fn, reps, flush):
    fn()
    torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        if flush is not None:
            flush.sum()  # reads 2 x L2: the clean flush kernel_bench does
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(ts)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel-bench", default="build/bench/kernel_bench")
    p.add_argument("--ops", default="")
    p.add_argument("--shapes", default="")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--extra-shapes", default="")
    p.add_argument("--flashinfer", default="")
    p.add_argument("--json", default="")
    p.add_argument("rest", nargs="*", help="after --: more kernel_bench options")
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "kb.json")
        cmd = [a.kernel_bench, "--flush-l2-clean", "--reps", str(a.reps), "--json", out]
        if a.ops:
            cmd += ["--ops", a.ops]
        if a.shapes:
            cmd += ["--shapes", a.shapes + ("," + ",".join(e.split("=")[0] for e in a.extra_shapes.split(","))
                                            if a.extra_shapes else "")]
        if a.extra_shapes:
            cmd += ["--extra-shapes", a.extra_shapes]
        cmd += a.rest
        print("+", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        with open(out) as f:
            records = json.load(f)

    try:
        import torch
    except ImportError:
        torch = None
    flush = None
    if torch is not None and torch.cuda.is_available():
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush = torch.ones(l2, dtype=torch.float16, device="cuda")  # 2 x L2 bytes
    else:
        print("peers: no torch with CUDA; only FlashInfer's column (if built)", file=sys.stderr)
        torch = None

    fi = {}
    if a.flashinfer:
        want = sorted({tuple(r["inputs"]["x"]) for r in records
                       if r["op"] in ("rmsnorm", "fused_add_rmsnorm") and len(r["inputs"]["x"]) == 2
                       and r["inputs"]["x"][1] <= 16384})  # FlashInfer's fused norm keeps a row in smem
        # top_k_mask_logits / top_k_renorm_probs: RadixTopK*MultiCTA.
        want_topk = sorted({tuple(main_input(r)) for r in records
                            if r["op"] in ("top_k_mask_logits", "top_k_renorm_probs")
                            and len(main_input(r)) == 2})
        out = subprocess.run([a.flashinfer, str(a.reps)] + [f"{m}x{n}" for m, n in want]
                             + [f"topk:{m}x{n}" for m, n in want_topk],
                             check=True, capture_output=True, text=True).stdout
        for r in json.loads(out):
            fi[(r["op"], r["dtype"], r["rows"], r["hidden"])] = r["us"]

    fi_py = bench_attention.import_flashinfer() if torch is not None else None
    rows = []
    for rec in records:
        x = main_input(rec)
        if x is not None and len(x) == 2:
            key = (rec["op"], rec["dtype"], x[0], x[1])
            if key in fi:
                rec["flashinfer_us"] = fi[key]
        if fi_py is not None and rec["op"] in bench_attention.OPS:
            try:
                variants = bench_attention.flashinfer_fns(torch, fi_py, rec)
            except Exception as e:  # a record this FlashInfer cannot run: no column
                print(f"peers: no FlashInfer timing for {rec['op']} {rec['shape']}: {e}",
                      file=sys.stderr)
                variants = []
            # Each way FlashInfer runs the op, timed; the column is the fastest.
            for fn, backend in variants:
                if fn is None:
                    continue
                us = time_torch(torch, fn, a.reps, flush)
                rec.setdefault("flashinfer_variants_us", {})[backend or "default"] = us
                if us < rec.get("flashinfer_us", float("inf")):
                    rec["flashinfer_us"] = us
                    rec["flashinfer_backend"] = backend
            del variants
            torch.cuda.empty_cache()
        row = dict(rec)
        if torch is not None:
            try:
                fn = torch_fn(torch, rec)
            except Exception as e:  # a record torch cannot express: no column, not a failed run
                print(f"peers: no torch timing for {rec['op']} {rec['shape']}: {e}", file=sys.stderr)
                fn = None
            if fn is not None:
                row["torch_us"] = time_torch(torch, fn, a.reps, flush)
                del fn
                torch.cuda.empty_cache()
        rows.append(row)

    hdr = f"{'op':<20} {'shape':<8} {'dtype':<9} {'dims':<18} {'kerneld us':>10} {'x copy':>7} {'torch us':>9} {'torch/k':>8} {'flashinfer us':>13} {'fi/k':>6}  rates"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        k = r["us"]
        tu = r.get("torch_us")
        fu = r.get("flashinfer_us")
        dims = "x".join(str(d) for d in r["inputs"][next(iter(r["inputs"]))])
        print(f"{r['op']:<20} {r['shape']:<8} {r['dtype']:<9} {dims:<18} {k:>10.2f} "
              f"{(r['copy_us'] / k if r.get('copy_us') else float('nan')):>7.2f} "
              f"{(tu if tu is not None else float('nan')):>9.2f} {(tu / k if tu else float('nan')):>8.2f} "
              f"{(fu if fu is not None else float('nan')):>13.2f} {(fu / k if fu else float('nan')):>6.2f}"
              f"  {bench_attention.rates(r)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
