#include "reference.h"

#include <cmath>

namespace kerneld::client {

namespace {
double AttrF(const AttrMap& a, const std::string& n, double def) {
  auto it = a.find(n);
  if (it == a.end()) return def;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}
}  // namespace

bool Reference(const std::string& op, const HostTensors& in, const AttrMap& attrs,
               HostTensors* out, std::string* error) {
  if (op == "scale") {
    auto it = in.find("x");
    if (it == in.end()) return *error = "scale needs input x", false;
    // The kernel multiplies in float32: the factor it sees is a float.
    double f = static_cast<float>(AttrF(attrs, "factor", 1.0));
    HostTensor y = it->second;
    for (auto& v : y.values) v *= f;
    (*out)["y"] = std::move(y);
    return true;
  }
  *error = "no host reference for op '" + op + "'";
  return false;
}

Comparison Compare(const std::vector<double>& got, const std::vector<double>& ref, double rtol,
                   double atol) {
  Comparison c;
  if (got.size() != ref.size()) {
    c.mismatches = static_cast<int64_t>(std::max(got.size(), ref.size()));
    c.first_bad = 0;
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(got[i] - ref[i]);
    bool bad = !(e <= atol + rtol * std::fabs(ref[i]));  // NaN never passes
    if (std::isnan(got[i]) && std::isnan(ref[i])) bad = false, e = 0;
    if (std::isinf(ref[i]) && got[i] == ref[i]) bad = false, e = 0;
    c.max_abs_err = std::max(c.max_abs_err, std::isnan(e) ? INFINITY : e);
    if (ref[i] != 0) c.max_rel_err = std::max(c.max_rel_err, e / std::fabs(ref[i]));
    if (bad) {
      if (c.first_bad < 0) c.first_bad = static_cast<int64_t>(i);
      ++c.mismatches;
    }
  }
  return c;
}

void Tolerance(DType dt, double* rtol, double* atol) {
  switch (dt) {
    case DType::kFloat16: *rtol = *atol = 1e-3; break;
    case DType::kBFloat16: *rtol = *atol = 1e-2; break;
    default: *rtol = *atol = 1e-5; break;
  }
}

}  // namespace kerneld::client
