"""GPU tests (marker gpu): torch and cupy tensors over CUDA IPC against a CUDA kerneld.

Run by tests/gpu_pass.sh on a GPU machine; skipped where torch sees no GPU or
the daemon has no cuda backend.
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kerneld
from reference import CASES, REFS, TOL, FLOAT32_ONLY, f64, SUPPORT

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no GPU", allow_module_level=True)

TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def gclient(daemon):
    c = kerneld.Client(daemon.target, timeout=120)
    if "cuda" not in c.info()["backends"]:
        pytest.skip("the daemon has no cuda backend: %s" % c.info()["cuda_status"])
    yield c
    c.close()


def _inputs_torch(inputs, dt):
    out = {}
    for k, v in inputs.items():
        if v.dtype.kind in "iu":
            out[k] = torch.from_numpy(v).cuda()
        elif v.dtype == np.float32 and (dt != "float32" and k in ("cos_sin_cache", "probs")):
            out[k] = torch.from_numpy(v).cuda()
        else:
            out[k] = torch.from_numpy(v.astype(np.float32)).to(TORCH_DT[dt]).cuda()
    return out


def _check(op, got, want, dt):
    rtol, atol = TOL[dt]
    g = got.float().cpu().numpy().astype(np.float64) if hasattr(got, "cpu") else f64(got.get())
    np.testing.assert_allclose(g, want, rtol=rtol, atol=atol, err_msg=op)


@pytest.mark.parametrize("n", [1, 127, 4097])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_every_op_torch_ipc(gclient, op, dt, n):
    """Every op on torch tensors, three times on the same tensors refilled
    with new data: the third call is served by a plan (_plan.py) where the
    client is native, with outputs it allocates anew. (The second makes it
    for gemm, whose output shape the client learns from the first.)"""
    if op in FLOAT32_ONLY and dt != "float32":
        pytest.skip("float32 only")
    tin = None
    for rep in range(3):
        rng = np.random.default_rng(n + 1000 * rep)
        inputs, attrs, out_dtypes = CASES[op](n, dt, rng)
        if tin is None:
            tin = _inputs_torch(inputs, dt)
        else:
            for k, v in _inputs_torch(inputs, dt).items():
                tin[k].copy_(v)
        ref_in = {k: f64(v.float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy())
                  for k, v in tin.items()}
        hits = gclient._plans.hits
        res, info = gclient.call(op, return_info=True, **tin, **attrs)
        if rep == 2 and gclient._native is not None:
            assert gclient._plans.hits == hits + 1, "the repeated call did not use its plan"
        assert info["device"].startswith("cuda"), info
        res = res if isinstance(res, tuple) else (res,)
        for r in res:
            assert isinstance(r, torch.Tensor) and r.is_cuda
        if op in SUPPORT:
            allowed = SUPPORT[op](ref_in["probs"], attrs)
            for b, s in enumerate(res[0].cpu().numpy()):
                assert int(s) in allowed[b]
            continue
        want = REFS[op](ref_in, attrs)
        outs = [o["name"] for o in gclient.describe(op)["outputs"]]
        for o, r in zip(outs, res):
            _check(op, r, want[o], out_dtypes[o] if out_dtypes[o] in TOL else dt)
    assert gclient._ipc_reg.registrations > 0


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_every_op_cupy_ipc(gclient, op, dt):
    cp = pytest.importorskip("cupy")
    if op in FLOAT32_ONLY and dt != "float32":
        pytest.skip("float32 only")
    rng = np.random.default_rng(3)
    inputs, attrs, out_dtypes = CASES[op](127, dt, rng)
    cin = {k: cp.asarray(v) for k, v in inputs.items()}
    res = gclient.call(op, **cin, **attrs)
    res = res if isinstance(res, tuple) else (res,)
    for r in res:
        assert isinstance(r, cp.ndarray)
    if op in SUPPORT:
        allowed = SUPPORT[op](f64(inputs["probs"]), attrs)
        for b, s in enumerate(res[0].get()):
            assert int(s) in allowed[b]
        return
    want = REFS[op]({k: f64(v) for k, v in inputs.items()}, attrs)
    outs = [o["name"] for o in gclient.describe(op)["outputs"]]
    for o, r in zip(outs, res):
        _check(op, r, want[o], out_dtypes[o] if out_dtypes[o] in TOL else dt)


def test_cuda_array_interface_and_dlpack(gclient):
    cp = pytest.importorskip("cupy")

    class CAI:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__
    x = cp.arange(100, dtype=cp.float32)
    y = gclient.scale(CAI(x), factor=2.0)
    assert float(y[99]) == 198.0
    t = torch.arange(50, dtype=torch.float32, device="cuda")

    class DL:
        def __dlpack__(self, stream=None):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()
    y = gclient.scale(DL(), factor=3.0)
    assert float(y[49]) == 147.0


def test_out_in_place_and_storage_offset(gclient):
    base = torch.randn(10000, device="cuda", dtype=torch.float16)
    keep = base.clone()
    x = base[37:37 + 4097]
    assert x.storage_offset() == 37
    y = gclient.scale(x, factor=2.0)
    torch.testing.assert_close(y, keep[37:37 + 4097] * 2)
    r = gclient.scale(x, factor=2.0, out=x)  # in place, at an odd offset of its allocation
    assert r is x
    torch.testing.assert_close(base[37:37 + 4097], keep[37:37 + 4097] * 2)
    torch.testing.assert_close(base[:37], keep[:37])
    torch.testing.assert_close(base[37 + 4097:], keep[37 + 4097:])
    out = torch.full((4097,), float("nan"), device="cuda", dtype=torch.float16)
    assert gclient.scale(keep[37:37 + 4097], factor=0.5, out=out) is out
    torch.testing.assert_close(out, keep[37:37 + 4097] * 0.5)
    # residual stream in place on both inputs
    xx, rr, w = (torch.randn(4, 256, device="cuda"), torch.randn(4, 256, device="cuda"),
                 torch.randn(256, device="cuda"))
    x0, r0 = xx.clone(), rr.clone()
    a, b = gclient.fused_add_rmsnorm(xx, rr, w, eps=1e-6)
    assert a is xx and b is rr
    torch.testing.assert_close(rr, x0 + r0)


def test_freed_and_reallocated_at_the_same_address(gclient):
    from kerneld import _cuda
    n = (64 << 20) // 4
    seen_reuse = False
    for attempt in range(5):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        x = torch.full((n,), 1.0, device="cuda")
        a1 = _cuda.allocation_of(x.data_ptr())
        assert (gclient.scale(x, factor=2.0)[-1] == 2).item()
        regs = gclient._ipc_reg.registrations
        old_ids = set(gclient._ipc_reg.buffer_ids())
        del x
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # cudaFree: the allocation is gone
        x = torch.full((n,), 3.0, device="cuda")
        a2 = _cuda.allocation_of(x.data_ptr())
        y = gclient.scale(x, factor=2.0, out=x)
        assert (y == 6).all().item(), "the new allocation was written (not the stale registration)"
        if a2.base == a1.base:
            seen_reuse = True
            assert a2.buffer_id != a1.buffer_id  # CUDA's buffer id tells the two apart
            assert gclient._ipc_reg.registrations == regs + 1  # re-registered
            now = {b["buffer_id"] for b in gclient.buffers(all=True)}
            assert not (old_ids - set(gclient._ipc_reg.buffer_ids())) & now  # stale one unregistered
            break
    assert seen_reuse, "torch never reused the address after empty_cache (5 tries)"


def test_a_plan_notices_an_allocation_freed_and_replaced(gclient):
    """A planned call whose tensor's allocation was freed and another made at
    the same address must not send the old registration: the plan's check
    (the CUDA buffer id at the address) sends it the generic way, which
    registers the new allocation."""
    n = (64 << 20) // 4
    for attempt in range(5):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        x = torch.full((n,), 1.0, device="cuda")
        ptr = x.data_ptr()
        for _ in range(2):
            gclient.scale(x, factor=1.0, out=x)  # the second one is planned
        hits, regs = gclient._plans.hits, gclient._ipc_reg.registrations
        if gclient._native is not None:
            assert hits > 0
        del x
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        x = torch.full((n,), 3.0, device="cuda")
        if x.data_ptr() != ptr:
            continue
        y = gclient.scale(x, factor=1.0, out=x)
        assert (y == 3).all().item()
        gclient.scale(x, factor=2.0, out=x)
        assert (x == 6).all().item(), "the new allocation was written (not the stale registration)"
        assert gclient._ipc_reg.registrations == regs + 1
        assert gclient._plans.hits == hits  # the check refused the stale plan
        return
    pytest.skip("torch never reused the address after empty_cache (5 tries)")


def test_allocation_of_in_one_call_matches_one_attribute_a_call():
    # allocation_of reads six attributes in one cuPointerGetAttributes; the
    # one-by-one path (cuPointerGetAttribute) is the reference.
    from kerneld import _cuda
    big = torch.empty(1 << 20, device="cuda", dtype=torch.float16)
    for t in (big, big[1000:], torch.empty(3, device="cuda")):
        a = _cuda.allocation_of(t.data_ptr())
        b = _cuda._allocation_of_one_by_one(_cuda.lib(), t.data_ptr())
        assert (a.device, a.base, a.size, a.buffer_id, a.context) == \
            (b.device, b.base, b.size, b.buffer_id, b.context)
        assert a.base <= t.data_ptr() < a.base + a.size
    host = np.zeros(16)
    with pytest.raises(ValueError, match="not CUDA device memory"):
        _cuda.allocation_of(host.ctypes.data)


def test_registration_is_cached(gclient):
    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    gclient.scale(x, factor=2.0)
    regs = gclient._ipc_reg.registrations
    for _ in range(20):
        gclient.scale(x, factor=2.0, out=x)
    assert gclient._ipc_reg.registrations == regs


def test_value_errors_on_gpu(gclient):
    x = torch.randn(8, 8, device="cuda").t()
    with pytest.raises(ValueError, match=r"not contiguous.*x.contiguous\(\)"):
        gclient.scale(x, factor=2.0)
    with pytest.raises(ValueError, match="dtype float64 not in"):
        gclient.scale(torch.zeros(4, device="cuda", dtype=torch.float64), factor=2.0)


def test_register_gpu_handle(gclient):
    x = torch.ones(1024, device="cuda")
    with gclient.register(x) as h:
        assert gclient.scale(h, factor=2.0, out=h) is x
        assert (x == 2).all().item()
        assert h.buffer_id in {b["buffer_id"] for b in gclient.buffers()}


def test_stream_gpu(gclient):
    xs = [torch.full((4096,), float(i), device="cuda", dtype=torch.float16) for i in range(64)]
    with gclient.stream() as s:
        futs = [s.submit("scale", x=x, factor=2.0) for x in xs]
    for i, f in enumerate(futs):
        assert (f.result() == 2 * i).all().item()


def test_two_client_processes(daemon, gclient):
    code = textwrap.dedent("""
        import sys, torch, kerneld
        c = kerneld.Client(sys.argv[1])
        for i in range(300):
            x = torch.full((4096 + i,), float(i), device="cuda", dtype=torch.bfloat16)
            y = c.scale(x, factor=2.0)
            assert (y == 2 * i).all().item(), i
        c.close()
        print("ok")
    """)
    ps = [subprocess.Popen([sys.executable, "-c", code, daemon.target], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in ps:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0 and out.strip() == "ok", err


@pytest.mark.parametrize("rpc", ["native", "native_unary", "stream"])
def test_torch_ipc_over_anonymous_tcp(daemon, gclient, rpc):
    """The default target is plaintext TCP, where each connection is a
    principal of its own: a CUDA tensor registered over grpcio is used by
    the call (over grpcio too) and not refused as another's buffer; an
    inline call on the same client stays native."""
    from kerneld import _native
    if rpc.startswith("native") and _native.load()[0] is None:
        pytest.skip("libkerneld_native not found")
    c = kerneld.Client(daemon.tcp, rpc=rpc, timeout=120)
    try:
        x = torch.randn(4097, device="cuda", dtype=torch.float16)
        y = torch.full_like(x, float("nan"))
        for _ in range(3):
            c.scale(x, factor=2.0, out=y)
            torch.testing.assert_close(y, x * 2)
            torch.testing.assert_close(c.scale(x, factor=3.0), x * 3)
        h = np.linspace(-1, 1, 64, dtype=np.float32)
        np.testing.assert_array_equal(c.scale(h, factor=2.0), h * 2)
        assert c._buffers_split is (True if rpc.startswith("native") else False)
    finally:
        c.close()


def test_empty_gpu_tensors(gclient):
    x = torch.empty(0, 16, device="cuda", dtype=torch.float16)
    y = gclient.scale(x, factor=2.0)
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.shape == (0, 16)
    assert gclient.scale(x, factor=2.0, out=torch.empty(0, 16, device="cuda", dtype=torch.float16)).shape == (0, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("side_stream", [False, True])
def test_producing_stream_is_finished_before_the_daemon_reads(gclient, side_stream):
    """The stream rule: work queued on torch's current stream (the default one,
    or a side stream made current) is done before the request goes out. The
    input is written after a long GPU sleep on that stream: a client that did
    not wait for it would send zeros."""
    s = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    for _ in range(3):
        x = torch.zeros(4097, device="cuda", dtype=torch.float16)
        y = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)  # tens of ms of GPU spin on s
            x.fill_(3.0)
            gclient.scale(x, factor=2.0, out=y)
        assert bool((y == 6.0).all()), y[:8]


@pytest.mark.gpu
def test_a_call_keeps_no_reference_to_its_tensors(gclient):
    """After call() returns, the client holds nothing that keeps the caller's
    tensors alive: `del` frees their GPU memory at once, with no garbage
    collection (a reference cycle through a CudaArg did keep them)."""
    import gc
    import weakref
    gc.disable()
    try:
        x = torch.ones(4097, device="cuda")
        y = torch.empty_like(x)
        for _ in range(3):  # the later calls on their plans (which hold no tensor either)
            gclient.scale(x, factor=2.0, out=y)
            out = gclient.scale(x, factor=3.0)  # an output the client allocated
        refs = [weakref.ref(t) for t in (x, y, out)]
        del x, y, out
        assert [r() for r in refs] == [None, None, None]
    finally:
        gc.enable()


@pytest.mark.gpu
def test_aio_user_kernel_equals_the_builtin(new_daemon, tmp_path):
    """kerneld.aio.Client's register_kernel on a CUDA daemon (docs/user-kernels.md):
    the user scale, awaited on a torch tensor over CUDA IPC and on a host array,
    equals the built-in scale bit for bit; evaluate_kernel then finds the two
    equally far from the float64 reference."""
    import asyncio
    from test_user_kernels import SCALE, SPEC
    d = new_daemon("--allow_user_kernels", "--jit_cache_dir=%s" % (tmp_path / "jit"))

    async def main():
        async with kerneld.aio.Client(d.target, timeout=120) as c:
            info = await c.info()
            if "cuda" not in info["backends"]:
                pytest.skip("the daemon has no cuda backend: %s" % info["cuda_status"])
            op = await c.register_kernel(SCALE, "my_scale", SPEC)
            x = torch.randn(1 << 20, device="cuda")
            got = await op(x, factor=1.7)
            assert isinstance(got, torch.Tensor) and got.is_cuda
            assert torch.equal(got, await c.scale(x, factor=1.7))
            y = torch.full_like(x, float("nan"))
            await c.my_scale(x, factor=-3.0, out=y)
            assert torch.equal(y, await c.scale(x, factor=-3.0))
            xh = np.random.default_rng(0).standard_normal(4097).astype(np.float32)
            np.testing.assert_array_equal(await op(xh, factor=1.7), xh * np.float32(1.7))

            ev = await c.evaluate_kernel("my_scale", "scale", (1 << 20,), attrs={"factor": 2.0},
                                         iterations=5)
            (e,) = ev["errors"]
            assert e["output"] == "y" and e["max_abs_error"] == e["builtin_max_abs_error"], ev
            assert ev["user_us"] > 0 and ev["builtin_us"] > 0 and ev["iterations"] == 5, ev
            assert (await c.list_user_kernels())[0]["calls"] >= 3
            await c.unregister_kernel("my_scale")
            assert "my_scale" not in await c.ops()
    asyncio.run(main())
