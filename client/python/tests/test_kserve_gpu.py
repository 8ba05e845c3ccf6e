"""The KServe front end's CUDA shared memory through tritonclient's own
utilities (marker gpu): a region made by tritonclient.utils.cuda_shared_memory,
registered with its raw handle, scale read from and written into it zero
copy. Needs a GPU, a CUDA kerneld and tritonclient[grpc,cuda]; skipped
otherwise (tests/gpu/kserve_gpu_test.cc covers the same path in C++)."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

grpcclient = pytest.importorskip("tritonclient.grpc")
try:
    import tritonclient.utils.cuda_shared_memory as cudashm
except (ImportError, RuntimeError) as e:  # RuntimeError: no cuda-python
    pytest.skip("tritonclient's CUDA shared memory utilities: %s" % e, allow_module_level=True)


def test_cuda_shared_memory_zero_copy(daemon):
    c = grpcclient.InferenceServerClient(daemon.target)
    if "cuda_shared_memory" not in c.get_server_metadata().extensions:
        pytest.skip("the daemon serves no GPU")
    x = np.linspace(-4, 4, 4096).astype(np.float32)
    ih = cudashm.create_shared_memory_region("in", x.nbytes, 0)
    oh = cudashm.create_shared_memory_region("out", x.nbytes, 0)
    try:
        cudashm.set_shared_memory_region(ih, [x])
        c.unregister_cuda_shared_memory()
        c.register_cuda_shared_memory("in", cudashm.get_raw_handle(ih), 0, x.nbytes)
        c.register_cuda_shared_memory("out", cudashm.get_raw_handle(oh), 0, x.nbytes)
        assert set(c.get_cuda_shared_memory_status().regions) == {"in", "out"}
        i = grpcclient.InferInput("x", [4096], "FP32")
        i.set_shared_memory("in", x.nbytes)
        o = grpcclient.InferRequestedOutput("y")
        o.set_shared_memory("out", x.nbytes)
        r = c.infer("scale", [i], outputs=[o],
                    parameters={"factor": 3.0, "kerneld.backend": "cuda"})
        assert not r.get_response().raw_output_contents[0]  # no bytes in the answer
        y = cudashm.get_contents_as_numpy(oh, np.float32, [4096])
        np.testing.assert_array_equal(y, 3 * x)
        c.unregister_cuda_shared_memory()
        assert not c.get_cuda_shared_memory_status().regions
    finally:
        cudashm.destroy_shared_memory_region(ih)
        cudashm.destroy_shared_memory_region(oh)
        c.close()
