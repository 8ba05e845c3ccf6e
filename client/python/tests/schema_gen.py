"""Inputs made from an op's schema alone (ListKernels' shape rules and each
input's generation), by the rules kernelctl run follows (client/input_gen.cc):
the first input takes the shape asked for, each later one its generation
shape or its rule over the symbols bound so far; values by generation kind."""
import re

import numpy as np

KINDS = ["UNIFORM", "PROBABILITIES", "INDEX", "INDPTR", "LENGTH", "PERMUTATION", "SEGMENT",
         "MODULO"]
_ITEM = re.compile(r"^\s*(\.\.\.|\d+|(?:(\d+)\s*\*\s*)?([A-Za-z_]\w*))\s*$")
_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32,
       "int64": np.int64}


def _parse(text):
    """[(kind, value, symbol)] or None for a rule that is not a simple pattern."""
    if not text or text[0] != "[" or text[-1] != "]":
        return None
    dims = []
    for item in text[1:-1].split(","):
        m = _ITEM.match(item)
        if not m:
            return None
        if m.group(1) == "...":
            dims.append(("...", 0, ""))
        elif m.group(3):
            dims.append(("sym", int(m.group(2) or 1), m.group(3)))
        else:
            dims.append(("const", int(m.group(1)), ""))
    return dims


def _bind(text, shape, bind):
    dims = _parse(text)
    if dims is None:
        return None
    fixed = [d for d in dims if d[0] != "..."]
    if len(fixed) == len(dims):
        if len(shape) != len(dims):
            return None
        pairs = zip(dims, shape)
    else:
        if len(shape) < len(fixed):
            return None
        at = [i for i, d in enumerate(dims) if d[0] == "..."][0]
        tail = len(dims) - at - 1
        pairs = list(zip(dims[:at], shape[:at])) + list(zip(dims[at + 1:], shape[len(shape) - tail:]))
        prefix = tuple(shape[at:len(shape) - tail])
        if bind.get("...", prefix) != prefix:
            return None
        bind = dict(bind, **{"...": prefix}) if "..." not in bind else bind
    trial = dict(bind)
    for (kind, value, sym), n in pairs:
        if kind == "const" and n != value:
            return None
        if kind == "sym":
            if n % value or trial.get(sym, n // value) != n // value:
                return None
            trial[sym] = n // value
    return trial


def _eval(text, bind):
    dims = _parse(text)
    if dims is None or (any(d[0] == "..." for d in dims) and ("..." not in bind or len(dims) == 1)):
        return None
    out = []
    for kind, value, sym in dims:
        if kind == "...":
            out.extend(bind["..."])
        elif kind == "const":
            out.append(value)
        elif sym in bind:
            out.append(value * bind[sym])
        else:
            return None
    return out


def kind_of(spec):
    g = spec.get("generation") or {}
    k = g.get("kind", 0)
    return KINDS[k] if isinstance(k, int) and k < len(KINDS) else (k or "UNIFORM")


def structured(kind, upper, n, rng):
    """The values of the index kinds that follow from place and one bound."""
    i = np.arange(n, dtype=np.int64)
    if kind == "INDPTR":
        return i * upper // max(n - 1, 1) if n > 1 else np.zeros(n, np.int64)
    if kind == "LENGTH":
        return rng.integers(1, max(upper, 1) + 1, size=n)
    if kind == "PERMUTATION":
        perm = rng.permutation(max(upper, 1))
        return perm[i % len(perm)] if upper > 0 else np.zeros(n, np.int64)
    if kind == "SEGMENT":
        return i * upper // max(n, 1)
    if kind == "MODULO":
        return i % upper if upper > 0 else np.zeros(n, np.int64)
    return None


def generate(schema, shape, dtype, rng):
    """{input: numpy array} for `schema` (a describe() dict), first input of `shape`."""
    bind, plan = {}, []
    for j, spec in enumerate(schema["inputs"]):
        dts = list(spec["dtypes"])
        dt = dtype if dtype in dts or not dts else dts[0]
        s = list(shape)
        kind = kind_of(spec)
        if j > 0:
            g = _eval((spec.get("generation") or {}).get("shape", ""), bind)
            if g is not None:
                s = g
                if kind == "INDPTR" and s:
                    s[-1] += 1
            else:
                r = _eval(spec["shape"], bind)
                if r is not None:
                    s = r
        bind = _bind(spec["shape"], s, bind) or bind
        plan.append((spec, dt, s, kind))
    out = {}
    for spec, dt, s, kind in plan:
        upper = bind.get((spec.get("generation") or {}).get("upper", ""), 1)
        n = int(np.prod(s)) if s else 1
        v = structured(kind, upper, n, rng)
        if v is None:
            if kind == "PROBABILITIES":
                v = rng.uniform(0.05, 1, size=s)
                v = v / v.sum(axis=-1, keepdims=True)
            elif kind == "INDEX":
                v = rng.integers(0, max(upper, 1), size=s)
            elif dt in ("float32", "float16", "bfloat16", "float64"):
                v = rng.uniform(-2, 2, size=s)
            else:
                v = rng.integers(0, 2, size=s)
        from reference import np_dtype
        out[spec["name"]] = np.asarray(v).reshape(s).astype(np.float32 if dt == "bfloat16" else np.float64).astype(np_dtype(dt))
    return out
