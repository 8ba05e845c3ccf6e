#!/usr/bin/env python3
"""The service goals table from bench/device_pass.sh's goals part (its JSON records).

    python3 bench/service_goals_table.py LOG_DIR

LOG_DIR holds perf_compare.sh JSON directories: ipc-N (scale on 4096
float16 in a CUDA IPC buffer, floor --kernel), big-N (1M float16 inline)
and small-N (16 float32 inline), N = 1 for kerneld's default flags (the
sync API) and 2 for --grpc_api=callback. Each file TRANSPORT-MODE-FLOOR.json alternates a
kerneld record and its floor's, one pair per concurrency level. A kerneld
figure is the median over the files it was measured in (once beside each
floor), except throughput at 32 clients: the best of its paths. The floor
column is the better of the sync and callback floors (and the best path);
the 16 float32 ratios divide kerneld's median by that best floor. A figure
that cannot be formed (no records, a level with no successful request)
prints "-".
"""
import glob
import json
import os
import statistics
import sys

VARIANTS = {1: "default", 2: "--grpc_api=callback"}


def load(d):
    """{(transport, mode, floor, clients): (kerneld, floor)} of one directory."""
    out = {}
    for path in glob.glob(os.path.join(d, "*.json")):
        t, m, f = os.path.basename(path)[:-5].split("-")
        recs = json.load(open(path))
        for k, fl in zip(recs[0::2], recs[1::2]):
            out[(t, m, f, k["concurrency"])] = (k, fl)
    return out


def pick(recs, t=None, m=None, c=None):
    return [v for (tt, mm, _, cc), v in recs.items()
            if (t is None or tt == t) and (m is None or mm == m) and (c is None or cc == c)]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def div(a, b):
    """a / b, or None where b is 0 (a level whose every request failed)."""
    return None if a is None or not b else a / b


def fmt(x, unit=""):
    return "-" if x is None else (f"{x:,.0f}{unit}" if abs(x) >= 100 else f"{x:.1f}{unit}")


def p50(r):
    return r["latency_us"]["p50"]


def main(root):
    data = {kind: {n: load(os.path.join(root, f"{kind}-{n}")) for n in VARIANTS}
            for kind in ("ipc", "big", "small")}
    rows = []

    def goal(name, target, fn_k, fn_f):
        """fn_k / fn_f map one variant's records to kerneld's / the best floor's figure."""
        ks = [fn_k(data_n) for data_n in (0, 1)]
        fl = fn_f()
        rows.append((name, target, *[fmt(k) for k in ks], fmt(fl)))

    def kval(kind, n, sel, fn):
        return med(fn(k) for k, _ in pick(data[kind][VARIANTS_IDX[n]], **sel))

    def fbest(kind, sel, fn, better=min):
        vals = [v for n in VARIANTS for _, f in pick(data[kind][n], **sel) if (v := fn(f))]
        return better(vals) if vals else None

    VARIANTS_IDX = list(VARIANTS)
    for t, target in (("tcp", "≤ 40 µs"), ("unix", "≤ 30 µs")):
        sel = dict(t=t, m="unary", c=1)
        goal(f"unary p50, {t}, µs", target, lambda n: kval("ipc", n, sel, p50),
             lambda: fbest("ipc", sel, p50))
    sel = dict(m="unary", c=1)
    goal("unary p99 / p50", "≤ 2.5", lambda n: kval("ipc", n, sel, lambda r: div(r["latency_us"]["p99"], p50(r))),
         lambda: fbest("ipc", sel, lambda r: div(r["latency_us"]["p99"], p50(r))))
    for t in ("tcp", "unix"):
        sel = dict(t=t, m="stream", c=1)
        goal(f"stream ping-pong p50, {t}, µs", "≤ 20 µs", lambda n: kval("ipc", n, sel, p50),
             lambda: fbest("ipc", sel, p50))

    def overhead(r):
        s = r.get("server_p50_us") or {}
        return None if s.get("total") is None else s["total"] - (s.get("execute") or 0.0)

    sel = dict(c=1)
    goal("server total − execute p50, µs", "≤ 5 µs", lambda n: kval("ipc", n, sel, overhead),
         lambda: None)
    sel = dict(c=32)
    goal("throughput, 32 clients or streams, req/s (best path)", "≥ 150,000",
         lambda n: max((k["throughput"] for k, _ in pick(data["ipc"][VARIANTS_IDX[n]], **sel)), default=None),
         lambda: fbest("ipc", sel, lambda r: r["throughput"], better=max))
    sel = dict(t="tcp", m="unary", c=1)
    goal("inline 2 MiB round trip p50, µs", "≤ 1,000 µs", lambda n: kval("big", n, sel, p50),
         lambda: fbest("big", sel, p50))

    print("## Issue 12's goals (scale, 4096 float16 in a CUDA IPC buffer; floor: echo --kernel)")
    print("| goal | target | kerneld default (sync API) | kerneld --grpc_api=callback | best floor, same run |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")

    print()
    print("## 16 float32 inline: kerneld / best floor (sync or callback), p50 and throughput")
    print("| transport | mode | clients | default p50 | default throughput | callback API p50 | callback API throughput |")
    print("|---|---|---:|---:|---:|---:|---:|")
    keys = sorted({(t, m, c) for n in VARIANTS for (t, m, _, c) in data["small"][n]})
    for t, m, c in keys:
        cells = []
        for n in VARIANTS:
            prs = pick(data["small"][n], t=t, m=m, c=c)
            if not prs:
                cells += ["-", "-"]
                continue
            kp = med(p50(k) for k, _ in prs)
            kt = med(k["throughput"] for k, _ in prs)
            bp = min((p50(f) for _, f in prs if p50(f)), default=None)
            bt = max((f["throughput"] for _, f in prs), default=None)
            cells += [f"{r:.2f}x" if (r := div(x, y)) is not None else "-"
                      for x, y in ((kp, bp), (kt, bt))]
        print(f"| {t} | {m} | {c} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
