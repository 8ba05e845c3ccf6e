// layernorm's operands and attribute as every backend reads them:
// y = (x - mean) / sqrt(var + eps) * gamma + beta over each row of x.
#pragma once

#include "kerneld/op.h"

namespace kerneld::layernorm {

struct LayerNormArgs {
  const TensorView& x;
  const TensorView& gamma;
  const TensorView& beta;
  TensorView& y;
  float eps;
};

inline LayerNormArgs LayerNormArgsOf(KernelContext& ctx) {
  return {ctx.input("x"), ctx.input("gamma"), ctx.input("beta"), ctx.output("y"),
          static_cast<float>(ctx.attr_f("eps"))};
}

}  // namespace kerneld::layernorm
