#include "common/cpu/small_host.h"

namespace kerneld::cpu {

std::optional<int> SmallHostRank(const KernelContext& ctx) {
  int64_t bytes = 0;
  for (const auto* views : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *views) {
      if (!v.device.is_cpu()) return std::nullopt;
      bytes += v.nbytes();
      if (bytes > kSmallHostBytes) return std::nullopt;
    }
  return kSmallHostRank;
}

void RankSmallHostFirst(OpDef& op) {
  ImplDef& impl = op.impls.back();
  impl.priority_for = SmallHostRank;
  impl.priority_doc =
      "ranks first when every tensor is in host memory and they total at most 16 KiB (staging "
      "through a GPU costs more than the kernel there)";
}

}  // namespace kerneld::cpu
