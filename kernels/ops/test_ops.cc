// Test-only ops. The daemon serves them only with --enable_test_ops (they
// are NOT_FOUND otherwise and ListKernels hides them): they exist so the
// integration tests can hold a worker busy for a known time, or fault a
// device, deterministically.
#include <chrono>
#include <cstring>
#include <thread>

#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

namespace {
Status SleepCpu(KernelContext& ctx) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ctx.attr_f("ms")));
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  if (x.raw() != y.raw()) std::memcpy(y.raw(), x.raw(), static_cast<size_t>(x.nbytes()));
  return Status::Ok();
}
}  // namespace

KERNELD_OP(test_sleep) {
  OpDef op("_test_sleep");
  op.Doc("test only: y = x after sleeping `ms` milliseconds on the worker")
      .Input("x", DTypeSet::All())
      .Output("y", SameAs("x"))
      .AttrWithDefault("ms", AttrType::kFloat, 100.0, "milliseconds to hold the worker")
      .Impl("cpu", SleepCpu);
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::TestSleep, Requirements::Cuda(70), 10);
#endif
  return op;
}

KERNELD_OP(test_fault) {
  OpDef op("_test_fault");
  op.Doc("test only: faults the GPU it runs on (illegal address); the CPU impl is a no-op")
      .Input("x", DTypeSet::All())
      .Output("y", SameAs("x"))
      .Impl("cpu", [](KernelContext& ctx) {
        const TensorView& x = ctx.input("x");
        std::memcpy(ctx.output("y").raw(), x.raw(), static_cast<size_t>(x.nbytes()));
        return Status::Ok();
      });
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::TestFault, Requirements::Cuda(0), 10);
#endif
  return op;
}

}  // namespace kerneld
