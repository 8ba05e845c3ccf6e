// Checking results against an op's float64 reference (OpDef::reference,
// defined beside its schema in kernels/ops/<op>/<op>.cc): used by the unit
// and GPU tests, `kernelctl run --check` and the benchmarks.
#pragma once

#include <string>
#include <vector>

#include "kerneld/host_tensor.h"
#include "kerneld/op.h"

namespace kerneld {

// The registered op's reference outputs; false (with *error) when the op is
// unknown, has no reference, or the inputs are unusable.
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

// Reads attr `n` as a float (ints widen), or `def` when absent: for references.
double AttrOr(const AttrMap& a, const std::string& n, double def);
bool AttrOr(const AttrMap& a, const std::string& n, bool def);

// Input `name` of a reference's inputs, or nullptr with *error set.
const HostTensor* RefInput(const HostTensors& in, const char* name, const std::string& op,
                           std::string* error);

// Rows of x's last dim (*h wide); false for a scalar.
bool RefRows(const HostTensor& x, const std::string& op, int64_t* rows, int64_t* h,
             std::string* error);

}  // namespace kerneld
