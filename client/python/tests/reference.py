"""float64 references and inputs for every op the daemon serves.

CASES[op](n, dtype, rng) -> (inputs dict of numpy arrays, attrs, {output: dtype})
REFS[op](inputs as float64, attrs) -> {output: float64 array}
An op without an entry here fails test_every_op_has_a_reference: add one.
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
}
CASES = {
    "scale": case_scale, "add": case_elementwise(["a", "b"]), "rmsnorm": case_rmsnorm,
    "fused_add_rmsnorm": case_fused, "layernorm": case_layernorm,
    "silu_and_mul": case_gated, "gelu_and_mul": case_gated, "gelu_tanh_and_mul": case_gated,
    "gemm": case_gemm, "softmax": case_softmax, "rope": case_rope,
    "top_k_top_p_sampling": case_sampling, "min_p_sampling": case_min_p,
}
# Ops whose float inputs take only float32 whatever the dtype parameter.
FLOAT32_ONLY = {"top_k_top_p_sampling", "min_p_sampling"}
