"""float64 references and inputs for every op the daemon serves.

CASES[op](n, dtype, rng) -> (inputs dict of numpy arrays, attrs, {output: dtype})
REFS[op](inputs as float64, attrs) -> {output: float64 array}
An op without an entry here is checked from its schema against the CPU backend
(test_every_op.py).
"""
import math

import numpy as np

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

TOL = {"float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def rand(rng, shape, dtype, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32).astype(np_dtype(dtype))


def f64(a):
    return np.asarray(a).astype(np.float64)


def _erf(x):
    return np.vectorize(math.erf)(x)


def ref_scale(i, a):
    return {"y": i["x"] * a["factor"]}


def ref_add(i, a):
    return {"y": i["a"] + i["b"]}


def ref_rmsnorm(i, a):
    x = i["x"]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + a["eps"])
    return {"y": x * r * (i["weight"] + a.get("weight_bias", 0.0))}


def ref_fused_add_rmsnorm(i, a):
    s = i["x"] + i["residual"]
    r = 1.0 / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + a["eps"])
    return {"x": s * r * (i["weight"] + a.get("weight_bias", 0.0)), "residual": s}


def ref_layernorm(i, a):
    x = i["x"]
    c = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(c * c, axis=-1, keepdims=True)
    return {"y": c / np.sqrt(var + a["eps"]) * i["gamma"] + i["beta"]}


def _gated(f):
    def ref(i, a):
        x = i["x"]
        d = x.shape[-1] // 2
        return {"y": f(x[..., :d]) * x[..., d:]}
    return ref


def silu(g):
    return g / (1.0 + np.exp(-g))


def gelu(g):
    return 0.5 * g * (1.0 + _erf(g / math.sqrt(2.0)))


def gelu_tanh(g):
    u = math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)
    return 0.5 * g * (1.0 + np.tanh(u))


def ref_gemm(i, a):
    b = i["b"].T if a.get("transpose_b", False) else i["b"]
    return {"c": a.get("alpha", 1.0) * (i["a"] @ b)}


def ref_softmax(i, a):
    z = i["logits"] / a["temperature"]
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return {"probs": e / e.sum(axis=-1, keepdims=True)}


def ref_rope(i, a):
    q, k, pos, cache = i["q"].copy(), i["k"].copy(), i["positions"].astype(np.int64), i["cos_sin_cache"]
    rot = cache.shape[1]
    half = rot // 2
    cos, sin = cache[pos, :half], cache[pos, half:]
    for t in (q, k):
        cs, sn = cos[:, None, :], sin[:, None, :]
        if a.get("is_neox", True):
            x1, x2 = t[..., :half].copy(), t[..., half:rot].copy()
            t[..., :half] = x1 * cs - x2 * sn
            t[..., half:rot] = x2 * cs + x1 * sn
        else:
            x1, x2 = t[..., 0:rot:2].copy(), t[..., 1:rot:2].copy()
            t[..., 0:rot:2] = x1 * cs - x2 * sn
            t[..., 1:rot:2] = x2 * cs + x1 * sn
    return {"q": q, "k": k}


def _top_k_thresholds(x, top_k):
    """Per row (as a column), the value a row keeps from: its k-th largest, ties kept; -inf
    (the whole row) where k <= 0 or k >= vocab. top_k is [] or [1] (one k) or [batch]."""
    b, v = x.shape
    ks = top_k.reshape(-1)
    thr = np.full((b, 1), -np.inf)
    for r in range(b):
        k = int(ks[0] if ks.size == 1 else ks[r])
        if 0 < k < v:
            thr[r, 0] = np.sort(x[r])[v - k]
    return thr


def ref_top_k_mask_logits(i, a):
    x = i["logits"]
    return {"masked_logits": np.where(x >= _top_k_thresholds(x, i["top_k"]), x, -np.inf)}


def ref_top_k_renorm_probs(i, a):
    p = i["probs"]
    kept = np.where(p >= _top_k_thresholds(p, i["top_k"]), p, 0.0)
    s = kept.sum(axis=-1, keepdims=True)
    return {"renorm_probs": np.where(s > 0, kept / np.where(s > 0, s, 1.0), 0.0)}


def case_elementwise(names):
    def case(n, dt, rng):
        return {k: rand(rng, (n,), dt) for k in names}, {}, {"y": dt}
    return case


def case_scale(n, dt, rng):
    return {"x": rand(rng, (n,), dt)}, {"factor": 1.75}, {"y": dt}


def case_rmsnorm(n, dt, rng):
    return ({"x": rand(rng, (3, n), dt), "weight": rand(rng, (n,), dt)},
            {"eps": 1e-6, "weight_bias": 0.5}, {"y": dt})


def case_fused(n, dt, rng):
    return ({"x": rand(rng, (3, n), dt), "residual": rand(rng, (3, n), dt),
             "weight": rand(rng, (n,), dt)}, {"eps": 1e-6}, {"x": dt, "residual": dt})


def case_layernorm(n, dt, rng):
    return ({"x": rand(rng, (3, n), dt), "gamma": rand(rng, (n,), dt), "beta": rand(rng, (n,), dt)},
            {"eps": 1e-5}, {"y": dt})


def case_gated(n, dt, rng):
    return {"x": rand(rng, (3, 2 * n), dt, -4, 4)}, {}, {"y": dt}


def case_gemm(n, dt, rng):
    return ({"a": rand(rng, (5, 17), dt, -1, 1), "b": rand(rng, (n, 17), dt, -1, 1)},
            {"transpose_b": True, "alpha": 0.5}, {"c": dt})


def case_softmax(n, dt, rng):
    return {"logits": rand(rng, (3, n), dt, -6, 6)}, {"temperature": 0.7}, {"probs": "float32"}


def case_rope(n, dt, rng):
    tokens, max_pos, d, rot = n, 64, 16, 12
    ang = rng.uniform(-math.pi, math.pi, size=(max_pos, rot // 2))
    cache = np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)
    return ({"q": rand(rng, (tokens, 2, d), dt), "k": rand(rng, (tokens, 1, d), dt),
             "positions": rng.integers(0, max_pos, size=tokens).astype(np.int32),
             "cos_sin_cache": cache}, {"is_neox": bool(n % 2)}, {"q": dt, "k": dt})


def top_k_input(n, dt, rng):
    """The 'top_k' input over 4 rows of vocab n: each (n, dtype) pair takes one of its forms,
    [] (int32), [1] (int64) or [4] (a k per row: a few, a third of the row, <= 0 and >= n:
    both keep the whole row); every form shows up at every size."""
    form = ({"float32": 0, "float16": 1, "bfloat16": 2}.get(dt, 0) + n) % 3
    if form == 0:
        return np.array(max(1, n // 4), np.int32)
    if form == 1:
        return np.array([min(3, n)], np.int64)
    ks = [min(5, n), max(1, n // 3), -1 if dt == "float16" else 0, n + 1]
    return np.array(ks, np.int64 if dt == "float16" else np.int32)


def case_top_k_mask(n, dt, rng):
    x = rand(rng, (4, n), dt, -6, 6)
    x[1] = np.round(x[1].astype(np.float32))  # integers: ties at the k-th largest
    if n > 1:
        x[0, ::7] = -np.inf  # masked or kept, -inf stays -inf (only NaN is refused)
    return {"logits": x, "top_k": top_k_input(n, dt, rng)}, {}, {"masked_logits": dt}


def case_top_k_renorm(n, dt, rng):
    p = rand(rng, (4, n), dt, 0, 1)
    p[1] = np.round(p[1].astype(np.float32) * 4) / 4  # 0, .25, ..., 1: ties and zeros
    p[2] = 0  # kept mass 0: the row comes out all 0
    return {"probs": p, "top_k": top_k_input(n, dt, rng)}, {}, {"renorm_probs": dt}


def case_sampling(n, dt, rng):
    p = rng.uniform(0, 1, size=(3, n)).astype(np.float32)
    return {"probs": p}, {"top_k": 5, "top_p": 0.9, "seed": 7}, {"samples": "int32"}


def support(probs, top_k, top_p):
    """Per row, the set of tokens top-k / top-p sampling may return (ties kept)."""
    rows = []
    for p in probs:
        allowed = set()
        for j, pj in enumerate(p):
            if pj <= 0:
                continue
            larger = p[p > pj]
            if top_k and len(larger) >= top_k:
                continue
            if larger.sum() >= top_p * p.sum():
                continue
            allowed.add(j)
        rows.append(allowed)
    return rows


def min_p_support(probs, min_p):
    """Per row, the tokens min-p sampling may return: p > 0 and p >= min_p * max (float32)."""
    rows = []
    for p in probs:
        thr = np.float32(min_p) * np.float32(p.max())
        rows.append({j for j, pj in enumerate(p) if pj > 0 and np.float32(pj) >= thr})
    return rows


def case_min_p(n, dt, rng):
    p = rng.uniform(0, 1, size=(3, n)).astype(np.float32)
    return {"probs": p}, {"min_p": 0.5, "seed": 7}, {"samples": "int32"}


# Random ops: no float64 reference; a sample must fall in the support.
SUPPORT = {
    "top_k_top_p_sampling": lambda probs, a: support(probs, a["top_k"], a["top_p"]),
    "min_p_sampling": lambda probs, a: min_p_support(probs, a["min_p"]),
}

REFS = {
    "scale": ref_scale, "add": ref_add, "rmsnorm": ref_rmsnorm,
    "fused_add_rmsnorm": ref_fused_add_rmsnorm, "layernorm": ref_layernorm,
    "silu_and_mul": _gated(silu), "gelu_and_mul": _gated(gelu),
    "gelu_tanh_and_mul": _gated(gelu_tanh), "gemm": ref_gemm, "softmax": ref_softmax,
    "rope": ref_rope, "top_k_top_p_sampling": None, "min_p_sampling": None,  # SUPPORT
    "top_k_mask_logits": ref_top_k_mask_logits, "top_k_renorm_probs": ref_top_k_renorm_probs,
}
CASES = {
    "scale": case_scale, "add": case_elementwise(["a", "b"]), "rmsnorm": case_rmsnorm,
    "fused_add_rmsnorm": case_fused, "layernorm": case_layernorm,
    "silu_and_mul": case_gated, "gelu_and_mul": case_gated, "gelu_tanh_and_mul": case_gated,
    "gemm": case_gemm, "softmax": case_softmax, "rope": case_rope,
    "top_k_top_p_sampling": case_sampling, "min_p_sampling": case_min_p,
    "top_k_mask_logits": case_top_k_mask, "top_k_renorm_probs": case_top_k_renorm,
}
# Ops whose float inputs take only float32 whatever the dtype parameter.
FLOAT32_ONLY = {"top_k_top_p_sampling", "min_p_sampling"}
