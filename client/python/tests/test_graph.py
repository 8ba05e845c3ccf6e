"""client.graph(): one ExecuteGraph equals the same ops called one by one, bit for bit (docs/graphs.md)."""
import numpy as np
import pytest

import kerneld


def test_graph_equals_calls_one_by_one(client):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (3, 64)).astype(np.float32)
    w = rng.uniform(-2, 2, (64,)).astype(np.float32)
    with client.graph() as g:
        h = g.rmsnorm(x, w, eps=1e-5)
        y = g.silu_and_mul(h)
        z = g.scale(y, factor=0.5)
        out = g.run()
    want = client.scale(client.silu_and_mul(client.rmsnorm(x, w, eps=1e-5)), factor=0.5)
    assert out.shape == (3, 32) and out.dtype == np.float32
    assert out.tobytes() == want.tobytes()
    assert isinstance(z, kerneld._graph.Value)


def test_graph_declared_outputs_and_in_place_steps(client):
    rng = np.random.default_rng(8)
    x = rng.uniform(-2, 2, (2, 32)).astype(np.float32)
    r = rng.uniform(-2, 2, (2, 32)).astype(np.float32)
    w = rng.uniform(-2, 2, (32,)).astype(np.float32)
    x0, r0 = x.copy(), r.copy()
    g = client.graph()
    normed, residual = g.fused_add_rmsnorm(x, r, w)
    g.output("y", g.silu_and_mul(normed))
    g.output("residual", residual)
    out, info = g.run(return_info=True)
    assert set(out) == {"y", "residual"}
    np.testing.assert_array_equal(x, x0)  # the caller's arrays are never written
    np.testing.assert_array_equal(r, r0)
    nx, nr = client.fused_add_rmsnorm(x.copy(), r.copy(), w)
    assert out["residual"].tobytes() == nr.tobytes()
    assert out["y"].tobytes() == client.silu_and_mul(nx).tobytes()
    assert info["device"] == "cpu"


def test_graph_errors_name_the_step(client):
    g = client.graph()
    a = g.scale(np.ones(4, np.float32), factor=2.0)
    g.add(a, np.ones(8, np.float32))
    with pytest.raises(kerneld.InvalidArgument, match=r"graph step 1 \(add\)"):
        g.run()


def test_graph_output_into_a_buffer_and_a_server_buffer_input(client):
    from kerneld._graph import ServerBuffer
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    h = client.register(out)
    try:
        g = client.graph()
        g.output("y", g.scale(x, factor=2.0), buffer=h)
        assert g.run() == {}  # written into the buffer, nothing inline
        np.testing.assert_array_equal(h.array, x * 2)
        # The same memory by reference, as a ServerBuffer (not owning it).
        ref = ServerBuffer(client, h.buffer_id, "float32", (8,), h.offset, owner=False)
        g = client.graph()
        g.scale(ref.view("float32", (4,), offset=16), factor=0.5)
        np.testing.assert_array_equal(g.run(), x[4:])
    finally:
        h.close()
