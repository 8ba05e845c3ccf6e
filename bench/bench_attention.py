"""The attention ops' peers for bench/peers.py, on kernel_bench's records.

A record carries each input's dims and the index arrays kernel_bench drew
(`index`: kv_indptr, kv_last_page_len, qo_indptr, batch_indices,
positions; kv_indices when it has at most 65536 entries, else a random
permutation of the pages stands in, as kernel_bench drew one). Values of
the floating inputs do not matter to the timings and are random.

- torch: scaled_dot_product_attention over dense K / V of the longest
  request's keys ([B, H, L, D], GQA through enable_gqa where torch has it,
  else K / V repeated per query head before timing); causal prefill masks
  bottom-right as kerneld and FlashInfer do. The append is an index_copy_
  of the new rows into the caches viewed as [slots, H_kv, D]; merge_state
  its formula in torch ops.
- FlashInfer (Python package): the wrappers planned once outside the
  timing, run timed, backend "auto"; the backend FlashInfer chose is kept
  with the row. Decode is timed both ways FlashInfer runs it (its CUDA-core
  kernel and use_tensor_cores) and the faster is its column.
"""

OPS = ("batch_decode_paged", "batch_prefill_paged", "batch_prefill_ragged",
       "append_paged_kv_cache", "merge_state")

WORKSPACE_BYTES = 256 << 20


def import_flashinfer():
    """The flashinfer module, or None (with a note) where it does not import."""
    import sys
    try:
        import flashinfer
        return flashinfer
    except Exception as e:  # not installed, or no JIT toolchain for it
        print(f"peers: no FlashInfer Python package ({e}); the attention rows have no "
              f"FlashInfer column", file=sys.stderr)
        return None


class Problem:
    """One record's tensors on the GPU."""

    def __init__(self, torch, rec, dt):
        self.torch, self.rec, self.dt = torch, rec, dt
        self.dev = torch.device("cuda")
        self.ins = rec["inputs"]
        self.idx = rec.get("index", {})

    def rand(self, name):
        return self.torch.randn(*self.ins[name], dtype=self.dt, device=self.dev)

    def ints(self, name):
        """An index input's values as kernel_bench drew them, on the GPU."""
        torch = self.torch
        if name in self.idx:
            return torch.tensor(self.idx[name], dtype=torch.int32, device=self.dev)
        if name == "kv_indices":  # too long for the record: a permutation, as drawn
            pages = self.ins["k_cache"][0]
            n = self.ins[name][0]
            return torch.randperm(pages, device=self.dev)[:n].to(torch.int32)
        raise KeyError(f"the record has no values for '{name}'")

    def kv_lens(self):
        """Each request's keys (paged: by its pages and last page length)."""
        indptr = self.idx["kv_indptr"]
        if "k_cache" not in self.ins:
            return [indptr[b + 1] - indptr[b] for b in range(len(indptr) - 1)]
        page = self.ins["k_cache"][1]
        last = self.idx["kv_last_page_len"]
        lens = []
        for b in range(len(indptr) - 1):
            pages = indptr[b + 1] - indptr[b]
            lens.append(0 if pages <= 0 else (pages - 1) * page + last[b])
        return lens

    def qo_lens(self):
        qo = self.idx.get("qo_indptr")
        if qo is None:
            return [1] * (len(self.idx["kv_indptr"]) - 1)
        return [qo[b + 1] - qo[b] for b in range(len(qo) - 1)]

    def heads(self):
        q = self.ins["q"]
        kv = self.ins["k_cache"][2] if "k_cache" in self.ins else self.ins["k"][1]
        return q[1], kv, q[2]

    def causal(self):
        return bool(self.rec.get("attrs", {}).get("causal", False))


def sdpa(torch, q, k, v, causal):
    """q [B, Hq, Lq, D] over k, v [B, Hkv, Lk, D], bottom-right causal."""
    F = torch.nn.functional
    mask = None
    if causal and q.shape[2] != k.shape[2]:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(q.shape[2], k.shape[2])
    is_causal = causal and mask is None
    group = q.shape[1] // k.shape[1]
    try:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                       enable_gqa=group > 1)
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                      is_causal=is_causal, enable_gqa=group > 1)
    except (TypeError, RuntimeError):  # no enable_gqa (torch < 2.5): K / V per query head
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                      is_causal=is_causal)


def torch_fn(torch, rec, dt):
    """A zero-argument callable running rec's attention op in torch, or None."""
    p = Problem(torch, rec, dt)
    op = rec["op"]
    if op in ("batch_decode_paged", "batch_prefill_paged", "batch_prefill_ragged"):
        hq, hkv, d = p.heads()
        qo, kv = p.qo_lens(), p.kv_lens()
        b, lq, lk = len(kv), max(qo), max(kv)
        if len(set(qo)) != 1:
            return None  # SDPA's batch wants one query length
        q = torch.randn(b, hq, lq, d, dtype=dt, device=p.dev)
        k = torch.randn(b, hkv, lk, d, dtype=dt, device=p.dev)
        v = torch.randn(b, hkv, lk, d, dtype=dt, device=p.dev)
        return sdpa(torch, q, k, v, p.causal() and op != "batch_decode_paged")
    if op == "append_paged_kv_cache":
        kc, vc = p.rand("k_cache"), p.rand("v_cache")
        key, value = p.rand("append_key"), p.rand("append_value")
        page = kc.shape[1]
        indptr, indices = p.ints("kv_indptr").long(), p.ints("kv_indices").long()
        b, pos = p.ints("batch_indices").long(), p.ints("positions").long()
        slots = indices[indptr[b] + pos // page] * page + pos % page  # outside the timing
        kf, vf = kc.view(-1, *kc.shape[2:]), vc.view(-1, *vc.shape[2:])
        return lambda: (kf.index_copy_(0, slots, key), vf.index_copy_(0, slots, value))
    if op == "merge_state":
        va, vb = p.rand("v_a"), p.rand("v_b")
        sa = torch.randn(*p.ins["s_a"], dtype=torch.float32, device=p.dev)
        sb = torch.randn(*p.ins["s_b"], dtype=torch.float32, device=p.dev)

        def merge():
            m = torch.maximum(sa, sb)
            wa, wb = torch.exp(sa - m), torch.exp(sb - m)
            s = m + torch.log(wa + wb)
            v = (va.float() * (wa / (wa + wb)).unsqueeze(-1)
                 + vb.float() * (wb / (wa + wb)).unsqueeze(-1)).to(va.dtype)
            return v, s
        return merge
    return None


def flashinfer_fns(torch, fi, rec):
    """[(callable, backend)]: each way FlashInfer runs rec's op, planned once.

    Decode has two: its CUDA-core kernel (the wrapper's default) and, with
    use_tensor_cores, its prefill kernels (FlashInfer's advice for GQA); the
    caller keeps the faster, so kerneld meets the better of the two."""
    import sys
    if rec["op"] != "batch_decode_paged":
        return [flashinfer_fn(torch, fi, rec)]
    out = [flashinfer_fn(torch, fi, rec)]
    try:
        out.append(flashinfer_fn(torch, fi, rec, tensor_cores=True))
    except Exception as e:  # the default path still gives the column
        print(f"peers: no FlashInfer tensor-core decode for {rec['shape']}: {e}", file=sys.stderr)
    return out


def flashinfer_fn(torch, fi, rec, tensor_cores=False):
    """(callable, backend) running rec's op through FlashInfer, planned once."""
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(rec["dtype"])
    if dt is None:
        return None, None
    p = Problem(torch, rec, dt)
    op = rec["op"]
    ws = None
    if op in ("batch_decode_paged", "batch_prefill_paged", "batch_prefill_ragged"):
        ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=p.dev)
        hq, hkv, d = p.heads()
    if op == "batch_decode_paged":
        q, kc, vc = p.rand("q"), p.rand("k_cache"), p.rand("v_cache")
        w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tensor_cores)
        w.plan(p.ints("kv_indptr"), p.ints("kv_indices"), p.ints("kv_last_page_len"), hq, hkv, d,
               kc.shape[1], q_data_type=dt, kv_data_type=dt)
        return (lambda: w.run(q, (kc, vc))), "tensor-core" if tensor_cores else "cuda-core"
    if op == "batch_prefill_paged":
        q, kc, vc = p.rand("q"), p.rand("k_cache"), p.rand("v_cache")
        w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="auto")
        w.plan(p.ints("qo_indptr"), p.ints("kv_indptr"), p.ints("kv_indices"),
               p.ints("kv_last_page_len"), hq, hkv, d, kc.shape[1], causal=p.causal(),
               q_data_type=dt, kv_data_type=dt)
        return (lambda: w.run(q, (kc, vc))), getattr(w, "_backend", "")
    if op == "batch_prefill_ragged":
        q, k, v = p.rand("q"), p.rand("k"), p.rand("v")
        w = fi.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="auto")
        w.plan(p.ints("qo_indptr"), p.ints("kv_indptr"), hq, hkv, d, causal=p.causal(),
               q_data_type=dt, kv_data_type=dt)
        return (lambda: w.run(q, k, v)), getattr(w, "_backend", "")
    if op == "append_paged_kv_cache":
        kc, vc = p.rand("k_cache"), p.rand("v_cache")
        key, value = p.rand("append_key"), p.rand("append_value")
        args = (key, value, p.ints("batch_indices"), p.ints("positions"), (kc, vc),
                p.ints("kv_indices"), p.ints("kv_indptr"), p.ints("kv_last_page_len"))
        return (lambda: fi.append_paged_kv_cache(*args, kv_layout="NHD")), ""
    if op == "merge_state":
        va, vb = p.rand("v_a"), p.rand("v_b")
        sa = torch.randn(*p.ins["s_a"], dtype=torch.float32, device=p.dev)
        sb = torch.randn(*p.ins["s_b"], dtype=torch.float32, device=p.dev)
        return (lambda: fi.merge_state(va, sa, vb, sb)), ""
    return None, None


def rates(r):
    """TFLOP/s (prefill) or GB/s (the rest) of kerneld / torch / FlashInfer."""
    fl, by = r.get("flops", 0), r.get("bytes", 0)
    if r["op"] not in OPS or (not fl and not by):
        return ""
    unit, amount = ("TFLOP/s", fl / 1e12) if fl else ("GB/s", by / 1e9)
    cols = [("k", r["us"]), ("torch", r.get("torch_us")), ("fi", r.get("flashinfer_us"))]
    text = " ".join(f"{name} {amount / (us * 1e-6):.0f}" for name, us in cols if us)
    backend = r.get("flashinfer_backend")
    return f"{unit}: {text}" + (f" (fi backend {backend})" if backend else "")
