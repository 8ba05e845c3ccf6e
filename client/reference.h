// Float64 host references for the ops, used by `kernelctl run --check` and
// by the tests: each computes an op's outputs from its inputs in double.
#pragma once

#include <map>
#include <string>

#include "kerneld/op.h"
#include "tensor_util.h"

namespace kerneld::client {

using HostTensors = std::map<std::string, HostTensor>;

// False (with *error) when no reference exists for op or inputs are bad.
bool Reference(const std::string& op, const HostTensors& inputs, const AttrMap& attrs,
               HostTensors* outputs, std::string* error);

// max |a - b| and whether every element is within atol + rtol * |ref|.
struct Comparison {
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t mismatches = 0;
  int64_t first_bad = -1;
};
Comparison Compare(const std::vector<double>& got, const std::vector<double>& ref, double rtol,
                   double atol);

// The house tolerances: float32 1e-5/1e-5; float16 1e-3/1e-3; bfloat16 1e-2/1e-2.
void Tolerance(DType dt, double* rtol, double* atol);

}  // namespace kerneld::client
