// Schema checks shared by the sampling ops (probs [batch, vocab] -> int32
// samples [batch]).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "kerneld/op.h"

namespace kerneld {

// The vocabulary a sampling op can draw from: not empty (the backends would
// disagree: cpu finds a row without mass, cuda writes -1), and indexable by
// the int32 samples.
inline Status CheckSamplingVocab(const OpDef& op, const ShapeBindings& bind) {
  const int64_t vocab = bind.symbols.at("vocab");
  if (vocab == 0 && bind.symbols.at("batch") > 0)
    return InvalidArgument(op.name + ": 'probs' dim 1 ('vocab') is 0; there is no token to sample");
  if (vocab > std::numeric_limits<int32_t>::max())
    return InvalidArgument(op.name +
                           ": 'probs' dim 1 ('vocab'): at most 2147483647 (int32 samples), got " +
                           std::to_string(vocab));
  return Status::Ok();
}

// kernel_bench's shapes for a sampling op: probs [rows, hidden] around
// 1 / hidden, never zero, so every token is in play.
inline BenchSpec SamplingBench(AttrMap attrs) {
  BenchSpec bench;
  bench.shapes = [](int64_t t, int64_t h) {
    return std::map<std::string, Shape>{{"probs", {t, h}}};
  };
  bench.attrs = std::move(attrs);
  bench.lo = 0.5;
  bench.hi = 1.5;
  bench.range_per_hidden = true;
  return bench;
}

}  // namespace kerneld
