// batch_prefill_ragged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh) over ragged k / v rows.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchPrefillRagged(KernelContext& ctx) {
  return attention::RunRaggedAttend(ctx, "batch_prefill_ragged");
}

}  // namespace

KERNELD_IMPL(batch_prefill_ragged, cuda) {
  op.Impl("cuda", BatchPrefillRagged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
