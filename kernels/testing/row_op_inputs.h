// Random inputs for the row-wise ops (rmsnorm, fused_add_rmsnorm, layernorm,
// the *_and_mul activations, add) and their tolerances, shared by the unit
// (CPU) and gpu (CUDA) tests so both sweep the same cases.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "op_runner.h"

namespace kerneld::testing {

// Inputs of a norm op for x of `shape` (the last dim is hidden_size):
// values in [-2, 2), rounded to the dtype.
inline HostTensors NormInputs(const std::string& op, DType dt, const std::vector<int64_t>& shape,
                              std::mt19937_64& rng) {
  const int64_t h = shape.back();
  HostTensors in = {{"x", Random(dt, shape, rng)}};
  if (op == "layernorm") {
    in["gamma"] = Random(dt, {h}, rng);
    in["beta"] = Random(dt, {h}, rng);
  } else {
    in["weight"] = Random(dt, {h}, rng);
  }
  if (op == "fused_add_rmsnorm") in["residual"] = Random(dt, shape, rng);
  return in;
}

// The output a may_alias run writes over its input ("" for none): the
// norms' y may be x; fused_add_rmsnorm is always in place.
inline std::string NormAlias(const std::string& op, bool in_place) {
  return in_place && op != "fused_add_rmsnorm" ? "y" : "";
}

// Norm tolerance: 1e-2 for half types (the reduction order differs from the
// float64 reference's), the dtype's default (-1) for float32.
inline double NormTol(DType dt) { return dt == DType::kFloat32 ? -1 : 1e-2; }

inline const std::vector<std::string>& NormOps() {
  static const std::vector<std::string> v = {"rmsnorm", "fused_add_rmsnorm", "layernorm"};
  return v;
}

inline const std::vector<std::string>& ActOps() {
  static const std::vector<std::string> v = {"silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"};
  return v;
}

// "float16" -> "float16"; for test names.
inline std::string DTypeLabel(DType dt) { return std::string(DTypeName(dt)); }

// Compares two runs' outputs within (rtol, atol) (-1: the dtype's
// default); "" when every output matches.
inline std::string CompareRuns(const OpRun& want, const OpRun& got, double rtol = -1,
                               double atol = -1) {
  for (const auto& [name, w] : want.outputs) {
    auto it = got.outputs.find(name);
    if (it == got.outputs.end()) return "missing output " + name;
    double rt, at;
    Tolerance(w.dtype, &rt, &at);
    if (rtol >= 0) rt = rtol;
    if (atol >= 0) at = atol;
    auto c = Compare(it->second.values, w.values, rt, at);
    if (c.mismatches)
      return name + ": " + std::to_string(c.mismatches) + " of " + std::to_string(w.values.size()) +
             " elements differ (first at " + std::to_string(c.first_bad) + "; max abs err " +
             std::to_string(c.max_abs_err) + ")";
  }
  return "";
}

}  // namespace kerneld::testing
