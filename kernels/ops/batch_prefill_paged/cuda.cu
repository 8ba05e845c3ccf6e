// batch_prefill_paged, CUDA binding: the shared attention kernels
// (common/attention/attend_binding.cuh): the tiled tensor-core prefill
// (prefill_mma.cuh) where it takes the request, else a block per query row
// and head group (attend.cuh).
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchPrefillPaged(KernelContext& ctx) {
  return attention::RunPagedAttend</*kPrefill=*/true>(ctx, "batch_prefill_paged");
}

}  // namespace

KERNELD_IMPL(batch_prefill_paged, cuda) {
  op.Impl("cuda", BatchPrefillPaged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
