// batch_prefill_paged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh), a block per query row and head group.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchPrefillPaged(KernelContext& ctx) {
  return attention::RunPagedAttend(ctx, "batch_prefill_paged", /*prefill=*/true);
}

}  // namespace

KERNELD_IMPL(batch_prefill_paged, cuda) {
  op.Impl("cuda", BatchPrefillPaged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
