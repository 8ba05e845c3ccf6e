// batch_decode_paged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh) with one query row per request, split over
// the keys when the batch is small.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchDecodePaged(KernelContext& ctx) {
  return attention::RunPagedAttend</*kPrefill=*/false>(ctx, "batch_decode_paged");
}

}  // namespace

KERNELD_IMPL(batch_decode_paged, cuda) {
  op.Impl("cuda", BatchDecodePaged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
