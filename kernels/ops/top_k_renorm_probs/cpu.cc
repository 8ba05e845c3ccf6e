// top_k_renorm_probs, CPU: per row, the probabilities widened to float32
// and checked, the k-th largest found by selection (std::nth_element), the
// kept mass summed in float64, then one pass writing p / mass or 0, rounded
// once. Rows run in parallel.
#include <algorithm>
#include <cmath>
#include <cstdint>
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
// probabilities themselves).
template <typename T>
Status CheckProbs(const T* p, int64_t rows, int64_t v) {
  for (int64_t i = 0; i < rows * v; ++i) {
    const float x = kerneld::ToFloat(p[i]);
    if (!std::isfinite(x) || x < 0)
      return InvalidArgument("top_k_renorm_probs: probs[" + std::to_string(i / v) + ", " +
                             std::to_string(i % v) + "] = " + std::to_string(x) +
                             " is not a finite non-negative probability");
  }
  return Status::Ok();
}

template <typename T>
void RenormRow(const T* x, T* y, int64_t v, int64_t k, std::vector<float>* f,
               std::vector<float>* scratch) {
  f->resize(static_cast<size_t>(v));
  float* row = f->data();
  ToFloat(x, row, v);
  const float t = top_k::KeepsAll(k, v) ? 0.0f : top_k::KthLargest(row, v, k, scratch);
  double kept = 0;
  for (int64_t i = 0; i < v; ++i) kept += row[i] >= t ? row[i] : 0.0f;
  for (int64_t i = 0; i < v; ++i)
    row[i] = row[i] >= t && kept > 0 ? static_cast<float>(row[i] / kept) : 0.0f;
  FromFloat(row, y, v);
}

Status TopKRenormProbs(KernelContext& ctx) {
  const TensorView& probs = ctx.input("probs");
  const TensorView& top_k = ctx.input("top_k");
  TensorView& out = ctx.output("renorm_probs");
  const int64_t rows = probs.dim(0), v = probs.dim(1);
  return DispatchFloating(probs.dtype, "top_k_renorm_probs", [&](auto tag) {
    using T = decltype(tag);
    const T* x = probs.ptr<T>();
    T* y = out.ptr<T>();
    KERNELD_RETURN_IF_ERROR(CheckProbs(x, rows, v));
    ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(v, 1)),
                [&](int64_t b, int64_t e) {
                  std::vector<float> f, scratch;
                  for (int64_t r = b; r < e; ++r)
                    RenormRow(x + r * v, y + r * v, v, top_k::RowK(top_k, r), &f, &scratch);
                });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(top_k_renorm_probs, cpu) {
  op.Impl("cpu", TopKRenormProbs, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
