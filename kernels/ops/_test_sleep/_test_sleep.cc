// _test_sleep, a test-only op. The daemon serves test ops only with
// --enable_test_ops (they are NOT_FOUND otherwise and ListKernels hides
// them): this one holds a worker busy for a known time, deterministically.
#include <chrono>
#include <cstring>
#include <thread>

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
      .AttrWithDefault("ms", AttrType::kFloat, 100.0, "milliseconds to hold the worker");
  return op;
}

// The CPU impl is the op's own test double: it lives beside the schema.
KERNELD_IMPL(test_sleep, cpu) { op.Impl("cpu", SleepCpu, Requirements::Cpu(), kPriorityFallback); }

}  // namespace kerneld
