// gelu_and_mul, CPU: y = act(gate) * up in float32, rounded once (common/cpu/act_and_mul.h).
#include "common/cpu/act_and_mul.h"
#include "common/cpu/small_host.h"
#include "kerneld/op.h"

namespace kerneld::cpu {

KERNELD_IMPL(gelu_and_mul, cpu) {
  op.Impl(
      "cpu", [](KernelContext& ctx) { return ActAndMul(ctx, "gelu_and_mul", act::Gelu{}); },
      Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
