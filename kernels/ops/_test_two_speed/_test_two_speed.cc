// _test_two_speed, a test-only op (served only with --enable_test_ops, like
// every "_test_*" op): y = x, by two CPU implementations of known speeds.
// The static ranks favour the slow one, so a scheduler that picks the fast
// one has measured them: the online tuner's integration test
// (tests/integration/tuning_test.cc) runs on it.
#include <chrono>
#include <cstring>
#include <thread>

#include "kerneld/op.h"

namespace kerneld {

namespace {
Status CopyAfter(KernelContext& ctx, double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  if (x.raw() != y.raw()) std::memcpy(y.raw(), x.raw(), static_cast<size_t>(x.nbytes()));
  return Status::Ok();
}
}  // namespace

KERNELD_OP(test_two_speed) {
  OpDef op("_test_two_speed");
  op.Doc(
        "test only: y = x; the cpu impl takes `fast_ms`, _test_slow takes `slow_ms` (and ranks "
        "first statically)")
      .Input("x", DTypeSet::All())
      .Output("y", SameAs("x"))
      .AttrWithDefault("fast_ms", AttrType::kFloat, 0.3, "milliseconds the cpu impl takes")
      .AttrWithDefault("slow_ms", AttrType::kFloat, 3.0, "milliseconds _test_slow takes");
  return op;
}

// Both impls are the op's own test doubles: they live beside the schema.
// A backend named "_..." is a test double: registries list no such backend.
KERNELD_IMPL(test_two_speed, cpu) {
  op.Impl(
      "cpu", [](KernelContext& ctx) { return CopyAfter(ctx, ctx.attr_f("fast_ms")); },
      Requirements::Cpu(), kPriorityFallback);
  op.Impl(
      "_test_slow", [](KernelContext& ctx) { return CopyAfter(ctx, ctx.attr_f("slow_ms")); },
      Requirements::Cpu(), kPriorityFallback + 1);
}

}  // namespace kerneld
