// Building and reading wire tensors from host values (tests, kernelctl).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kerneld/dtype.h"
#include "kerneld/host_tensor.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

// The host tensor and its bytes live in the kernel library
// (kerneld/host_tensor.h); the client adds the wire form.
using ::kerneld::Decode;
using ::kerneld::Encode;
using ::kerneld::HostTensor;
using ::kerneld::HostTensors;
using ::kerneld::Numel;
using ::kerneld::Random;

void ToProto(const HostTensor& t, v1::Tensor* out);
bool FromProto(const v1::Tensor& t, HostTensor* out);

// Parses "4096", "16x4096", "16,4096" or "[16, 4096]"; false on anything
// else ("16x", "abc", a negative dim).
bool ParseShape(const std::string& s, std::vector<int64_t>* shape);

}  // namespace kerneld::client
