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


def _mlp_like(g, x, w):
    h = g.rmsnorm(x, w, eps=1e-5)
    return g.scale(g.silu_and_mul(h), factor=0.5)


def test_aio_graph_equals_the_sync_one(daemon, client):
    import asyncio
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, (4, 64)).astype(np.float32)
    w = rng.uniform(-2, 2, (64,)).astype(np.float32)
    with client.graph() as g:
        _mlp_like(g, x, w)
        want = g.run()

    async def main():
        async with kerneld.aio.Client(daemon.target) as c:
            async with c.graph() as g:
                _mlp_like(g, x, w)
                got, info = await g.run(return_info=True)
            with c.graph() as g2:  # a plain `with` records the same way
                _mlp_like(g2, x, w)
                again = await g2.run()
            return got, info, again
    got, info, again = asyncio.run(main())
    assert got.tobytes() == want.tobytes() and again.tobytes() == want.tobytes()
    assert info["device"] == "cpu" and info["intermediate_bytes"] > 0


def test_aio_stream_carries_graphs_between_calls(daemon, client):
    """Graph messages on ExecuteStream: each answer equals its unary call's;
    a failed graph fails its own future and the stream goes on."""
    import asyncio
    rng = np.random.default_rng(10)
    xs = [rng.uniform(-2, 2, (3, 32)).astype(np.float32) for _ in range(4)]
    w = rng.uniform(-2, 2, (32,)).astype(np.float32)
    want = []
    for x in xs:
        g = client.graph()
        _mlp_like(g, x, w)
        want.append(g.run())

    async def main():
        async with kerneld.aio.Client(daemon.target) as c:
            graphs = []
            for x in xs:
                g = c.graph()
                _mlp_like(g, x, w)
                graphs.append(g)
            bad = c.graph()
            bad.add(bad.scale(np.ones(4, np.float32), factor=2.0), np.ones(8, np.float32))
            named = c.graph()
            r = named.fused_add_rmsnorm(xs[0], xs[1], w)[1]
            named.output("residual", r)
            async with c.stream() as s:
                futs = []
                for i, g in enumerate(graphs):
                    futs.append(s.submit_graph(g))
                    futs.append(s.submit("scale", xs[i], factor=3.0))
                    if i == 1:
                        futs.append(s.submit_graph(bad))
                futs.append(s.submit_graph(named, return_info=True))
            return futs
    futs = asyncio.run(main())
    graph_results = [futs[0], futs[2], futs[5], futs[7]]
    call_results = [futs[1], futs[3], futs[6], futs[8]]
    for f, expect in zip(graph_results, want):
        assert f.result().tobytes() == expect.tobytes()
    for f, x in zip(call_results, xs):
        assert f.result().tobytes() == client.scale(x, factor=3.0).tobytes()
    with pytest.raises(kerneld.InvalidArgument, match=r"graph step 1 \(add\)"):
        futs[4].result()
    out, info = futs[9].result()
    _, residual = client.fused_add_rmsnorm(xs[0].copy(), xs[1].copy(), w)
    assert set(out) == {"residual"} and out["residual"].tobytes() == residual.tobytes()
    assert info["device"] == "cpu"


def test_graph_results_are_torch_for_torch_inputs(client):
    torch = pytest.importorskip("torch")
    x = torch.linspace(-2, 2, 3 * 64, dtype=torch.float32).reshape(3, 64)
    w = torch.linspace(0.5, 1.5, 64, dtype=torch.float32)
    with client.graph() as g:
        y = g.silu_and_mul(g.rmsnorm(x, w, eps=1e-5))
        out = g.run()
    want = client.silu_and_mul(client.rmsnorm(x, w, eps=1e-5))
    assert isinstance(out, torch.Tensor) and isinstance(want, torch.Tensor)
    assert out.shape == (3, 32) and torch.equal(out, want)
    assert isinstance(y, kerneld._graph.Value)


@pytest.mark.gpu
def test_graph_on_torch_cuda_tensors(daemon):
    """GPU tensors are graph inputs by reference (CUDA IPC); the results come
    back on their device, as a call's do; the same graph on an aio stream."""
    import asyncio
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    with kerneld.Client(daemon.target, timeout=120) as c:
        if "cuda" not in c.info()["backends"]:
            pytest.skip("the daemon has no cuda backend")
        gen = torch.Generator(device="cuda").manual_seed(3)
        x = torch.randn(4, 256, device="cuda", generator=gen)
        w = torch.rand(256, device="cuda", generator=gen) + 0.5
        with c.graph() as g:
            g.silu_and_mul(g.rmsnorm(x, w, eps=1e-5))
            out = g.run()
        want = c.silu_and_mul(c.rmsnorm(x, w, eps=1e-5))
        assert isinstance(out, torch.Tensor) and out.device == x.device
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)

    async def main():
        async with kerneld.aio.Client(daemon.target) as a:
            g = a.graph()
            g.silu_and_mul(g.rmsnorm(x, w, eps=1e-5))
            async with a.stream() as s:
                f = s.submit_graph(g)
            return f.result()
    got = asyncio.run(main())
    assert got.device == x.device
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
