// How kernel_bench sizes an op (OpDef::bench, declared beside its schema).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kerneld/attr.h"
#include "kerneld/tensor.h"

namespace kerneld {

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
};

}  // namespace kerneld
