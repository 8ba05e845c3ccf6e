// _test_fault, a test-only op (served only with --enable_test_ops): it
// faults the GPU it runs on, so the integration tests can take a device
// down deterministically.
#include <cstring>

#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(test_fault) {
  OpDef op("_test_fault");
  op.Doc("test only: faults the GPU it runs on (illegal address); the CPU impl is a no-op")
      .Input("x", DTypeSet::All())
      .Output("y", SameAs("x"));
  return op;
}

// The CPU impl copies x: there is no device to fault.
KERNELD_IMPL(test_fault, cpu) {
  op.Impl("cpu", [](KernelContext& ctx) {
    const TensorView& x = ctx.input("x");
    std::memcpy(ctx.output("y").raw(), x.raw(), static_cast<size_t>(x.nbytes()));
    return Status::Ok();
  });
}

}  // namespace kerneld
