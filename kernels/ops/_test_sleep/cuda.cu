// _test_sleep, CUDA: holds the stream for `ms` (a spinning single thread,
// timed by the global nanosecond timer), then y = x. Test only.
#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {
__global__ void SpinKernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
}  // namespace

Status TestSleep(KernelContext& ctx) {
  cudaStream_t s = StreamOf(ctx);
  SpinKernel<<<1, 1, 0, s>>>(static_cast<uint64_t>(ctx.attr_f("ms") * 1e6));
  KERNELD_RETURN_IF_ERROR(CheckLaunch("_test_sleep"));
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  if (x.raw() != y.raw())
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(y.raw(), x.raw(), static_cast<size_t>(x.nbytes()),
                                   cudaMemcpyDeviceToDevice, s),
                   "_test_sleep"));
  return Status::Ok();
}

KERNELD_IMPL(test_sleep, cuda) {
  op.Impl("cuda", TestSleep, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
