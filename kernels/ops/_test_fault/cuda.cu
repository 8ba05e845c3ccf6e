// _test_fault, CUDA: writes through a wild pointer so the device raises an
// illegal-address error (sticky: the context is lost). Only the daemon's
// fault-isolation test runs it (--enable_test_ops).
#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {
__global__ void WildWrite(float* p) { *p = 1.0f; }
}  // namespace

Status TestFault(KernelContext& ctx) {
  // An address far outside any allocation.
  WildWrite<<<1, 1, 0, StreamOf(ctx)>>>(reinterpret_cast<float*>(uintptr_t{0xdead0000000}));
  KERNELD_RETURN_IF_ERROR(CheckLaunch("_test_fault"));
  // The fault shows at synchronization; report it as this request's error.
  return CudaStatus(cudaStreamSynchronize(StreamOf(ctx)), "_test_fault");
}

KERNELD_IMPL(test_fault, cuda) {
  op.Impl("cuda", TestFault, Requirements::Cuda(0), kPriorityDevice);
}

}  // namespace kerneld::cuda
