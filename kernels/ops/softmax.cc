// softmax: probabilities from logits, row by row.
#include <cmath>
#include <string>

#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

namespace {

Status CheckTemperature(const OpDef& op, const std::vector<TensorView>&, const AttrMap& attrs,
                        ShapeBindings*) {
  auto it = attrs.find("temperature");
  if (it == attrs.end()) return Status::Ok();  // the default, 1.0
  const double t = std::get<double>(it->second);
  if (!(t > 0) || !std::isfinite(t))
    return InvalidArgument(op.name + ": attr 'temperature' must be a finite value > 0, got " +
                           AttrValueToString(it->second));
  return Status::Ok();
}

}  // namespace

KERNELD_OP(softmax) {
  OpDef op("softmax");
  op.Doc("probs[b, :] = softmax(logits[b, :] / temperature), a numerically stable (max-"
         "subtracted) softmax over the last dim. Accumulated in float32; the output is float32 "
         "whatever the logits' dtype.")
      .Input("logits", kFloatingTypes, "[batch, vocab]", "any vocab size (odd ones too)")
      .Check(CheckTemperature)
      .Output("probs", ShapeOf("[batch, vocab]", DType::kFloat32), "float32 probabilities")
      .AttrWithDefault("temperature", AttrType::kFloat, 1.0, "divides the logits; > 0")
      .Impl("cpu", cpu::Softmax, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::Softmax, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
