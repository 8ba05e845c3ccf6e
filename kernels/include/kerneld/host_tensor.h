// Host tensors in float64 (the reference precision) with their dtype, and
// their little-endian bytes: what the float64 references, the tests, the
// bench and the C++ client exchange. No gRPC or protobuf here: the client
// adds the wire form (client/tensor_util.h).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kerneld/dtype.h"

namespace kerneld {

struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> values;  // already rounded to dtype when made by Random()
};

// Tensors by input or output name.
using HostTensors = std::map<std::string, HostTensor>;

int64_t Numel(const std::vector<int64_t>& shape);

// v rounded to dt the way a kernel rounds its float32 result (floating
// dtypes; others unchanged).
double RoundTo(DType dt, double v);

// Values uniform in [lo, hi), rounded to dtype so the reference sees exactly
// what the kernel gets. Integer dtypes draw integers in [lo, hi).
HostTensor Random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo = -2,
                  double hi = 2);

// Encodes values as little-endian bytes of dtype (rounding to nearest even).
std::string Encode(DType dt, const std::vector<double>& values);
// Decodes bytes of dtype; false when the size does not match.
bool Decode(DType dt, const std::string& bytes, std::vector<double>* values);

}  // namespace kerneld
