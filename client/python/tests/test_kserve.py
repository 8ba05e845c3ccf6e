"""The KServe v2 front end (inference.GRPCInferenceService, docs/kserve.md)
driven by a real tritonclient[grpc] from PyPI against the CPU daemon: server
and model metadata, infer on every op against the float64 references (and
the CPU backend for ops without one), typed contents, system shared memory,
the error codes, streaming infer, statistics, tokens and the sync API.

tritonclient needs a protobuf older than the newest the kerneld package
allows, so tests/run.sh runs this file in a venv of its own
(client/python[test,kserve]); elsewhere it is skipped."""
import os
import queue

import numpy as np
import pytest

grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException, np_to_triton_dtype  # noqa: E402
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402

from reference import CASES, REFS, SUPPORT, TOL, f64  # noqa: E402
from test_every_op import inputs_for, served  # noqa: E402


@pytest.fixture(scope="module")
def tc(daemon):
    # The unix socket: the daemon knows the caller's uid there, so it may
    # register its own 0600 shared memory (docs/security.md).
    c = grpcclient.InferenceServerClient(daemon.target)
    yield c
    c.close()


def plain(attrs):
    """Attr values as the Python types tritonclient maps to parameters."""
    out = {}
    for k, v in (attrs or {}).items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def infer_inputs(inputs):
    ins = []
    for name, arr in inputs.items():
        arr = np.ascontiguousarray(arr)
        i = grpcclient.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        i.set_data_from_numpy(arr)
        ins.append(i)
    return ins


def infer(c, op, inputs, attrs=None, **kw):
    return c.infer(op, infer_inputs(inputs), parameters=plain(attrs) or None, **kw)


def code(e):
    return str(e.status()).replace("StatusCode.", "")


# ---- metadata -------------------------------------------------------------

def test_server_metadata(tc, client):
    assert tc.is_server_live() and tc.is_server_ready()
    md = tc.get_server_metadata()
    assert md.name == "kerneld" and md.version == client.info()["version"]
    assert {"model_configuration", "system_shared_memory", "statistics",
            "parameters"} <= set(md.extensions)
    gpu = "cuda" in client.info()["backends"]
    assert ("cuda_shared_memory" in md.extensions) == gpu
    index = tc.get_model_repository_index()
    assert sorted(m.name for m in index.models) == sorted(client.ops())  # test ops too: --enable_test_ops
    assert all(m.state == "READY" and m.version == "1" for m in index.models)


def test_model_metadata_and_config(tc, client):
    md = tc.get_model_metadata("scale")
    assert md.name == "scale" and list(md.versions) == ["1"] and md.platform == "kerneld"
    assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [("x", "FP32", [-1])]
    assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == [("y", "FP32", [-1])]
    rms = tc.get_model_metadata("rmsnorm")
    assert [(t.name, list(t.shape)) for t in rms.inputs] == [("x", [-1, -1]), ("weight", [-1])]
    cfg = tc.get_model_config("scale").config
    assert cfg.name == "scale" and cfg.max_batch_size == 0  # perf_analyzer sends --shape as is
    assert [(i.name, i.data_type, list(i.dims)) for i in cfg.input] == [("x", 11, [-1])]  # TYPE_FP32
    assert cfg.parameters["factor"].string_value == "float, required"
    soft = tc.get_model_config("softmax").config
    assert [o.data_type for o in soft.output] == [11]  # probs: float32 whatever the input
    for op in served(client):  # every op describes itself from its schema
        md = tc.get_model_metadata(op)
        schema = client.describe(op)
        assert [t.name for t in md.inputs] == [i["name"] for i in schema["inputs"]], op
        assert [t.name for t in md.outputs] == [o["name"] for o in schema["outputs"]], op
        assert tc.is_model_ready(op)
    assert not tc.is_model_ready("no_such_op")
    with pytest.raises(InferenceServerException) as e:
        tc.get_model_metadata("no_such_op")
    assert code(e.value) == "NOT_FOUND" and "unknown model 'no_such_op'" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        tc.get_model_metadata("scale", model_version="2")
    assert code(e.value) == "NOT_FOUND"


# ---- infer ----------------------------------------------------------------

@pytest.mark.parametrize("op", sorted(CASES))
def test_infer_against_the_reference(tc, client, op):
    rng = np.random.default_rng(7)
    inputs, attrs, _ = CASES[op](127, "float32", rng)
    originals = {k: v.copy() for k, v in inputs.items()}
    r = infer(tc, op, inputs, attrs, request_id="req-" + op)
    assert r.get_response().id == "req-" + op and r.get_response().model_name == op
    outs = [o["name"] for o in client.describe(op)["outputs"]]
    if op in SUPPORT:  # random: the same seed draws what kerneld.v1 draws
        want = client.call(op, **originals, **attrs)
        np.testing.assert_array_equal(r.as_numpy(outs[0]), want)
        return
    want = REFS[op]({k: f64(v) for k, v in originals.items()}, attrs)
    rtol, atol = TOL["float32"]
    for o in outs:
        got = r.as_numpy(o)
        assert got.shape == want[o].shape, op
        np.testing.assert_allclose(f64(got), want[o], rtol=rtol, atol=atol, err_msg="%s '%s'" % (op, o))


def test_infer_every_other_op_matches_the_cpu_backend(tc, client):
    rng = np.random.default_rng(3)
    for op in served(client):
        if op in CASES:
            continue
        schema, ins, attrs = inputs_for(client, op, rng)
        want = client.call(op, backend="cpu", **{k: v.copy() for k, v in ins.items()}, **attrs)
        want = want if isinstance(want, tuple) else (want,)
        r = infer(tc, op, ins, attrs)
        for o, w in zip(schema["outputs"], want):
            got = r.as_numpy(o["name"])
            rtol, atol = TOL.get(str(w.dtype), (1e-5, 1e-5))
            assert got.shape == w.shape and got.dtype == w.dtype, op
            np.testing.assert_allclose(f64(got), f64(w), rtol=rtol, atol=atol, err_msg=op)


def test_dtype_follows_the_request_and_outputs_may_be_chosen(tc):
    x = np.linspace(-1, 1, 64).astype(np.float16)
    r = infer(tc, "scale", {"x": x}, {"factor": 2})  # an int64 parameter for a float attr
    y = r.as_numpy("y")
    assert y.dtype == np.float16 and r.get_output("y").datatype == "FP16"
    np.testing.assert_allclose(f64(y), f64(x) * 2, rtol=1e-3, atol=1e-3)
    a = np.ones((4, 8), np.float32)
    res = np.full((4, 8), 2, np.float32)
    w = np.ones(8, np.float32)
    # fused_add_rmsnorm has outputs x and residual; ask for residual alone.
    r = tc.infer("fused_add_rmsnorm", infer_inputs({"x": a, "residual": res, "weight": w}),
                 outputs=[grpcclient.InferRequestedOutput("residual")])
    assert [o.name for o in r.get_response().outputs] == ["residual"]
    np.testing.assert_array_equal(r.as_numpy("residual"), a + res)
    # kerneld.backend: the v1 request's backend.
    r = infer(tc, "scale", {"x": x.astype(np.float32)}, {"factor": 1.0, "kerneld.backend": "cpu"})
    np.testing.assert_array_equal(r.as_numpy("y"), x.astype(np.float32))


def test_typed_contents(daemon):
    import grpc
    ch = grpc.insecure_channel(daemon.target)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    req = service_pb2.ModelInferRequest(model_name="add", id="typed")
    for name, vals in (("a", [1, 2, 3]), ("b", [10, 20, 30])):
        t = req.inputs.add(name=name, datatype="FP32", shape=[3])
        t.contents.fp32_contents.extend(vals)
    resp = stub.ModelInfer(req, timeout=30)
    assert resp.id == "typed" and not resp.raw_output_contents
    assert list(resp.outputs[0].contents.fp32_contents) == [11, 22, 33]
    # FP16 has no typed field: its bytes come raw.
    req = service_pb2.ModelInferRequest(model_name="scale")
    t = req.inputs.add(name="x", datatype="FP16", shape=[2])
    t.contents.fp32_contents.extend([1, 2])
    req.parameters["factor"].double_param = 2.0
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in e.value.details()
    req = service_pb2.ModelInferRequest(model_name="scale")
    t = req.inputs.add(name="x", datatype="FP32", shape=[2])
    t.contents.fp32_contents.extend([1.5, -2.0])
    req.parameters["factor"].double_param = 2.0
    resp = stub.ModelInfer(req, timeout=30)
    assert list(resp.outputs[0].contents.fp32_contents) == [3.0, -4.0]
    t.contents.fp32_contents.append(9)  # 3 values for 2 elements
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "3 values" in e.value.details()
    ch.close()


# ---- errors ---------------------------------------------------------------

def expect(c, status, text, op, inputs, attrs=None, **kw):
    with pytest.raises(InferenceServerException) as e:
        infer(c, op, inputs, attrs, **kw)
    assert code(e.value) == status, e.value
    assert text in e.value.message(), e.value.message()


def test_error_codes(tc):
    x = np.ones(4, np.float32)
    expect(tc, "INVALID_ARGUMENT", "'x' dtype int32 not in {float16, bfloat16, float32}",
           "scale", {"x": x.astype(np.int32)}, {"factor": 1.0})
    expect(tc, "INVALID_ARGUMENT", "missing", "rmsnorm", {"x": np.ones((2, 4), np.float32)})
    expect(tc, "NOT_FOUND", "unknown model 'no_such_op'", "no_such_op", {"x": x})
    expect(tc, "INVALID_ARGUMENT", "attr 'factor' must be float", "scale", {"x": x},
           {"factor": "big"})
    expect(tc, "INVALID_ARGUMENT", "unknown attr 'nope'", "scale", {"x": x},
           {"factor": 1.0, "nope": 1})
    expect(tc, "INVALID_ARGUMENT", "missing required attr 'factor'", "scale", {"x": x})
    expect(tc, "INVALID_ARGUMENT", "unknown input 'q'", "scale", {"x": x, "q": x},
           {"factor": 1.0})
    # A raw content whose size does not match its shape.
    i = grpcclient.InferInput("x", [5], "FP32")
    i.set_data_from_numpy(np.ones(5, np.float32))
    i.set_shape([6])
    with pytest.raises(InferenceServerException) as e:
        tc.infer("scale", [i], parameters={"factor": 1.0})
    assert code(e.value) == "INVALID_ARGUMENT" and "raw_input_contents[0] has 20 bytes" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        tc.infer("scale", infer_inputs({"x": x}), parameters={"factor": 1.0},
                 outputs=[grpcclient.InferRequestedOutput("z")])
    assert code(e.value) == "INVALID_ARGUMENT" and "unknown output 'z'" in e.value.message()


# ---- system shared memory -------------------------------------------------

def test_system_shared_memory(tc, daemon):
    tag = "%d" % os.getpid()
    x = np.arange(64, dtype=np.float32)
    ih = shm.create_shared_memory_region("in", "/kserve_in_" + tag, x.nbytes)
    oh = shm.create_shared_memory_region("out", "/kserve_out_" + tag, x.nbytes)
    try:
        shm.set_shared_memory_region(ih, [x])
        tc.unregister_system_shared_memory()
        tc.register_system_shared_memory("in", "/kserve_in_" + tag, x.nbytes)
        tc.register_system_shared_memory("out", "/kserve_out_" + tag, x.nbytes)
        with pytest.raises(InferenceServerException) as e:
            tc.register_system_shared_memory("in", "/kserve_in_" + tag, x.nbytes)
        assert code(e.value) == "ALREADY_EXISTS"
        st = tc.get_system_shared_memory_status()
        assert set(st.regions) == {"in", "out"} and st.regions["in"].byte_size == x.nbytes
        assert st.regions["out"].key == "/kserve_out_" + tag

        i = grpcclient.InferInput("x", [64], "FP32")
        i.set_shared_memory("in", x.nbytes)
        o = grpcclient.InferRequestedOutput("y")
        o.set_shared_memory("out", x.nbytes)
        r = tc.infer("scale", [i], outputs=[o], parameters={"factor": 3.0})
        out = r.get_output("y")
        assert out.parameters["shared_memory_region"].string_param == "out"
        np.testing.assert_array_equal(shm.get_contents_as_numpy(oh, np.float32, [64]), 3 * x)
        # The input from shared memory, the output in the response.
        r = tc.infer("scale", [i], parameters={"factor": -1.0})
        np.testing.assert_array_equal(r.as_numpy("y"), -x)

        # A byte size that is not the tensor's, a region too small for it.
        bad = grpcclient.InferInput("x", [64], "FP32")
        bad.set_shared_memory("in", x.nbytes - 4)
        with pytest.raises(InferenceServerException) as e:
            tc.infer("scale", [bad], parameters={"factor": 1.0})
        assert code(e.value) == "INVALID_ARGUMENT" and "shared_memory_byte_size" in e.value.message()
        bad = grpcclient.InferInput("x", [64], "FP32")
        bad.set_shared_memory("in", x.nbytes, offset=4)
        with pytest.raises(InferenceServerException) as e:
            tc.infer("scale", [bad], parameters={"factor": 1.0})
        assert code(e.value) == "INVALID_ARGUMENT" and "past the end" in e.value.message()

        tc.unregister_system_shared_memory("in")
        assert set(tc.get_system_shared_memory_status().regions) == {"out"}
        with pytest.raises(InferenceServerException) as e:
            tc.infer("scale", [i], parameters={"factor": 1.0})
        assert code(e.value) == "NOT_FOUND" and "'in'" in e.value.message()
        tc.unregister_system_shared_memory()
        assert not tc.get_system_shared_memory_status().regions

        # Over TCP without an identity the daemon cannot tell the caller may
        # open a 0600 object, so it does not open it for it.
        anon = grpcclient.InferenceServerClient(daemon.tcp)
        with pytest.raises(InferenceServerException) as e:
            anon.register_system_shared_memory("in", "/kserve_in_" + tag, x.nbytes)
        assert code(e.value) == "PERMISSION_DENIED"
        assert not anon.get_system_shared_memory_status().regions
        anon.close()
    finally:
        shm.destroy_shared_memory_region(ih)
        shm.destroy_shared_memory_region(oh)


def test_cuda_shared_memory_without_a_gpu(tc, client):
    if "cuda" in client.info()["backends"]:
        pytest.skip("the daemon has a GPU (test_kserve_gpu.py covers it)")
    with pytest.raises(InferenceServerException) as e:
        tc.register_cuda_shared_memory("g", b"\0" * 64, 0, 1024)
    assert code(e.value) == "FAILED_PRECONDITION" and "needs a GPU" in e.value.message()


# ---- streaming, statistics ------------------------------------------------

def test_stream_infer(daemon):
    c = grpcclient.InferenceServerClient(daemon.target)
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    x = np.arange(8, dtype=np.float32)
    for k in range(6):
        c.async_stream_infer("scale", infer_inputs({"x": x}), request_id="s%d" % k,
                             parameters={"factor": float(k)})
    c.async_stream_infer("no_such_op", infer_inputs({"x": x}), request_id="bad")
    c.async_stream_infer("scale", infer_inputs({"x": x.astype(np.int32)}), request_id="bad2",
                         parameters={"factor": 1.0})
    answers = [got.get(timeout=30) for _ in range(8)]
    c.stop_stream()
    ok = {r.get_response().id: r for r, e in answers if e is None}
    assert sorted(ok) == ["s%d" % k for k in range(6)]
    for k in range(6):
        np.testing.assert_array_equal(ok["s%d" % k].as_numpy("y"), x * k)
    errors = sorted(e.message() for r, e in answers if e is not None)
    assert errors[0].startswith("INVALID_ARGUMENT: scale: 'x' dtype int32"), errors
    assert errors[1].startswith("NOT_FOUND: unknown model 'no_such_op'"), errors
    c.close()


def test_statistics_count_what_ran(tc):
    def stats():
        s = tc.get_inference_statistics("add").model_stats[0]
        return s.inference_stats.success.count, s.inference_stats.fail.count, s.execution_count
    ok0, fail0, ex0 = stats()
    a = np.ones(16, np.float32)
    for _ in range(5):
        infer(tc, "add", {"a": a, "b": a})
    expect(tc, "INVALID_ARGUMENT", "dtype", "add", {"a": a, "b": a.astype(np.float16)})
    ok1, fail1, ex1 = stats()
    assert (ok1 - ok0, fail1 - fail0, ex1 - ex0) == (5, 1, 5)
    s = tc.get_inference_statistics("add").model_stats[0]
    assert s.name == "add" and s.version == "1" and s.inference_stats.success.ns > 0
    assert s.inference_stats.compute_infer.count == s.execution_count
    every = tc.get_inference_statistics()
    assert "scale" in [m.name for m in every.model_stats]


# ---- identity, the sync API -----------------------------------------------

def test_tokens(new_daemon, tmp_path):
    f = tmp_path / "tokens"
    f.write_text("kserve-token-0123456789abcdef alice user\n")
    d = new_daemon("--auth_tokens=%s" % f)
    c = grpcclient.InferenceServerClient(d.tcp)
    with pytest.raises(InferenceServerException) as e:
        c.is_server_live()
    assert code(e.value) == "UNAUTHENTICATED"
    x = np.ones(4, np.float32)
    with pytest.raises(InferenceServerException) as e:
        infer(c, "scale", {"x": x}, {"factor": 2.0})
    assert code(e.value) == "UNAUTHENTICATED"
    h = {"authorization": "Bearer kserve-token-0123456789abcdef"}
    assert c.is_server_live(headers=h)
    r = infer(c, "scale", {"x": x}, {"factor": 2.0}, headers=h)
    np.testing.assert_array_equal(r.as_numpy("y"), 2 * x)
    c.close()


def test_sync_api(new_daemon):
    d = new_daemon("--grpc_api=sync")
    c = grpcclient.InferenceServerClient(d.target)
    assert c.is_server_ready() and c.get_model_metadata("scale").name == "scale"
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(infer(c, "scale", {"x": x}, {"factor": 2.0}).as_numpy("y"), 2 * x)
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    c.async_stream_infer("scale", infer_inputs({"x": x}), request_id="a", parameters={"factor": 3.0})
    c.async_stream_infer("nope", infer_inputs({"x": x}), request_id="b")
    first, second = got.get(timeout=30), got.get(timeout=30)
    c.stop_stream()
    np.testing.assert_array_equal(first[0].as_numpy("y"), 3 * x)
    assert second[0] is None and second[1].message().startswith("NOT_FOUND")
    c.close()
