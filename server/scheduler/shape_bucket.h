// A request's tuning bucket: each structural dimension its op declares
// (OpDef::TuneBy; gemm: M, N, K, transpose_b) rounded up to a power of two,
// with the inputs' dtypes. Ops that declare none bucket by the inputs'
// total element count. Computed on every request, so it allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kerneld/op.h"

namespace kerneld::server {

struct ShapeBucket {
  // Per dim: 0 for a value <= 0, else 1 + ceil(log2(value)) (1 is 1, 2 is
  // 2, 3 and 4 are 4, ...).
  std::array<uint8_t, kMaxTuneDims> code{};
  uint8_t ndims = 0;
  // The inputs' dtypes, one byte each (the first 8 inputs).
  uint64_t dtypes = 0;

  bool operator==(const ShapeBucket&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const ShapeBucket& b) {
    return H::combine(std::move(h), b.code, b.ndims, b.dtypes);
  }
};

// The power-of-two code of one dimension, and back (the bucket's upper bound).
uint8_t BucketCode(int64_t v);
int64_t BucketBound(uint8_t code);

ShapeBucket BucketOf(const OpDef& op, const KernelContext& ctx);

// "M<=16,N<=4096,K<=4096,transpose_b<=1" / "numel<=65536", and the dtypes
// "float32,float32": the words of ListKernels, the tuning file and the docs.
std::string BucketDims(const OpDef& op, const ShapeBucket& b);
std::string BucketDTypes(const ShapeBucket& b, int ninputs);
// Inverse of BucketDims and BucketDTypes (the tuning file); false when the
// text does not fit the op.
bool ParseBucket(const OpDef& op, const std::string& dims, const std::string& dtypes,
                 ShapeBucket* out);

}  // namespace kerneld::server
