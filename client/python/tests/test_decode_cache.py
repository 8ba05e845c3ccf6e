"""A KV cache resident in the daemon (docs/attention.md, examples/decode_loop.py):
appended to over many calls and decoded against by reference, on the CPU
backend. Every step's o and lse match a float64 attention over everything
appended, the cache's memory holds exactly the appended rows at their page
slots, and only the steps' rows, queries and index arrays travel inline."""
import importlib.util

import numpy as np
import pytest

from conftest import REPO, Daemon

import kerneld
from kerneld._graph import ServerBuffer


def _example():
    spec = importlib.util.spec_from_file_location("decode_loop", REPO / "examples/decode_loop.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def metered():
    d = Daemon("--metrics_listen=127.0.0.1:0")
    yield d
    d.stop()


def test_server_buffer_as_a_call_input_and_output(client):
    x = np.arange(16, dtype=np.float32)
    h = client.register(x)
    try:
        ref = ServerBuffer(client, h.buffer_id, "float32", (16,), h.offset, owner=False)
        np.testing.assert_array_equal(client.scale(ref, factor=2.0), x * 2)
        assert client.scale(ref, factor=3.0, out=ref) is ref  # written where it lives
        np.testing.assert_array_equal(h.array, x * 3)
    finally:
        h.close()


@pytest.mark.parametrize("page", [16, 5])
def test_decode_loop_over_a_resident_cache(metered, page):
    loop = _example()
    batch, hq, hkv, d, steps = 3, 4, 2, 64, 12
    prompts = [0, 7, 16]  # an empty cache, a partial page, a full page
    with kerneld.Client(metered.target, timeout=60) as client:
        inline0 = metered.metric("kerneld_transferred_bytes_total", 'path="inline"')
        seen = []

        def on_step(step, cache, mirror, o, lse, want_o, want_lse):
            # float16 in, float32 accumulation, one rounding to float16.
            np.testing.assert_allclose(o.astype(np.float64), want_o, rtol=2e-3, atol=2e-3)
            np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-4)
            # The daemon's writes of every call so far are in the cache's memory.
            for which, rows in ((0, mirror.k), (1, mirror.v)):
                mem = cache.host_view(which).reshape(-1, hkv, d)
                for b in range(batch):
                    slots = [p * page + j % page for j, p in
                             ((j, cache.pages[b][j // page]) for j in range(len(rows[b])))]
                    np.testing.assert_array_equal(mem[slots].astype(np.float64), rows[b])
            seen.append(step)

        lat, worst = loop.run(client, "cpu", batch, prompts, steps, hq, hkv, d, page, "float16",
                              check=True, on_step=on_step)
        inline = metered.metric("kerneld_transferred_bytes_total", 'path="inline"') - inline0
    assert seen == list(range(steps)) and len(lat) == steps and worst < 2e-3
    # What travels inline each step: k and v rows, q, o and lse, and the int32
    # index arrays; the prompt once. Never the caches (each 2 x this test's
    # keys x hkv x d x 2 bytes at least).
    pages = sum(-(-(p + steps) // page) for p in prompts)
    per_step = 2 * batch * hkv * d * 2 + 2 * batch * hq * d * 2 + batch * hq * 4 \
        + 4 * (2 * batch + 2 * (batch + 1 + pages + batch))
    prompt = 2 * sum(prompts) * hkv * d * 2 + 4 * (2 * sum(prompts) + batch + 1 + pages + batch)
    assert inline <= steps * per_step + prompt, (inline, steps * per_step + prompt)


@pytest.mark.gpu
def test_decode_loop_over_server_allocated_caches(client):
    """The same loop on a GPU daemon, the caches in AllocateBuffer'd memory."""
    if "cuda" not in client.info()["backends"]:
        pytest.skip("the daemon has no cuda backend: %s" % client.info()["cuda_status"])
    loop = _example()
    cases = [("float16", 2e-3)]
    try:
        import ml_dtypes  # noqa: F401  numpy's bfloat16
        cases.append(("bfloat16", 1e-2))
    except ImportError:
        pass
    for dtype, tol in cases:
        def on_step(step, cache, mirror, o, lse, want_o, want_lse):
            np.testing.assert_allclose(o.astype(np.float64), want_o, rtol=tol, atol=tol)
            np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-4)

        lat, worst = loop.run(client, "cuda:0", 4, [0, 15, 17, 700], 24, 32, 8, 128, 16, dtype,
                              check=True, on_step=on_step)
        assert len(lat) == 24 and worst < tol


def test_prompt_appended_in_calls_under_a_byte_limit(client):
    """A prompt too big for one message goes in several appends (split
    between requests and inside one): the cache then holds every row where
    one append would have put it."""
    loop = _example()
    batch, hkv, d, page = 3, 2, 64, 4
    prompts = [5, 0, 11]
    rng = np.random.default_rng(7)
    rows = (sum(prompts), hkv, d)
    k = rng.standard_normal(rows).astype(np.float16)
    v = rng.standard_normal(rows).astype(np.float16)
    row_bytes = 2 * hkv * d * 2
    cache = loop.PagedCache(client, "cpu", batch, 16, hkv, d, page, "float16")
    try:
        calls = []
        one = cache.append
        cache.append = lambda kr, vr, tokens: (calls.append(list(tokens)), one(kr, vr, tokens))
        cache.append_chunked(k, v, prompts, max_bytes=4 * row_bytes)  # 4 rows a call
        assert [sum(t) for t in calls] == [4, 4, 4, 4]
        assert calls[1] == [1, 0, 3]  # the end of request 0 and the start of request 2
        at = 0
        for b, n in enumerate(prompts):
            for which, src in ((0, k), (1, v)):
                mem = cache.host_view(which).reshape(-1, hkv, d)
                slots = [cache.pages[b][j // page] * page + j % page for j in range(n)]
                np.testing.assert_array_equal(mem[slots], src[at:at + n])
            at += n
    finally:
        cache.free_buffers()
