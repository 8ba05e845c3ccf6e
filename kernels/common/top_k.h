// The top-k rule shared by top_k_mask_logits and top_k_renorm_probs (host
// code): the 'top_k' input's shapes, a row's k, the keep-all cases and the
// k-th largest value. Row b keeps every value >= the k-th largest of the row
// (ties at the boundary are kept, so a row may keep more than k), as
// FlashInfer's radix kernels do; k <= 0 or k >= vocab keeps the whole row.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kerneld/host_tensor.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld::top_k {

// Whether a row of `vocab` values with this k keeps everything.
inline bool KeepsAll(int64_t k, int64_t vocab) { return k <= 0 || k >= vocab; }

// 'top_k' is [] or [1] (one k for every row) or [batch] (k per row): the
// index step from one row's k to the next, 0 or 1.
inline int64_t KStride(const Shape& top_k) {
  return top_k.empty() || (top_k.size() == 1 && top_k[0] == 1) ? 0 : 1;
}

// The schema check: 'top_k' has one of its shapes, and the vocabulary fits
// the kernels' 32-bit counters.
inline Status CheckTopKInput(const OpDef& op, const std::vector<TensorView>& inputs, const AttrMap&,
                             ShapeBindings* bind) {
  const int64_t batch = bind->symbols.at("batch"), vocab = bind->symbols.at("vocab");
  const Shape& s = inputs[static_cast<size_t>(op.InputIndex("top_k"))].shape;
  if (!(s.empty() || (s.size() == 1 && (s[0] == 1 || s[0] == batch))))
    return InvalidArgument(op.name + ": 'top_k' has shape " + ShapeToString(s) +
                           ", expected [] or [1] (one k for every row) or [batch] = [" +
                           std::to_string(batch) + "] (a k per row)");
  if (vocab > std::numeric_limits<int32_t>::max())
    return InvalidArgument(op.name + ": '" + op.inputs[0].name +
                           "' dim 1 ('vocab'): at most 2147483647, got " + std::to_string(vocab));
  return Status::Ok();
}

// Row r's k from a host view of 'top_k' (int32 or int64).
inline int64_t RowK(const TensorView& top_k, int64_t r) {
  const int64_t i = r * KStride(top_k.shape);
  return top_k.dtype == DType::kInt64 ? top_k.ptr<int64_t>()[i] : int64_t{top_k.ptr<int32_t>()[i]};
}

// The k-th largest of row[0, n) (0 < k < n), reordering `scratch`.
template <typename V>
V KthLargest(const V* row, int64_t n, int64_t k, std::vector<V>* scratch) {
  scratch->assign(row, row + n);
  std::nth_element(scratch->begin(), scratch->begin() + (k - 1), scratch->end(), std::greater<V>());
  return (*scratch)[static_cast<size_t>(k - 1)];
}

// For the float64 references: each row's threshold (values >= it are kept;
// -inf keeps the row), from inputs `x` and "top_k". False with *error when a
// value is NaN (or, with `probabilities`, negative or infinite).
inline bool RefThresholds(const HostTensors& in, const char* x_name, const std::string& op,
                          bool probabilities, std::vector<double>* thresholds, std::string* error) {
  const HostTensor* x = RefInput(in, x_name, op, error);
  const HostTensor* k = RefInput(in, "top_k", op, error);
  if (!x || !k) return false;
  if (x->shape.size() != 2) return *error = op + ": " + x_name + " must be [batch, vocab]", false;
  const int64_t rows = x->shape[0], v = x->shape[1];
  const int64_t stride = KStride(k->shape);
  std::vector<double> scratch;
  thresholds->assign(static_cast<size_t>(rows), -INFINITY);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x->values.data() + r * v;
    for (int64_t i = 0; i < v; ++i)
      if (std::isnan(row[i]) || (probabilities && !(row[i] >= 0 && std::isfinite(row[i]))))
        return *error = op + ": the reference takes no NaN" +
                        (probabilities ? ", negative or infinite value" : "") + " (row " +
                        std::to_string(r) + ")",
               false;
    const auto kr = static_cast<int64_t>(k->values[static_cast<size_t>(r * stride)]);
    if (!KeepsAll(kr, v)) (*thresholds)[static_cast<size_t>(r)] = KthLargest(row, v, kr, &scratch);
  }
  return true;
}

}  // namespace kerneld::top_k
