// Building and reading wire tensors from host values (tests, kernelctl).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kerneld/dtype.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

// A host tensor in float64 (the reference precision) with its wire dtype.
struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> values;  // already rounded to dtype when made by Random()
};

int64_t Numel(const std::vector<int64_t>& shape);

// Values uniform in [lo, hi), rounded to dtype so the reference sees exactly
// what the server gets. Integer dtypes draw integers in [lo, hi).
HostTensor Random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo = -2,
                  double hi = 2);

// Encodes values as little-endian bytes of dtype (rounding to nearest even).
std::string Encode(DType dt, const std::vector<double>& values);
// Decodes bytes of dtype; false when the size does not match.
bool Decode(DType dt, const std::string& bytes, std::vector<double>* values);

void ToProto(const HostTensor& t, v1::Tensor* out);
bool FromProto(const v1::Tensor& t, HostTensor* out);

// Parses "4096", "16x4096", "16,4096" or "[16, 4096]".
bool ParseShape(const std::string& s, std::vector<int64_t>* shape);

}  // namespace kerneld::client
