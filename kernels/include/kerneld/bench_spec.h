// How kernel_bench sizes an op (OpDef::bench, declared beside its schema).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kerneld/attr.h"
#include "kerneld/dtype.h"
#include "kerneld/host_tensor.h"
#include "kerneld/tensor.h"

namespace kerneld {

// One problem as kernel_bench made it, for the hooks below: each input's
// shape, the dtype of the op's first input, the index inputs it generated
// from their schema's InputGen (their values), and the attrs.
struct BenchProblem {
  std::map<std::string, Shape> shapes;
  DType dtype = DType::kFloat32;
  HostTensors index;
  AttrMap attrs;
};

// How kernel_bench sizes the op for a (rows, hidden) problem: each input's
// shape, the attrs, and the range its random floating inputs are drawn from.
struct BenchSpec {
  std::function<std::map<std::string, Shape>(int64_t rows, int64_t hidden)> shapes;
  AttrMap attrs;
  double lo = -1, hi = 1;
  bool range_per_hidden = false;  // [lo, hi) / hidden: probabilities of a row
  // Problems kernel_bench also runs for this op, beside the shared decode,
  // mid and large (softmax: decode batches of 32k-128k vocabularies).
  struct Problem {
    std::string name;
    int64_t rows, hidden;
  };
  std::vector<Problem> extra = {};  // default: none (and no -Wmissing-field-initializers)
  // The bytes a run must move where that is not every input read once and
  // every output written once (an in-place append writes a few rows of its
  // caches; a decode reads only the slots its requests hold); empty: those.
  std::function<double(const BenchProblem&)> bytes = {};
  // Floating-point operations of a run, for TFLOP/s (attention prefill);
  // empty: the op is judged by bytes alone.
  std::function<double(const BenchProblem&)> flops = {};
};

}  // namespace kerneld
