// top_k_mask_logits, CPU: per row, the logits widened to float32, the k-th
// largest found by selection (std::nth_element, linear), then one pass that
// copies the kept values and writes -inf elsewhere. Rows run in parallel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "common/cpu/small_host.h"
#include "common/top_k.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// Bad data is refused before anything is written (the output may be the
// logits themselves).
template <typename T>
Status CheckNoNan(const T* x, int64_t rows, int64_t v) {
  for (int64_t i = 0; i < rows * v; ++i)
    if (std::isnan(kerneld::ToFloat(x[i])))
      return InvalidArgument("top_k_mask_logits: logits[" + std::to_string(i / v) + ", " +
                             std::to_string(i % v) + "] is NaN");
  return Status::Ok();
}

template <typename T>
void MaskRow(const T* x, T* y, int64_t v, int64_t k, std::vector<float>* f,
             std::vector<float>* scratch) {
  if (top_k::KeepsAll(k, v)) {
    if (x != y) std::copy(x, x + v, y);
    return;
  }
  f->resize(static_cast<size_t>(v));
  ToFloat(x, f->data(), v);
  const float t = top_k::KthLargest(f->data(), v, k, scratch);
  const T neg_inf = kerneld::FromFloat<T>(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < v; ++i) y[i] = (*f)[static_cast<size_t>(i)] >= t ? x[i] : neg_inf;
}

Status TopKMaskLogits(KernelContext& ctx) {
  const TensorView& logits = ctx.input("logits");
  const TensorView& top_k = ctx.input("top_k");
  TensorView& out = ctx.output("masked_logits");
  const int64_t rows = logits.dim(0), v = logits.dim(1);
  return DispatchFloating(logits.dtype, "top_k_mask_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    T* y = out.ptr<T>();
    KERNELD_RETURN_IF_ERROR(CheckNoNan(x, rows, v));
    ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(v, 1)),
                [&](int64_t b, int64_t e) {
                  std::vector<float> f, scratch;
                  for (int64_t r = b; r < e; ++r)
                    MaskRow(x + r * v, y + r * v, v, top_k::RowK(top_k, r), &f, &scratch);
                });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(top_k_mask_logits, cpu) {
  op.Impl("cpu", TopKMaskLogits, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
