#!/usr/bin/env python3
"""A decode loop whose paged KV cache lives in the daemon.

The caches (k_cache and v_cache, [max_pages, page_size, num_kv_heads,
head_dim], FlashInfer's NHD layout) are allocated once in the daemon: on a
GPU with AllocateBuffer (ServerBuffer.allocate), on a CPU-only daemon in a
shared-memory region the client registers once. Each step then

  1. grows every request by one token (the page table is the client's, as
     with FlashInfer: pages are handed out here, a new one when a request's
     last page is full),
  2. appends the step's k and v rows in place (append_paged_kv_cache with
     the caches by reference: only the new rows travel),
  3. runs batch_decode_paged over the caches by reference (only q goes, o
     and lse come back).

The cache never moves. With --check every step's o is compared with a
float64 attention over a copy of everything appended that the client
keeps. The prompts are appended first, in calls of at most 32 MB.

    python3 examples/decode_loop.py --target unix:/run/kerneld/kerneld.sock --device cuda:0 \\
        --batch 16 --prompt 8192 --steps 64 --dtype bfloat16 --check

The target is the daemon's unix socket, where every call goes over the
native library: over plaintext TCP without a token each connection is a
principal of its own, so the calls that reference the caches go over the
client's grpcio connection, which allocated them (docs/python.md).

Needs numpy (and ml_dtypes for bfloat16). docs/attention.md describes the
ops and the cache in the daemon.
"""
import argparse
import time

import numpy as np

import kerneld
from kerneld._graph import ServerBuffer


def numpy_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class PagedCache:
    """K and V caches held by the daemon and the page table that indexes them."""

    def __init__(self, client, device, batch, max_len, kv_heads, head_dim, page_size=16,
                 dtype="float16", seed=0):
        self.client, self.batch, self.page = client, batch, page_size
        self.kv_heads, self.head_dim, self.dtype = kv_heads, head_dim, dtype
        self.pages_per = -(-max_len // page_size)
        self.max_pages = batch * self.pages_per
        shape = (self.max_pages, page_size, kv_heads, head_dim)
        self._owned = []
        if device.startswith("cuda"):
            self.k = ServerBuffer.allocate(client, device, dtype, shape, "decode_loop.k")
            self._owned.append(self.k)
            self.v = ServerBuffer.allocate(client, device, dtype, shape, "decode_loop.v")
            self._owned.append(self.v)
        else:
            # A CPU daemon allocates no buffers: a registered shared-memory
            # region is as resident (the daemon maps it once).
            self.k, self.v = (self._host_buffer(shape) for _ in range(2))
        # Free pages in a shuffled order: a request's pages need not be adjacent.
        self.free = list(np.random.default_rng(seed).permutation(self.max_pages))
        self.pages = [[] for _ in range(batch)]
        self.lens = np.zeros(batch, dtype=np.int64)
        self._indptr = self._indices = None  # the page table's arrays, until a page is added

    def _host_buffer(self, shape):
        h = self.client.register(np.zeros(shape, dtype=numpy_dtype(self.dtype)))
        self._owned.append(h)
        return ServerBuffer(self.client, h.buffer_id, self.dtype, shape, h.offset, owner=False)

    def host_view(self, which):
        """On a CPU daemon, the shared memory of k_cache (0) or v_cache (1)."""
        return self._owned[which].array

    def grow(self, tokens):
        """Makes room for `tokens[b]` more keys of each request; the slots'
        positions ([B] arrays: each request's first new position)."""
        first = self.lens.copy()
        for b, n in enumerate(tokens):
            self.lens[b] += n
            while len(self.pages[b]) * self.page < self.lens[b]:
                self.pages[b].append(self.free.pop())
                self._indptr = self._indices = None
        return first

    def table(self):
        """kv_indptr, kv_indices and kv_last_page_len (int32) of the requests now.
        The first two are rebuilt only when a page was added (once every
        page_size steps of a decode), so a step costs the client little."""
        if self._indptr is None:
            self._indptr = np.zeros(self.batch + 1, dtype=np.int32)
            self._indptr[1:] = np.cumsum([len(p) for p in self.pages])
            self._indices = np.fromiter((x for p in self.pages for x in p), dtype=np.int32,
                                        count=int(self._indptr[-1]))
        last = ((self.lens - 1) % self.page + 1).astype(np.int32)
        last[self.lens == 0] = 1
        return self._indptr, self._indices, last

    def append(self, k_rows, v_rows, tokens):
        """Appends k_rows / v_rows ([sum(tokens), kv_heads, head_dim], each
        request's tokens in turn) after each request's keys, in place."""
        first = self.grow(tokens)
        batch_indices = np.repeat(np.arange(self.batch, dtype=np.int32), tokens)
        positions = np.concatenate([np.arange(f, f + n, dtype=np.int32)
                                    for f, n in zip(first, tokens)]).astype(np.int32)
        indptr, indices, last = self.table()
        self.client.append_paged_kv_cache(
            append_key=k_rows, append_value=v_rows, batch_indices=batch_indices,
            positions=positions, k_cache=self.k, v_cache=self.v, kv_indices=indices,
            kv_indptr=indptr, kv_last_page_len=last)

    def append_chunked(self, k_rows, v_rows, tokens, max_bytes=32 << 20):
        """append() in calls of at most max_bytes of keys and values each: a
        long prompt's rows in one call would pass the daemon's message limit
        (--max_message_mb, 256 by default)."""
        row = 2 * self.kv_heads * self.head_dim * numpy_dtype(self.dtype).itemsize
        limit = max(1, max_bytes // row)
        start, taken, pending = 0, 0, [0] * self.batch
        for b, n in enumerate(tokens):
            left = n
            while left:
                take = min(left, limit - taken)
                pending[b] += take
                taken += take
                left -= take
                if taken == limit:
                    self.append(k_rows[start:start + taken], v_rows[start:start + taken], pending)
                    start, taken, pending = start + taken, 0, [0] * self.batch
        if taken:
            self.append(k_rows[start:start + taken], v_rows[start:start + taken], pending)

    def decode(self, q, **attrs):
        """o and lse of one query per request ([B, num_qo_heads, head_dim])."""
        indptr, indices, last = self.table()
        return self.client.batch_decode_paged(q, self.k, self.v, indptr, indices, last, **attrs)

    def free_buffers(self):
        for b in self._owned:
            if isinstance(b, ServerBuffer):
                b.free()
            else:
                b.close()  # a registered Handle
        self._owned = []


class Mirror:
    """Everything appended, in float64 on the client, and the attention over it."""

    def __init__(self, batch, kv_heads, head_dim):
        self.k = [np.zeros((0, kv_heads, head_dim)) for _ in range(batch)]
        self.v = [np.zeros((0, kv_heads, head_dim)) for _ in range(batch)]

    def append(self, k_rows, v_rows, tokens):
        at = 0
        for b, n in enumerate(tokens):
            self.k[b] = np.concatenate([self.k[b], k_rows[at:at + n].astype(np.float64)])
            self.v[b] = np.concatenate([self.v[b], v_rows[at:at + n].astype(np.float64)])
            at += n

    def decode(self, q, sm_scale=None):
        """float64 o [B, Hq, D] and lse [B, Hq] (natural log) of q over the mirror."""
        batch, hq, d = q.shape
        group = hq // self.k[0].shape[1]
        scale = sm_scale or 1.0 / np.sqrt(d)
        o = np.zeros((batch, hq, d))
        lse = np.full((batch, hq), -np.inf)
        for b in range(batch):
            if len(self.k[b]) == 0:
                continue
            for h in range(hq):
                x = scale * (self.k[b][:, h // group] @ q[b, h].astype(np.float64))
                m = x.max()
                w = np.exp(x - m)
                o[b, h] = w @ self.v[b][:, h // group] / w.sum()
                lse[b, h] = m + np.log(w.sum())
        return o, lse


def run(client, device, batch, prompt, steps, q_heads, kv_heads, head_dim, page_size, dtype,
        check=False, seed=1, on_step=None, split=None):
    """The loop; returns per-step client latencies (us) and the largest |o - reference|.
    prompt: one length for every request, or one per request. split: a dict
    that gets each step's append and decode latencies (us) apart."""
    rng = np.random.default_rng(seed)
    dt = numpy_dtype(dtype)
    prompts = [prompt] * batch if np.isscalar(prompt) else list(prompt)
    cache = PagedCache(client, device, batch, max(prompts) + steps, kv_heads, head_dim, page_size,
                       dtype, seed)
    mirror = Mirror(batch, kv_heads, head_dim) if check else None
    lat, worst = [], 0.0
    try:
        if sum(prompts):  # the prompts: one append of every request's tokens
            rows = (sum(prompts), kv_heads, head_dim)
            k, v = rng.standard_normal(rows).astype(dt), rng.standard_normal(rows).astype(dt)
            cache.append_chunked(k, v, prompts)
            if check:
                mirror.append(k, v, prompts)
        ones = [1] * batch
        for step in range(steps):
            k = rng.standard_normal((batch, kv_heads, head_dim)).astype(dt)
            v = rng.standard_normal((batch, kv_heads, head_dim)).astype(dt)
            q = rng.standard_normal((batch, q_heads, head_dim)).astype(dt)
            t0 = time.perf_counter()
            cache.append(k, v, ones)
            t1 = time.perf_counter()
            o, lse = cache.decode(q)
            t2 = time.perf_counter()
            lat.append((t2 - t0) * 1e6)
            if split is not None:
                split.setdefault("append", []).append((t1 - t0) * 1e6)
                split.setdefault("decode", []).append((t2 - t1) * 1e6)
            if check:
                mirror.append(k, v, ones)
                want_o, want_lse = mirror.decode(q)
                worst = max(worst, float(np.abs(o.astype(np.float64) - want_o).max()))
                if on_step is not None:
                    on_step(step, cache, mirror, o, lse, want_o, want_lse)
    finally:
        cache.free_buffers()
    return lat, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="unix:/run/kerneld/kerneld.sock",
                    help="the daemon's unix socket (or a target with a token: see above)")
    ap.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a CPU-only daemon")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=1024, help="keys per request before the loop")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--heads", default="32/8", help="query heads / kv heads")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--dtype", default="float16", help="float16, bfloat16 (ml_dtypes), float32")
    ap.add_argument("--check", action="store_true", help="compare o with a float64 reference")
    args = ap.parse_args()
    hq, hkv = (int(x) for x in args.heads.split("/"))
    split = {}
    with kerneld.Client(args.target) as client:
        lat, worst = run(client, args.device, args.batch, args.prompt, args.steps, hq, hkv,
                         args.head_dim, args.page, args.dtype, check=args.check, split=split)

    def p50(xs):
        return sorted(xs)[len(xs) // 2]
    lat.sort()
    print("batch %d, keys %d..%d, %d steps: append + decode p50 %.1f us, p99 %.1f us"
          " (append p50 %.1f us, decode p50 %.1f us)"
          % (args.batch, args.prompt + 1, args.prompt + args.steps, args.steps,
             lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))],
             p50(split["append"]), p50(split["decode"])))
    if args.check:
        print("largest |o - float64 reference|: %.3g" % worst)


if __name__ == "__main__":
    main()
