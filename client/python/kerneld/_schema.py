"""Op schemas from ListKernels: names, docstrings, signatures, output shapes."""
import inspect
import re

from ._proto import kerneld_pb2 as pb
from ._errors import invalid_argument
from ._tensors import NAMES, BY_NAME

_TOKEN = re.compile(r"^(?:(\d+)\s*\*\s*)?([A-Za-z_]\w*|\d+|\.\.\.)$")


def _parse_dims(rule):
    """"[..., 2*d]" -> [("...",1), ("d",2)]; None if the rule is not a bracketed list."""
    rule = rule.strip()
    if not rule.startswith("["):
        return None, rule
    end = rule.find("]")
    if end < 0:
        return None, rule
    body, rest = rule[1:end].strip(), rule[end + 1:].strip()
    dims = []
    if body:
        for tok in body.split(","):
            m = _TOKEN.match(tok.strip())
            if not m:
                return None, rule
            k = int(m.group(1)) if m.group(1) else 1
            dims.append((m.group(2), k))
    return dims, rest


def attr_value(v, a=None):
    """A Python value as an AttrValue (into `a`), typed by the value (the daemon checks it against the schema)."""
    a = pb.AttrValue() if a is None else a
    if type(v) is float:
        a.f = v
    elif isinstance(v, (bool,)) or type(v).__name__ == "bool_":
        a.b = bool(v)
    elif isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        a.i = int(v)
    elif isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
        a.f = float(v)
    elif isinstance(v, str):
        a.s = v
    else:
        raise invalid_argument("attr value %r (a %s) is not a float, int, bool or str" % (v, type(v).__name__))
    return a


def attr_python(a):
    k = a.WhichOneof("value")
    return None if k is None else getattr(a, k)


class OpSchema:
    def __init__(self, k):
        self.name = k.name
        self.doc = k.doc
        self.info = k
        self.inputs = [t.name for t in k.inputs]
        self.input_dtypes = {t.name: set(t.dtypes) for t in k.inputs}
        self.input_rules = {t.name: t.shape for t in k.inputs}
        self.outputs = [t.name for t in k.outputs]
        self.output_rules = {t.name: t.shape for t in k.outputs}
        self.in_place_of = {t.name: t.in_place_of for t in k.outputs if t.in_place_of}
        self.attrs = [a.name for a in k.attrs]
        self.attr_specs = {a.name: a for a in k.attrs}

    def check_dtype(self, name, dt):
        allowed = self.input_dtypes.get(name)
        if allowed and dt not in allowed:
            raise invalid_argument("%s: '%s' dtype %s not in {%s}" % (
                self.name, name, NAMES.get(dt, dt),
                ", ".join(NAMES[d] for d in sorted(allowed) if d in NAMES)))

    # ---- output shapes, from the shape rules (None where a rule leaves a dim open) ----
    def infer_outputs(self, shapes, dtypes):
        """{output: (shape, dtype)} for the outputs the rules determine."""
        env, ell = {}, None
        for name in self.inputs:
            if name not in shapes:
                continue
            dims, _ = _parse_dims(self.input_rules.get(name, ""))
            if dims is None:
                continue
            shp = shapes[name]
            names = [d for d, _ in dims]
            if "..." in names:
                i = names.index("...")
                after = len(dims) - i - 1
                if len(shp) < len(dims) - 1:
                    continue
                if ell is None:
                    ell = tuple(shp[:len(shp) - after])
                pairs = list(zip(dims[:i], shp[:i])) + list(zip(dims[i + 1:], shp[len(shp) - after:]))
            else:
                if len(shp) != len(dims):
                    continue
                pairs = list(zip(dims, shp))
            for (d, k), v in pairs:
                if not d.isdigit() and d not in env and v % k == 0:
                    env[d] = v // k
        out = {}
        for o in self.outputs:
            src = self.in_place_of.get(o)
            rule = self.output_rules.get(o, "")
            m = re.match(r"same dtype and shape as '(\w+)'", rule)
            if src or m:
                src = src or m.group(1)
                if src in shapes:
                    out[o] = (tuple(shapes[src]), dtypes[src])
                continue
            dims, rest = _parse_dims(rule)
            if dims is None:
                continue
            m = re.search(r"dtype of '(\w+)'", rest)
            if m:
                if m.group(1) not in dtypes:
                    continue
                dt = dtypes[m.group(1)]
            else:
                word = rest.split()[0] if rest.split() else ""
                if word not in BY_NAME:
                    continue
                dt = BY_NAME[word]
            shape, ok = [], True
            for d, k in dims:
                if d == "...":
                    if ell is None:
                        ok = False
                        break
                    shape.extend(ell)
                elif d.isdigit():
                    shape.append(int(d) * k)
                elif d in env:
                    shape.append(env[d] * k)
                else:
                    ok = False
                    break
            if ok:
                out[o] = (tuple(shape), dt)
        return out

    # ---- the generated method's docstring and signature ----
    def docstring(self):
        lines = [self.doc, ""]
        lines.append("Inputs (positional, in this order, or by name):")
        for t in self.info.inputs:
            lines.append("  %s: %s %s%s" % (t.name, t.shape, "{" + ", ".join(NAMES.get(d, str(d)) for d in t.dtypes) + "}",
                                          (" - " + t.doc) if t.doc else ""))
        lines.append("Outputs (one is returned; several as a tuple in this order):")
        for t in self.info.outputs:
            extra = " (in place of '%s')" % t.in_place_of if t.in_place_of else (
                " (may alias '%s')" % t.may_alias if t.may_alias else "")
            lines.append("  %s: %s%s" % (t.name, t.shape, extra))
        if self.info.attrs:
            lines.append("Attrs (keyword):")
            for a in self.info.attrs:
                d = attr_python(a.default_value)
                lines.append("  %s: %s%s%s" % (a.name, a.type, " (required)" if a.required else
                                               (" = %r" % d if d is not None else ""),
                                               (" - " + a.doc) if a.doc else ""))
        lines.append("")
        lines.append("Keywords for every op: out=, backend=, device=, via=, timeout=, return_info=.")
        lines.append("Implementations: " + ", ".join(i.backend for i in self.info.implementations))
        return "\n".join(lines)

    def signature(self, with_self=False):
        P = inspect.Parameter
        params = [P("self", P.POSITIONAL_OR_KEYWORD)] if with_self else []
        params += [P(n, P.POSITIONAL_OR_KEYWORD) for n in self.inputs]
        for a in self.info.attrs:
            d = attr_python(a.default_value)
            params.append(P(a.name, P.KEYWORD_ONLY,
                            default=P.empty if a.required else d))
        for kw in ("out", "backend", "device", "via", "timeout"):
            params.append(P(kw, P.KEYWORD_ONLY, default=None))
        params.append(P("return_info", P.KEYWORD_ONLY, default=False))
        return inspect.Signature(params)
