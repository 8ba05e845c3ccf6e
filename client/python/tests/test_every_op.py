"""Every op the daemon lists, without a per-op case: inputs made from its
schema (schema_gen.py, kernelctl run's rules), run as the daemon chooses and
on its CPU backend (backend="cpu") on the same inputs, the results compared.
Ops with a case in reference.py are checked against it by test_ops.py too."""
import numpy as np
import pytest

from reference import CASES, TOL, f64
from schema_gen import generate

# Tried in order: the first shape the op's rules accept for its first input.
SHAPES = [(4, 64), (4, 8, 64), (16, 2, 64), (8, 16)]
ATTR_VALUES = {"float": 0.5, "int": 1, "bool": True, "string": "x"}


def served(client):
    return [o for o in client.ops() if not o.startswith("_")]


def inputs_for(client, op, rng):
    schema = client.describe(op)
    attrs = {a["name"]: ATTR_VALUES.get(a["type"], 1) for a in schema["attrs"] if a["required"]}
    errors = []
    for shape in SHAPES:
        ins = generate(schema, shape, "float32", rng)
        try:
            client.call(op, backend="cpu", **{k: v.copy() for k, v in ins.items()}, **attrs)
            return schema, ins, attrs
        except Exception as e:  # the daemon's refusal of this shape: try the next
            errors.append("%s: %s" % (shape, e))
    pytest.fail("%s: no generated input ran on the CPU backend: %s" % (op, "; ".join(errors)))


def test_every_op_runs_from_its_schema(client):
    rng = np.random.default_rng(0)
    for op in served(client):
        inputs_for(client, op, rng)


def test_ops_without_a_case_match_the_cpu_backend(client):
    rng = np.random.default_rng(1)
    for op in served(client):
        if op in CASES:
            continue
        schema, ins, attrs = inputs_for(client, op, rng)
        got = client.call(op, **{k: v.copy() for k, v in ins.items()}, **attrs)
        want = client.call(op, backend="cpu", **{k: v.copy() for k, v in ins.items()}, **attrs)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want) == len(schema["outputs"]), op
        for o, g, w in zip(schema["outputs"], got, want):
            rtol, atol = TOL.get(str(w.dtype), (1e-5, 1e-5))
            assert g.shape == w.shape, "%s: '%s' shape %s, CPU %s" % (op, o["name"], g.shape, w.shape)
            np.testing.assert_allclose(f64(g), f64(w), rtol=rtol, atol=atol,
                                       err_msg="%s: '%s' against the CPU backend" % (op, o["name"]))
