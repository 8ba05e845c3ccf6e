// add: y = a + b, element-wise.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(add) {
  OpDef op("add");
  op.Doc("y = a + b, element-wise; a and b have the same dtype and shape. Accumulate in "
         "float32, round once to the output dtype (round to nearest even). y may alias a "
         "(in place).")
      .Input("a", kFloatingTypes, "[...]", "any shape, contiguous")
      .Input("b", kFloatingTypes, "[...]", "a's dtype and shape, contiguous")
      .Output("y", SameAs("a"), "a's dtype and shape")
      .MayAlias("y", "a")
      .SameDType("a", "b")
      .Check([](const OpDef& def, const std::vector<TensorView>& in, const AttrMap&,
                ShapeBindings*) -> Status {
        // "[...]" binds nothing, so the shapes are compared here.
        const TensorView& a = in[static_cast<size_t>(def.InputIndex("a"))];
        const TensorView& b = in[static_cast<size_t>(def.InputIndex("b"))];
        if (a.shape != b.shape)
          return InvalidArgument("add: 'b' has shape " + ShapeToString(b.shape) + ", expected " +
                                 ShapeToString(a.shape) + " (the shape of 'a')");
        return Status::Ok();
      })
      .Impl("cpu", cpu::Add, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::Add, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
